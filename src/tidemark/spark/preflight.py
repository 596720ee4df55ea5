"""Checks of the user's own SparkSession, made before tidemark runs anything on it.

tidemark starts no session of its own when given one (a cluster's, Databricks', a Spark
Connect client's), so what it needs is checked on the session it gets:

- every Python worker must import tidemark (the engine runs in the workers):
  :func:`ensure_workers_import_tidemark` runs one tiny job per session and, when a worker
  cannot import it, raises one message saying how to ship tidemark to the executors,
  instead of a ``ModuleNotFoundError`` deep in a worker's trace;
- a streaming query needs the RocksDB state store (``transformWithState`` supports no
  other): :func:`streaming_settings` sets it for the query being started and restores
  the session's value after, or fails at once naming the setting and the value.

This module is pickled by value, so the probe reaches a worker that lacks tidemark.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import functions as F

from tidemark.errors import SessionSetupError

__all__ = [
    "ensure_workers_import_tidemark",
    "streaming_settings",
    "STATE_STORE_PROVIDER",
    "ROCKSDB_PROVIDER",
]

STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_CHECKED: set[tuple[Any, ...]] = set()  # (id of a session, modules its workers import)

HOW_TO_SHIP = (
    "Make tidemark importable on every executor: install the same tidemark version on "
    "the cluster (a wheel: `pip install tidemark-<version>-py3-none-any.whl` in the "
    "cluster's Python environment, or the cluster's library settings), or ship it with "
    "the job: `spark-submit --py-files tidemark.zip ...` / "
    "`spark.sparkContext.addPyFile('tidemark.zip')` on a classic session, "
    "`spark.addArtifacts('tidemark.zip', pyfile=True)` on Spark Connect (see the README, "
    "'Running on a cluster and on Spark Connect')."
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


PYTHON_HINT = (
    "The workers' Python lacks tidemark's dependencies: point Spark at a Python that has "
    "them (`PYSPARK_PYTHON` or `spark.pyspark.python`; on a local session the driver's "
    "own interpreter, `sys.executable`), or install pyarrow and pandas in the executors' "
    "Python."
)


def _import_probe(modules: tuple[str, ...]) -> Any:
    """A plain (pickled, not Arrow) UDF's function: import ``modules`` in the worker and
    report what failed, never raise. Not Arrow, so that it runs where pyarrow is missing."""

    def probe() -> str:
        import importlib

        errors = []
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception as exc:  # report any failure to import, with its cause
                errors.append(f"{module}: {type(exc).__name__}: {exc}")
        return "\n".join(errors)

    return probe


def ensure_workers_import_tidemark(
    spark: Any, module: str = "tidemark", dependencies: tuple[str, ...] = ("pyarrow", "pandas")
) -> None:
    """Raise :class:`~tidemark.errors.SessionSetupError` unless Python workers of
    ``spark`` import ``module`` and the ``dependencies`` its Spark paths run on; checked
    once per session (one tiny job)."""
    checked = (id(spark), module, *dependencies)
    if checked in _CHECKED:
        return
    probe = F.udf(_import_probe((module, *dependencies)), "string", useArrow=False)
    try:
        rows = spark.range(1).select(probe().alias("error")).collect()
    except Exception as exc:  # the worker could not even run the probe
        raise SessionSetupError(
            f"Spark's Python workers could not run tidemark's import check ({exc}). "
            f"{PYTHON_HINT} {HOW_TO_SHIP}"
        ) from exc
    errors = sorted({e for r in rows for e in r["error"].splitlines()})
    if errors:
        missing = [e.split(":", 1)[0] for e in errors]
        hint = PYTHON_HINT if set(missing) & set(dependencies) else HOW_TO_SHIP
        raise SessionSetupError(
            f"Spark's Python workers cannot import {', '.join(map(repr, missing))} "
            f"({'; '.join(errors)}), so tidemark's window operator cannot run in them. {hint}"
        )
    _CHECKED.add(checked)


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
