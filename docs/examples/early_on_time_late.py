"""Early, on-time and late results of a per-user hourly total, written to parquet.

Per user, a one-hour event-time window; a partial total every 100 events while the hour
is open, the on-time total when the watermark passes the hour, and a corrected total for
every late event during the following day. Then the two queries a consumer runs: the
latest pane of each window (ACCUMULATING), and a sum that stays right across
corrections (RETRACTING). The guide: ``docs/panes.md``.

Run: ``python docs/examples/early_on_time_late.py [output-dir]`` (local Spark).
"""

from __future__ import annotations

import random
import sys
import tempfile

from pyspark.sql import SparkSession
from pyspark.sql import Window as W
from pyspark.sql import functions as F

import tidemark as tm

HOUR, DAY = 3_600_000, 86_400_000


class Total(tm.AggregateFunction):
    """The sum of ``amount`` and the number of events."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value.amount, acc[1] + 1)

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class WithWindow(tm.ProcessWindowFunction):
    """The total with the user and the window's bounds."""

    def process(self, key, context, totals):
        w = context.window()
        for amount, events in totals:
            yield (key, w.start, w.end, amount, events)


def events(spark, n=3_000, users=3, seed=7):
    """``n`` events over four hours, in arrival order, a few of them a day late."""
    rng = random.Random(seed)
    rows, now = [], 0
    for offset in range(n):
        now += rng.randint(0, 9_600)
        late = rng.random() < 0.01
        ts = now - rng.randint(HOUR, 20 * HOUR) if late else now - rng.randint(0, 30_000)
        rows.append((offset, f"u{rng.randrange(users)}", max(ts, 0), rng.randint(1, 100)))
    return spark.createDataFrame(rows, "offset long, user string, ts long, amount long")


def hourly_totals(df, mode):
    """The pipeline: early panes every 100 events, the on-time pane, late corrections."""
    trigger = tm.AfterWatermark(early=tm.AfterCount(100), late=tm.AfterCount(1))
    return (
        tm.from_dataframe(
            df,
            timestamp="ts",
            order_by="offset",  # a recorded stream, replayed in arrival order
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(60_000),
        )
        .key_by("user")
        .window(tm.TumblingEventTimeWindows.of(HOUR))
        .trigger(trigger)
        .accumulation_mode(mode)
        .allowed_lateness(DAY)
        .aggregate(
            Total(),
            WithWindow(),
            "user string, window_start long, window_end long, amount long, events long",
        )
    )


def latest_panes(spark, path):
    """ACCUMULATING: each pane is the window's total so far; keep the latest."""
    newest_first = W.partitionBy("user", "window_start").orderBy(F.desc("pane_index"))
    return (
        spark.read.parquet(path)
        .withColumn("n", F.row_number().over(newest_first))
        .where("n = 1")
        .drop("n")
    )


def corrected_sums(spark, path):
    """RETRACTING: retractions count negative, so any sum over the results stays right."""
    signed = F.when(F.col("is_retraction"), -F.col("amount")).otherwise(F.col("amount"))
    return spark.read.parquet(path).groupBy("user").agg(F.sum(signed).alias("amount"))


def main(out: str) -> None:
    spark = SparkSession.builder.getOrCreate()
    df = events(spark)
    accumulating, retracting = f"{out}/accumulating", f"{out}/retracting"
    hourly_totals(df, tm.AccumulationMode.ACCUMULATING).to_dataframe().write.parquet(
        accumulating, mode="overwrite"
    )
    hourly_totals(df, tm.AccumulationMode.RETRACTING).to_dataframe().write.parquet(
        retracting, mode="overwrite"
    )
    spark.read.parquet(accumulating).groupBy("pane_timing").count().orderBy("pane_timing").show()
    latest_panes(spark, accumulating).orderBy("user", "window_start").show()
    corrected_sums(spark, retracting).orderBy("user").show()
    df.groupBy("user").agg(F.sum("amount").alias("amount")).orderBy("user").show()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tidemark-panes-"))
