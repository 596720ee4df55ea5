"""One pipeline, three modes: BATCH, a replay of a recorded stream, a streaming query.

Clicks of two users, per user in 1-minute tumbling windows: the number of clicks and the
amount. The pages show these functions (``docs/getting-started.md``, ``docs/modes.md``,
the README); ``tests/docs/test_docs_examples.py`` runs them on local Spark.

Run: ``python docs/examples/quickstart.py [output-dir]``.
"""

from __future__ import annotations

import sys
import tempfile

from pyspark.sql import SparkSession

import tidemark as tm
from tidemark.spark.streaming import END_OF_INPUT_MS

MINUTE = 60_000
SCHEMA = "offset long, user string, ts long, amount long"
# (arrival offset, user, event time in ms, amount); the click at 61 s arrives before
# the one at 50 s, and the one at 30 s arrives after the watermark passed its window.
CLICKS = [
    (0, "ann", 1_000, 10),
    (1, "bob", 2_000, 5),
    (2, "ann", 61_000, 7),
    (3, "ann", 50_000, 3),
    (4, "bob", 125_000, 1),
    (5, "ann", 30_000, 4),
]


class CountAndSum(tm.ProcessWindowFunction):
    """``(user, window start, window end, clicks, amount)`` per user and window."""

    def process(self, key, context, elements):
        rows = list(elements)
        w = context.window()
        yield (key, w.start, w.end, len(rows), sum(r.amount for r in rows))


OUTPUT = "user string, start long, end long, clicks long, amount long"
LATE = tm.OutputTag("late")


def batch(spark):
    """BATCH: per key in timestamp order, every window fires once at the end."""
    df = spark.createDataFrame(CLICKS, SCHEMA)
    stream = tm.from_dataframe(df, timestamp="ts", timestamp_unit="ms")
    result = (
        stream.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(1)))
        .process(CountAndSum(), output_schema=OUTPUT)
    )
    return result.to_dataframe().orderBy("user", "start")


def replay(spark):
    """Replay: the rows in ``offset`` order are a recorded stream; the watermark trails
    the largest timestamp by 10 s, and what arrives behind it goes to a side output."""
    df = spark.createDataFrame(CLICKS, SCHEMA)
    stream = tm.from_dataframe(
        df,
        timestamp="ts",
        timestamp_unit="ms",
        order_by="offset",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(
            tm.Duration.of_seconds(10)
        ),
    )
    result = (
        stream.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(1)))
        .side_output_late_data(LATE)
        .process(CountAndSum(), output_schema=OUTPUT)
    )
    windows = result.to_dataframe().orderBy("user", "start").collect()
    late = result.get_side_output(LATE).to_dataframe().collect()
    result.unpersist()  # the run's rows were kept so that both outputs come from one run
    return windows, late


class TopUser(tm.ProcessAllWindowFunction):
    """``(window start, user, amount)`` of the user with the largest total."""

    def process(self, context, totals):
        top = max(totals, key=lambda row: row.amount)
        yield (context.window().start, top.user, top.amount)


def consecutive(spark):
    """Consecutive windows: per-user totals per minute, then the top user of every
    2 minutes. The totals carry their window's ``end - 1`` as timestamp."""
    df = spark.createDataFrame(CLICKS, SCHEMA)
    stream = tm.from_dataframe(df, timestamp="ts", timestamp_unit="ms")
    per_user = (
        stream.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(1)))
        .sum("amount")
    )
    top = per_user.window_all(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(2))).process(
        TopUser(), "start long, user string, amount long"
    )
    return top.to_dataframe().orderBy("start")


def streaming(spark, directory):
    """Streaming: the clicks as JSON files read by a streaming query, the last file an
    end-of-input row so that every window closes; each output to its own parquet."""
    spark.createDataFrame(CLICKS, SCHEMA).coalesce(1).write.json(f"{directory}/in/0")
    end = [(6, "", END_OF_INPUT_MS, 0)]  # any key and values: only its timestamp counts
    spark.createDataFrame(end, SCHEMA).coalesce(1).write.json(f"{directory}/in/1")
    clicks = (
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(f"{directory}/in/*")
    )
    stream = tm.from_dataframe(
        clicks,
        timestamp="ts",
        timestamp_unit="ms",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(
            tm.Duration.of_seconds(10)
        ),
        # the clicks are in the first minutes of 1970: their first watermarks are at or
        # before the epoch, which only a shifted Spark clock carries (docs/streaming.md)
        shift_spark_clock=True,
    )
    result = (
        stream.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(1)))
        .side_output_late_data(LATE)
        .process(CountAndSum(), output_schema=OUTPUT)
    )
    query = result.write_outputs(
        {
            "main": lambda df, batch_id: df.write.mode("append").parquet(f"{directory}/windows"),
            LATE: lambda df, batch_id: df.write.mode("append").parquet(f"{directory}/late"),
        },
        checkpoint=f"{directory}/checkpoint",
        trigger={"availableNow": True},
    )
    query.awaitTermination()
    return spark.read.parquet(f"{directory}/windows").orderBy("user", "start")


if __name__ == "__main__":
    session = SparkSession.builder.getOrCreate()
    batch(session).show()
    print(replay(session))
    streaming(session, sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()).show()
