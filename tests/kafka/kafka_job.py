"""The docs' Kafka example (``docs/examples/kafka_sessions.py``) as a driver process of
its own, for the test that kills it:
``python kafka_job.py BOOTSTRAP TOPIC OUT PAUSE [FORMAT WAREHOUSE]``.

With ``PAUSE`` a batch id, the main table's sink writes that batch, marks
``OUT/_paused`` and sleeps: the test kills the process there, before Spark records the
batch as done; ``none`` runs the query to its end. ``FORMAT`` is the tables' (``parquet``,
the example's, ``delta`` or ``iceberg``: :func:`table_sinks`); ``WAREHOUSE`` the
directory of the Iceberg catalog ``tmk`` (:func:`session_conf`).
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from pyspark import cloudpickle

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tools" / "kafka"), str(ROOT / "docs" / "examples")]
import jars  # noqa: E402  (tools/kafka/jars.py)
import kafka_sessions  # noqa: E402

from tidemark.spark.io.sinks import delta_table, iceberg_table  # noqa: E402
from tidemark.spark.runtime.session import get_spark  # noqa: E402

PARTITIONS = 4
MAX_OFFSETS = 12_000  # records a micro-batch: a few batches of the topic
ICEBERG_CATALOG = "tmk"
OUTPUTS = {"main": "sessions", kafka_sessions.LATE: "late", "__late_records_dropped": "dropped"}


def session_conf(warehouse: str) -> dict[str, str]:
    """The tests' session: the Kafka connector, and each table format whose jars are
    fetched (``jars.py``) with the settings it needs."""
    formats = [name for name in jars.FORMATS if jars.fetched(name)]
    conf = {
        "spark.jars": ",".join(jars.classpath(["connector", *formats])),
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    }
    if "delta" in formats:
        conf["spark.sql.extensions"] = "io.delta.sql.DeltaSparkSessionExtension"
        conf["spark.sql.catalog.spark_catalog"] = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    if "iceberg" in formats:
        catalog = f"spark.sql.catalog.{ICEBERG_CATALOG}"
        conf[catalog] = "org.apache.iceberg.spark.SparkCatalog"
        conf[f"{catalog}.type"] = "hadoop"
        conf[f"{catalog}.warehouse"] = warehouse
        # the tests' session reads tables the job's process writes: no stale cached table
        conf[f"{catalog}.cache-enabled"] = "false"
    return conf


def iceberg_name(topic: str, table: str) -> str:
    prefix = re.sub(r"\W", "_", topic)
    return f"{ICEBERG_CATALOG}.db.{prefix}_{table}"


def table_sinks(fmt: str, out: str, topic: str) -> dict:
    """The example's three outputs, each to a table of ``fmt``."""
    if fmt == "parquet":
        return kafka_sessions.tables(out)
    if fmt == "delta":
        return {output: delta_table(f"{out}/{table}") for output, table in OUTPUTS.items()}
    return {output: iceberg_table(iceberg_name(topic, t)) for output, t in OUTPUTS.items()}


class Pausing:
    """A table sink that sleeps after writing batch ``pause_after`` (killed there, before
    the batch commits); ``write_outputs`` claims its table as the sink's own."""

    def __init__(self, sink, out: str, pause_after: int):
        self._sink = sink
        self._out = out
        self._pause_after = pause_after

    def __getattr__(self, name):
        return getattr(self._sink, name)

    def __call__(self, df, batch_id):
        self._sink(df, batch_id)
        if batch_id >= self._pause_after:
            Path(self._out, "_paused").write_text(str(batch_id))
            time.sleep(600)


def main(bootstrap: str, topic: str, out: str, pause: str, fmt="parquet", warehouse="") -> None:
    cloudpickle.register_pickle_by_value(kafka_sessions)  # workers lack docs/examples
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_spark(
        master="local[2]", app_name="tidemark-kafka-job", conf=session_conf(warehouse)
    )
    sinks = table_sinks(fmt, out, topic)
    if pause != "none":
        sinks["main"] = Pausing(sinks["main"], out, int(pause))
    options = {"maxOffsetsPerTrigger": str(MAX_OFFSETS)}
    query = kafka_sessions.start(spark, bootstrap, topic, PARTITIONS, out, options, sinks)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
