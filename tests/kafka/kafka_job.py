"""The docs' Kafka example (``docs/examples/kafka_sessions.py``) as a driver process of
its own, for the test that kills it: ``python kafka_job.py BOOTSTRAP TOPIC OUT PAUSE``.

With ``PAUSE`` a batch id, the main table's sink writes that batch, marks
``OUT/_paused`` and sleeps: the test kills the process there, before Spark records the
batch as done; ``none`` runs the query to its end.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pyspark import cloudpickle

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tools" / "kafka"), str(ROOT / "docs" / "examples")]
import jars  # noqa: E402  (tools/kafka/jars.py)
import kafka_sessions  # noqa: E402

from tidemark.spark.session import get_spark  # noqa: E402

PARTITIONS = 4
MAX_OFFSETS = 12_000  # records a micro-batch: a few batches of the topic


def pausing(sink, out: str, pause_after: int):
    def write(df, batch_id):
        sink(df, batch_id)
        if batch_id >= pause_after:
            Path(out, "_paused").write_text(str(batch_id))
            time.sleep(600)  # killed here, before the batch commits

    return write


def main(bootstrap: str, topic: str, out: str, pause: str) -> None:
    cloudpickle.register_pickle_by_value(kafka_sessions)  # workers lack docs/examples
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_spark(
        master="local[2]",
        app_name="tidemark-kafka-job",
        conf={
            "spark.jars": ",".join(jars.classpath(["connector"])),
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        },
    )
    sinks = kafka_sessions.tables(out)
    if pause != "none":
        sinks["main"] = pausing(sinks["main"], out, int(pause))
    options = {"maxOffsetsPerTrigger": str(MAX_OFFSETS)}
    query = kafka_sessions.start(spark, bootstrap, topic, PARTITIONS, out, options, sinks)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
