"""Checks of the user's own SparkSession, made before tidemark runs anything on it.

tidemark starts no session of its own when given one (a cluster's, Databricks', a Spark
Connect client's), so what it needs is checked on the session it gets:

- every Python worker must import tidemark, the same version as the driver, and its
  dependencies at the versions tidemark pins (the engine runs in the workers):
  :func:`ensure_workers_import_tidemark` runs one tiny job per session and, when a worker
  cannot import one, or has a version outside tidemark's pins, raises one message naming
  the package, the worker's version, the pin and the fix, instead of a
  ``ModuleNotFoundError`` or a pandas error deep in a worker's trace;
- a streaming query needs the RocksDB state store (``transformWithState`` supports no
  other): :func:`streaming_settings` sets it for the query being started and restores
  the session's value after, or fails at once naming the setting and the value.

The pins are tidemark's unconditional requirements in its installed metadata
(``importlib.metadata.requires("tidemark")``: pyspark, pyarrow, pandas, protobuf), compared
on the driver with :mod:`packaging` where it is installed and otherwise with a small
comparison of release numbers for the ``>=``, ``>``, ``<=``, ``<``, ``==`` and ``!=``
clauses tidemark uses. The workers only report what they import.

This module is pickled by value, so the probe reaches a worker that lacks tidemark.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from importlib import metadata
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import functions as F

from tidemark import __version__
from tidemark.errors import SessionSetupError
from tidemark.spark.runtime.session import session_key

try:  # a dependency of pip and setuptools, not of tidemark: used where it is installed
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - the fallback is tested through _satisfies_release
    SpecifierSet = None  # type: ignore[assignment,misc]

__all__ = [
    "ensure_workers_import_tidemark",
    "worker_requirements",
    "satisfies",
    "streaming_settings",
    "check_state_store",
    "STATE_STORE_PROVIDER",
    "ROCKSDB_PROVIDER",
]

STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_CHECKED: set[tuple[Any, ...]] = set()  # (session_key, modules its workers import)

# The workers need every unconditional requirement; without tidemark's metadata (run from
# a source tree or a zip), these, unpinned.
DEFAULT_REQUIREMENTS = ("pyspark", "pyarrow", "pandas", "protobuf")
_MODULES = {"protobuf": "google.protobuf"}  # distribution -> module, where they differ

DIST_ZIP = f"dist/tidemark-{__version__}.zip"
DIST_WHEEL = f"dist/tidemark-{__version__}-py3-none-any.whl"
HOW_TO_SHIP = (
    f"Ship the driver's tidemark {__version__} to the executors: from the driver, "
    "`tidemark.ship_to_executors(spark)` zips the installed tidemark and adds it to the "
    "session (classic or Spark Connect); or build the files with `make dist` and ship the "
    f"zip with the job: `spark-submit --py-files {DIST_ZIP} ...`, "
    f"`spark.sparkContext.addPyFile('{DIST_ZIP}')` on a classic session, "
    f"`spark.addArtifacts('{DIST_ZIP}', pyfile=True)` on Spark Connect (PySpark puts only "
    ".zip, .egg and .jar files on the workers' path, never a .whl); or install the wheel "
    f"in the cluster's Python (`pip install {DIST_WHEEL}`, an image, or the cluster's "
    "library settings). See the README, 'Ship tidemark to the executors'."
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


PYTHON_HINT = (
    "The workers' Python lacks tidemark's dependencies: point Spark at a Python that has "
    "them (`PYSPARK_PYTHON` or `spark.pyspark.python`; on a local session the driver's "
    "own interpreter, `sys.executable`), or install them in the executors' Python."
)


def worker_requirements() -> tuple[str, ...]:
    """tidemark's unconditional requirements as its installed metadata pins them.

    Returns
    -------
    tuple of str
        Requirement strings such as ``"pandas<3,>=2.0"``; :data:`DEFAULT_REQUIREMENTS`
        (names only) where tidemark has no installed metadata.

    Examples
    --------
    >>> sorted(r.split("<")[0].split(">")[0] for r in worker_requirements())
    ['pandas', 'protobuf', 'pyarrow', 'pyspark']
    """
    try:
        requires = metadata.requires("tidemark") or []
    except metadata.PackageNotFoundError:
        return DEFAULT_REQUIREMENTS
    return tuple(r for r in requires if ";" not in r)


_REQUIREMENT_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?([^;)]*)\)?")
_CLAUSE_RE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9][0-9.]*)")


def split_requirement(requirement: str) -> tuple[str, str]:
    """``(name, specifier)`` of a requirement string: ``"pandas<3,>=2.0"`` gives
    ``("pandas", "<3,>=2.0")``, ``"pyarrow"`` gives ``("pyarrow", "")``."""
    match = _REQUIREMENT_RE.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return match.group(1), match.group(2).strip()


def _release(version: str) -> tuple[int, ...]:
    """The release numbers a version starts with, trailing zeros dropped: ``3.0.1rc1``
    gives ``(3, 0, 1)``, ``2.0`` gives ``(2,)``."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    numbers = [int(n) for n in match.group(1).split(".")] if match else []
    while numbers and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def _satisfies_release(version: str, specifier: str) -> bool:
    """Whether ``version`` meets every clause of ``specifier``, comparing release numbers
    only; a clause of another form (``~=``, ``==2.*``) is not checked."""
    compare = {
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
    }
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        match = _CLAUSE_RE.match(clause)
        if match and match.end() == len(clause):
            if not compare[match.group(1)](_release(version), _release(match.group(2))):
                return False
    return True


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets ``specifier`` (``"<3,>=2.0"``), with :mod:`packaging`
    where it is installed (pre-releases count as their release).

    Examples
    --------
    >>> satisfies("2.3.3", "<3,>=2.0"), satisfies("3.1.0", "<3,>=2.0")
    (True, False)
    """
    if SpecifierSet is None:
        return _satisfies_release(version, specifier)
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return _satisfies_release(version, specifier)


def _import_probe(modules: tuple[tuple[str, str], ...]) -> Any:
    """A plain (pickled, not Arrow) UDF's function: in the worker, import each
    ``(name, module)`` of ``modules`` and report, as JSON, its version or why it failed;
    never raise. Not Arrow, so that it runs where pyarrow is missing."""

    def probe() -> str:
        import importlib
        import json
        import sys
        from importlib import metadata

        report: dict[str, Any] = {"": {"python": sys.executable}}
        for name, module in modules:
            try:
                imported = importlib.import_module(module)
            except Exception as exc:  # report any failure to import, with its cause
                report[name] = {"error": f"{module}: {type(exc).__name__}: {exc}"}
                continue
            version = getattr(imported, "__version__", None)
            if not isinstance(version, str):
                try:
                    version = metadata.version(name)
                except Exception:  # no version to be found: nothing to compare
                    version = None
            report[name] = {"version": version, "file": getattr(imported, "__file__", None)}
        return json.dumps(report)

    return probe


def _run_probe(spark: Any, modules: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    probe = F.udf(_import_probe(modules), "string", useArrow=False)
    try:
        [row] = spark.range(1).select(probe().alias("report")).collect()
    except Exception as exc:  # the worker could not even run the probe
        raise SessionSetupError(
            f"Spark's Python workers could not run tidemark's import check ({exc}). "
            f"{PYTHON_HINT} {HOW_TO_SHIP}"
        ) from exc
    report: dict[str, Any] = json.loads(row["report"])
    return report


def _check_imports(report: dict[str, Any], module: str) -> None:
    """Raise when a worker could not import tidemark or a dependency."""
    failed = {name: entry["error"] for name, entry in report.items() if "error" in entry}
    if not failed:
        return
    missing = [entry.split(":", 1)[0] for entry in failed.values()]
    hint = PYTHON_HINT if set(failed) - {module} else HOW_TO_SHIP
    raise SessionSetupError(
        f"Spark's Python workers cannot import {', '.join(map(repr, missing))} "
        f"({'; '.join(failed.values())}), so tidemark's window operator cannot run in "
        f"them (worker Python: {report['']['python']}). {hint}"
    )


def _check_versions(report: dict[str, Any], module: str, requirements: tuple[str, ...]) -> None:
    """Raise when a worker's tidemark is not the driver's, or a dependency's version is
    outside tidemark's pin."""
    python = report[""]["python"]
    worker_tidemark = report[module]["version"]
    if module == "tidemark" and worker_tidemark != __version__:
        raise SessionSetupError(
            f"Spark's Python workers import tidemark {worker_tidemark} "
            f"({report[module]['file']}), the driver runs tidemark {__version__}: the "
            f"engine must be the same on both sides. {HOW_TO_SHIP}"
        )
    wrong = {}  # requirement -> what the worker has
    for requirement in requirements:
        name, specifier = split_requirement(requirement)
        version = report[name]["version"]
        if specifier and version is not None and not satisfies(version, specifier):
            wrong[f"{name}{specifier}"] = f"{name} {version}"
    if wrong:
        has = "; ".join(f"{v} (tidemark {__version__} needs {r})" for r, v in wrong.items())
        fix = " ".join(f"'{r}'" for r in wrong)
        raise SessionSetupError(
            f"Spark's Python workers have {has} (worker Python: {python}). "
            f"Install the pinned versions in the workers' Python (`pip install {fix}`), "
            "or point Spark at a Python that has them (`PYSPARK_PYTHON` or "
            "`spark.pyspark.python`)."
        )


def ensure_workers_import_tidemark(
    spark: Any, module: str = "tidemark", dependencies: tuple[str, ...] | None = None
) -> None:
    """Raise :class:`~tidemark.errors.SessionSetupError` unless Python workers of
    ``spark`` import ``module`` (the driver's version, for tidemark) and the
    ``dependencies`` its Spark paths run on, at versions their pins allow; checked once
    per session (one tiny job).

    ``dependencies`` are requirement strings (``"pandas<3,>=2.0"``); by default
    :func:`worker_requirements`, tidemark's own pins.
    """
    requirements = worker_requirements() if dependencies is None else tuple(dependencies)
    checked = (*session_key(spark), module, *requirements)
    if checked in _CHECKED:
        return
    names = [split_requirement(r)[0] for r in requirements]
    modules = ((module, module), *((n, _MODULES.get(n, n.replace("-", "_"))) for n in names))
    report = _run_probe(spark, modules)
    _check_imports(report, module)
    _check_versions(report, module, requirements)
    _CHECKED.add(checked)


def check_state_store(spark: Any, why: str) -> None:
    """Before a streaming DataFrame whose query the user starts (``to_dataframe()``):
    its ``transformWithStateInPandas`` (the deltas layout, a chain) needs the RocksDB
    state store, which only ``write_outputs`` sets for its own query.

    Raises
    ------
    SessionSetupError
        The session's state store is another one (Spark's default, HDFS-backed).
    """
    current = spark.conf.get(STATE_STORE_PROVIDER, None)
    if current != ROCKSDB_PROVIDER:
        store = "unset (Spark's HDFS-backed default)" if current is None else repr(current)
        raise SessionSetupError(
            f"{why} runs in transformWithStateInPandas, which needs the RocksDB state "
            f"store; the session's {STATE_STORE_PROVIDER} is {store}: set "
            f"spark.conf.set({STATE_STORE_PROVIDER!r}, {ROCKSDB_PROVIDER!r}) before "
            "to_dataframe(), or start the query with write_outputs(...), which sets it "
            "for its query"
        )


@contextlib.contextmanager
def streaming_settings(spark: Any) -> Iterator[None]:
    """Around the start of a streaming query: the settings the query needs.

    ``spark.sql.streaming.stateStore.providerClass`` must be the RocksDB provider
    (``transformWithState`` fails on Spark's default HDFS-backed store with
    ``STORE_BACKEND_NOT_SUPPORTED_FOR_TWS``). A query keeps the settings it starts with,
    so a different value is set for the start and the session's own restored after.
    """
    current = spark.conf.get(STATE_STORE_PROVIDER, None)
    if current == ROCKSDB_PROVIDER:
        yield
        return
    try:
        spark.conf.set(STATE_STORE_PROVIDER, ROCKSDB_PROVIDER)
    except Exception as exc:
        raise SessionSetupError(
            f"a tidemark streaming query needs the RocksDB state store: set "
            f"{STATE_STORE_PROVIDER}={ROCKSDB_PROVIDER} on the session (got "
            f"{current!r}; setting it failed: {exc})"
        ) from exc
    try:
        yield
    finally:
        if current is None:
            spark.conf.unset(STATE_STORE_PROVIDER)
        else:
            spark.conf.set(STATE_STORE_PROVIDER, current)
