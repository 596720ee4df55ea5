"""Why no result? asked of Spark runs: a replay, a replay read by partition, BATCH.

``docs/why-no-result.md`` ("On Spark: BATCH and replay") shows these functions and their
answers; ``tests/spark/api/test_explain_spark.py`` runs them on local Spark and checks that the
page shows what they answer.
"""

from __future__ import annotations

from quickstart import CLICKS, LATE, OUTPUT, SCHEMA, CountAndSum

import tidemark as tm

MINUTE = tm.Duration.of_minutes(1)


def late_click(spark):
    """The getting-started replay: why is ann's click at 30 s in none of her windows?"""
    df = spark.createDataFrame(CLICKS, SCHEMA)
    stream = tm.from_dataframe(
        df,
        "ts",
        order_by="offset",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(10_000),
    )
    result = (
        stream.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(MINUTE))
        .side_output_late_data(LATE)
        .process(CountAndSum(), output_schema=OUTPUT)
    )
    return result.explain(key="ann", timestamp=30_000)


# (partition, sensor, event time in ms, arrival, reading): one sensor per partition,
# partition 1 running 8 s behind partition 0
READINGS = [(0, "s0", 1_000 * t, 2 * t, t) for t in range(0, 20, 2)]
READINGS += [(1, "s1", 1_000 * t - 8_000, 2 * t - 1, t) for t in range(8, 20, 2)]
READING = "partition int, sensor string, ts long, arrival long, reading long"


def lagging_partition(spark):
    """A recorded topic of two partitions replayed by partition: partition 1 lags, so
    sensor s0's window [0, 10 s) fires only when the input ends."""
    df = spark.createDataFrame(READINGS, READING)
    stream = tm.from_dataframe(
        df,
        "ts",
        order_by="arrival",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(2_000),
        partition_column="partition",
        partitions=2,
    )
    result = stream.key_by("sensor").window(tm.TumblingEventTimeWindows.of(10_000)).max("reading")
    return result.explain(key="s0", window=(0, 10_000))


def batch_end(spark):
    """BATCH: no watermark until the input ends, so every window fires there."""
    df = spark.createDataFrame(CLICKS, SCHEMA)
    result = (
        tm.from_dataframe(df, "ts")
        .key_by("user")
        .window(tm.TumblingEventTimeWindows.of(MINUTE))
        .process(CountAndSum(), output_schema=OUTPUT)
    )
    return result.explain(key="bob")
