"""BATCH ``.sum()`` on the SQL fast path against Spark's own ``groupBy(window()).agg(sum)``.

Usage: python benchmarks/sql_fast_path.py [N] [ROUNDS]   (default 3,000,000 events, 4
rounds). The events are ``benchmarks/spark_batch.py``'s (user, amount, ts), cached; both
sides write to Spark's ``noop`` sink. Two untimed rounds warm the JIT, then ROUNDS
alternating timed runs each; prints every time, the ratio of the best runs and of the
medians.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).parent))

from spark_batch import events  # noqa: E402

import tidemark as tm  # noqa: E402
from tidemark.spark.session import get_spark  # noqa: E402


def main(n: int, rounds: int) -> None:
    from pyspark.sql import functions as F

    spark = get_spark()
    df = events(spark, n)
    df.count()

    def baseline() -> None:
        stamp = (F.col("ts") / 1000).cast("timestamp")
        grouped = df.groupBy("user", F.window(stamp, "1 minute")).agg(F.sum("amount"))
        grouped.write.format("noop").mode("overwrite").save()

    def fast_path() -> None:
        windowed = tm.from_dataframe(df, "ts").key_by("user")
        result = windowed.window(tm.TumblingEventTimeWindows.of(60_000)).sum("amount")
        result.to_dataframe().write.format("noop").mode("overwrite").save()

    for action in (baseline, fast_path, baseline, fast_path):
        action()
    times: dict[str, list[float]] = {"spark": [], "tidemark": []}
    for _ in range(rounds):
        for name, action in (("spark", baseline), ("tidemark", fast_path)):
            start = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - start)
    for name, runs in times.items():
        print(f"{name:9} " + ", ".join(f"{t:.2f} s" for t in runs))
    best = min(times["tidemark"]) / min(times["spark"])
    median = statistics.median(times["tidemark"]) / statistics.median(times["spark"])
    print(f"tidemark / Spark: best {best:.2f}x, median {median:.2f}x ({n:,} events)")


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 3_000_000,
        int(sys.argv[2]) if len(sys.argv) > 2 else 4,
    )
