"""Finding or starting the SparkSession tidemark runs on."""

from __future__ import annotations

import os
import sys
from typing import Any

from tidemark.spark.runtime._java import ensure_java

__all__ = ["get_spark", "is_connect", "session_key", "session_cores", "SPARK_CONF"]

SPARK_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.adaptive.enabled": "false",
    # With a byte limit per Arrow batch, Spark 4 measures the batch after every row it
    # adds (ArrowWriter.sizeInBytes): 4x the JVM's CPU time of sending rows to Python
    # (measured 7.0 -> 1.7 CPU-s for 10M rows). Int.MaxValue switches the check off;
    # batches stay bounded by spark.sql.execution.arrow.maxRecordsPerBatch.
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
}


def get_spark(
    spark: Any = None,
    *,
    master: str = "local[*]",
    app_name: str = "tidemark",
    conf: dict[str, str] | None = None,
) -> Any:
    """The given session, else the active one, else a new local session.

    A new session gets ``PYSPARK_PYTHON`` set to the running interpreter (so workers find
    tidemark), Java located or provided (see :mod:`tidemark.spark.runtime._java`), the RocksDB
    state store, Arrow, UTC as the session time zone, and quiet logs.
    """
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    ensure_java()
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    # A few partitions per core: a task's Python worker and the JVM's shuffle and sort
    # then overlap (measured: 22.6 s -> 18.3 s for 10M events on 2 cores, at 4x).
    partitions = 4 * max(1, os.cpu_count() or 1)
    builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    # transformWithState on a batch DataFrame fails in a fresh session on Spark 4.1/4.2
    # unless the streams manager exists (apache/spark#58211); touching it is harmless.
    _ = session.streams.active
    return session


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, RDDs, broadcasts)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_key(spark: Any) -> tuple[str, str]:
    """What identifies ``spark``'s executors and what was added to them: a classic
    session's application (sessions of one SparkContext share it), a Connect session's
    id. Unlike ``id(spark)``, never reused by a later session."""
    if is_connect(spark):
        return ("connect", str(spark.session_id))
    return ("classic", str(spark.sparkContext.applicationId))


def session_cores(spark: Any) -> int:
    """The session's cores: the default parallelism on a classic session; over Connect,
    which has no SparkContext, ``spark.default.parallelism`` if configured, else the
    shuffle partitions (what a BATCH scan's range partitions and a new streaming query's
    state partitions are bounded by)."""
    if not is_connect(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured is None:
        configured = spark.conf.get("spark.sql.shuffle.partitions")
    return max(1, int(configured))
