"""A Kafka topic -> tidemark sessions with late data -> exactly-once Parquet tables.

Clicks are JSON records ``{"user": ..., "page": ..., "ts": <epoch ms>}`` in a topic of
several partitions. Per user, sessions with a 30-second gap, on Flink's per-partition
watermarks (5 seconds out of order, per partition); every session, every late click and
the count of dropped ones go to their own table, written by micro-batch id so that a
restart from the checkpoint writes each once. ``docs/kafka.md`` shows and explains it;
``tests/kafka`` runs it against a real broker, killing its driver mid-stream.

Run on the local broker (``make kafka-start``)::

    python docs/examples/kafka_sessions.py 127.0.0.1:19092 clicks 4 /tmp/clicks-out
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

import tidemark as tm
from tidemark.spark import parquet_table, read_kafka

SCHEMA = "user string, page string, ts long"
OUTPUT = "user string, start long, end long, clicks long, pages long"
LATE = tm.OutputTag("late")


class SessionSummary(tm.ProcessWindowFunction):
    """``(user, session start, session end, clicks, distinct pages)`` per session."""

    def process(self, key, context, elements):
        clicks = list(elements)
        w = context.window()
        yield (key, w.start, w.end, len(clicks), len({c.page for c in clicks}))


def sessions(spark, bootstrap_servers, topic, partitions, options=None):
    """The pipeline: the topic's clicks, per-partition watermarks, sessions per user."""
    clicks = read_kafka(
        spark,
        bootstrap_servers=bootstrap_servers,
        topic=topic,
        schema=SCHEMA,
        timestamp="ts",
        options=options,
    )
    stream = tm.from_dataframe(
        clicks.rows,
        timestamp="ts",
        timestamp_unit="ms",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(
            tm.Duration.of_seconds(5)
        ),
        partition_column="partition",  # Kafka's partition of each record
        partitions=partitions,  # the topic's partitions: 0 .. partitions - 1
    )
    return (
        stream.key_by("user")
        .window(tm.EventTimeSessionWindows.with_gap(tm.Duration.of_seconds(30)))
        .side_output_late_data(LATE)
        .process(SessionSummary(), output_schema=OUTPUT)
    )


def tables(out):
    """Each output to its own table under ``out``, written by micro-batch id."""
    return {
        "main": parquet_table(f"{out}/sessions"),
        LATE: parquet_table(f"{out}/late"),
        "__late_records_dropped": parquet_table(f"{out}/dropped"),
    }


def start(spark, bootstrap_servers, topic, partitions, out, options=None, sinks=None):
    """Start the query, reading what the topic holds now (``availableNow``)."""
    result = sessions(spark, bootstrap_servers, topic, partitions, options)
    return result.write_outputs(
        sinks or tables(out),
        checkpoint=f"{out}/checkpoint",
        trigger={"availableNow": True},
    )


if __name__ == "__main__":
    servers, topic_name, count, directory = sys.argv[1:5]
    # The connector's jars: `make kafka-setup` caches them (tools/kafka/jars.py);
    # elsewhere spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:<version>.
    sys.path.insert(0, "tools/kafka")
    import jars  # noqa: E402

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(jars.classpath(["connector"])))
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    start(session, servers, topic_name, int(count), directory).awaitTermination()
    session.read.parquet(f"{directory}/sessions").orderBy("user", "start").show()
