"""Keyed tumbling reduce over N generated events: tidemark on Spark vs Spark's own
``groupBy(window(...)).agg(sum)``, on the same data in the same run.

Usage: python benchmarks/spark_batch.py [N]   (default 10,000,000; prints both times and
the ratio; exits 1 if tidemark's generic engine path is more than 5x the baseline)
"""

from __future__ import annotations

import sys
import time
import warnings

warnings.filterwarnings("ignore")

import tidemark as tm  # noqa: E402
from tidemark.spark.session import get_spark  # noqa: E402

TARGET_RATIO = 5.0


def events(spark, n: int):
    from pyspark.sql import functions as F

    return (
        spark.range(n)
        .select(
            (F.col("id") % 1000).cast("string").alias("user"),
            (F.col("id") % 100).alias("amount"),
            (F.col("id") * 6 + (F.col("id") * 7919) % 5000).alias("ts"),
        )
        .cache()
    )


def timed(label: str, action) -> float:
    start = time.perf_counter()
    action()
    elapsed = time.perf_counter() - start
    print(f"  {label:<58} {elapsed:8.1f} s", flush=True)
    return elapsed


def main(n: int) -> int:
    spark = get_spark()
    spark.sparkContext.setLogLevel("ERROR")
    from pyspark.sql import functions as F

    df = events(spark, n)
    print(f"{n:,} events, 1,000 keys, 1-minute tumbling windows, "
          f"{spark.sparkContext.defaultParallelism} cores", flush=True)
    timed("materialise input (cached, not compared)", df.count)

    def baseline():
        (df.groupBy("user", F.window(F.timestamp_millis("ts"), "1 minute"))
         .agg(F.sum("amount")).write.format("noop").mode("overwrite").save())

    def tidemark_sum():
        stream = tm.from_dataframe(df, timestamp="ts")
        result = (stream.key_by("user")
                  .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(1)))
                  .sum("amount"))
        result.to_dataframe().write.format("noop").mode("overwrite").save()

    base = timed("Spark groupBy(window(ts, '1 minute')).agg(sum)", baseline)
    ours = timed("tidemark key_by().window(Tumbling 1 min).sum() (engine)", tidemark_sum)
    ratio = ours / base
    print(f"ratio tidemark / Spark: {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x)")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000))
