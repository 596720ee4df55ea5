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

from tidemark.errors import SessionSetupError

__all__ = [
    "ensure_workers_import_tidemark",
    "streaming_settings",
    "STATE_STORE_PROVIDER",
    "ROCKSDB_PROVIDER",
]

STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_CHECKED: set[tuple[int, str]] = set()  # (id of a session, module its workers import)

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


def _import_probe(module: str) -> Any:
    """``mapInPandas`` function: import ``module`` in the worker; report, never raise."""

    def probe(batches: Any) -> Any:
        import importlib

        import pandas as pd

        for _ in batches:
            pass
        try:
            importlib.import_module(module)
            error = ""
        except Exception as exc:  # report any failure to import, with its cause
            error = f"{type(exc).__name__}: {exc}"
        yield pd.DataFrame({"error": [error]})

    return probe


def ensure_workers_import_tidemark(spark: Any, module: str = "tidemark") -> None:
    """Raise :class:`~tidemark.errors.SessionSetupError` unless Python workers of
    ``spark`` import ``module``; checked once per session (one tiny job)."""
    if (id(spark), module) in _CHECKED:
        return
    rows = spark.range(1).mapInPandas(_import_probe(module), "error string").collect()
    errors = sorted({r["error"] for r in rows if r["error"]})
    if errors:
        raise SessionSetupError(
            f"Spark's Python workers cannot import {module!r} ({'; '.join(errors)}), so "
            f"tidemark's window operator cannot run in them. {HOW_TO_SHIP}"
        )
    _CHECKED.add((id(spark), module))


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
