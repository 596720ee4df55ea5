"""Shipping the driver's tidemark to a session's executors.

tidemark's window operator runs in Spark's Python workers, so every executor must import
tidemark. :func:`ship_to_executors` zips the tidemark package the driver imported (the
directory of ``tidemark.__file__``: its modules and package data, no bytecode) into
``tidemark-<version>-<digest>.zip`` in a temporary directory and adds it to the session:
``spark.sparkContext.addPyFile(path)`` on a classic session,
``spark.addArtifacts(path, pyfile=True)`` on Spark Connect. PySpark puts only ``.zip``,
``.egg`` and ``.jar`` files on the workers' path: a wheel given to ``--py-files`` or
``addPyFile`` is copied to the executors but never importable there, this zip is
(``make dist`` builds the same package as ``dist/tidemark-<version>.zip``, to ship with
``spark-submit --py-files``). The helper's zip is named by its content's digest: a
classic session refuses a second file of the same name from another path, so a job that
also added ``make dist``'s zip can still call the helper.

A session is shipped to once (a classic session's application, a Connect session's id);
the zip is built once per process and kept until it exits (a classic session serves the
file from its path to executors that start later). tidemark's dependencies (pyarrow,
pandas, protobuf) are not shipped: they hold compiled code for the workers' platform and
must be installed in the workers' Python; :mod:`tidemark.spark.runtime.preflight` checks them.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import tidemark
from tidemark.spark.runtime.session import session_key

__all__ = ["ship_to_executors", "package_zip", "write_package_zip"]

_SHIPPED: set[tuple[str, str]] = set()  # ("classic", application id) / ("connect", session id)
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the same bytes for the same sources


def write_package_zip(package: Path, target: Path) -> Path:
    """Write ``package`` (a package directory) to the zip ``target``, the package's
    directory at the zip's root, without ``__pycache__`` or compiled files.

    Returns
    -------
    pathlib.Path
        ``target``.
    """
    files = sorted(
        path
        for path in package.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix not in (".pyc", ".pyo")
    )
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            name = Path(package.name, path.relative_to(package)).as_posix()
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    return target


@functools.cache
def package_zip() -> str:
    """The path of ``tidemark-<version>-<digest>.zip``, the tidemark package the driver
    imported, built on first use and removed when the process exits.

    Where tidemark itself was imported from a zip (a job started with ``--py-files``),
    that archive is copied instead.

    Examples
    --------
    >>> import zipfile
    >>> names = zipfile.ZipFile(package_zip()).namelist()
    >>> "tidemark/__init__.py" in names, "tidemark/spark/runtime/shipping.py" in names
    (True, True)
    >>> any("__pycache__" in name for name in names)
    False
    """
    directory = Path(tempfile.mkdtemp(prefix="tidemark-ship-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    built = directory / "tidemark.zip"
    package = Path(tidemark.__file__).parent
    archive = getattr(tidemark.__spec__.loader, "archive", None) if tidemark.__spec__ else None
    if not package.is_dir() and archive:  # imported by zipimport
        shutil.copyfile(archive, built)
    else:
        write_package_zip(package, built)
    digest = hashlib.sha256(built.read_bytes()).hexdigest()[:12]
    target = built.rename(directory / f"tidemark-{tidemark.__version__}-{digest}.zip")
    return str(target)


def ship_to_executors(spark: Any) -> str:
    """Add the driver's tidemark, as a zip, to ``spark``'s executors' Python path.

    Call it once after building the session, before the first pipeline runs; later calls
    on the same session do nothing. Works on a classic session (local, standalone, YARN,
    Kubernetes: ``sparkContext.addPyFile``) and over Spark Connect (``addArtifacts``).
    The workers still need tidemark's dependencies (pyarrow, pandas, protobuf) installed;
    the first pipeline checks them and names any that is missing or outside tidemark's
    pins.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session whose executors should import tidemark.

    Returns
    -------
    str
        The path of the zip that was shipped (see :func:`package_zip`).

    Examples
    --------
    >>> import tidemark as tm
    >>> tm.ship_to_executors(spark)  # doctest: +SKIP
    '/tmp/tidemark-ship-.../tidemark-0.1.0-1f2e3d4c5b6a.zip'
    """
    path = package_zip()
    session = session_key(spark)
    if session in _SHIPPED:
        return path
    if session[0] == "connect":
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)
    _SHIPPED.add(session)
    return path
