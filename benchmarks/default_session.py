"""BATCH on a session made the plain way: Spark's defaults, 200 shuffle partitions.

``SparkSession.builder.master("local[2]").getOrCreate()`` with nothing else set is what a
user starts with. On it, side by side and on the same cached input (N events, 1,000
keys, 5-second tumbling windows):

- Spark's own ``groupBy(window(...), user).agg(sum)``;
- tidemark BATCH with a user reduce (a ``Row`` per element, through the engine);
- tidemark BATCH with ``.sum`` (the SQL fast path, Spark's own aggregation).

Each is written to Spark's ``noop`` sink (every column computed, nothing stored), three
runs each, alternating; tidemark builds a fresh pipeline per run and releases its kept
rows after it. Prints a table of the runs in seconds and the median.

Then a replay of the same events in arrival order (1 s out-of-orderness, a late-data
side output, ``.sum``): the seconds to read its results, then its side output, then
``num_late_records_dropped()``, three runs (one run of the pipeline serves all three).

Usage: python benchmarks/default_session.py [N]   (default 50,000). To compare two
versions of tidemark, run it with each one first on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")
# the workers need the Python that has tidemark: the one thing a plain session lacks
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import Row, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import tidemark as tm  # noqa: E402

RUNS = 3


def events(spark, n: int):
    """N events over 1,000 users, about 6 ms apart with some disorder, cached."""
    return (
        spark.range(n)
        .select(
            (F.col("id") % 1000).cast("string").alias("user"),
            (F.col("id") % 100).alias("amount"),
            (F.col("id") * 6 + (F.col("id") * 7919) % 5000).alias("ts"),
        )
        .cache()
    )


def spark_own(df):
    """Spark's own windowed sum."""
    window = F.window(F.timestamp_millis("ts"), "5 seconds")
    return df.groupBy(window, "user").agg(F.sum("amount").alias("amount"))


def add(a, b):
    return Row(user=a.user, amount=a.amount + b.amount, ts=a.ts)


def tidemark_run(df, finish):
    keyed = tm.from_dataframe(df, timestamp="ts").key_by("user")
    return finish(keyed.window(tm.TumblingEventTimeWindows.of(5000)))


def timed(build) -> float:
    """Seconds to build the output and write it to the noop sink."""
    start = time.perf_counter()
    result = build()
    out = result.to_dataframe() if hasattr(result, "to_dataframe") else result
    out.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - start
    if hasattr(result, "unpersist"):
        result.unpersist()
    return elapsed


def replay_reads(df) -> tuple[float, ...]:
    """Seconds to read a replay's results, its late side output, its dropped count."""
    late = tm.OutputTag("late")
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)
    source = tm.from_dataframe(df, timestamp="ts", order_by="id", watermark_strategy=strategy)
    windowed = source.key_by("user").window(tm.TumblingEventTimeWindows.of(5000))
    result = windowed.side_output_late_data(late).sum("amount")
    marks = [time.perf_counter()]
    result.to_dataframe().write.format("noop").mode("overwrite").save()
    marks.append(time.perf_counter())
    result.get_side_output(late).to_dataframe().write.format("noop").mode("overwrite").save()
    marks.append(time.perf_counter())
    result.num_late_records_dropped()
    marks.append(time.perf_counter())
    if hasattr(result, "unpersist"):
        result.unpersist()
    steps = [b - a for a, b in zip(marks, marks[1:])]
    return (*steps, marks[-1] - marks[0])


def print_replay(df) -> None:
    print(f"\nreplay, seconds{'results':>12}{'side out':>10}{'dropped':>9}{'total':>8}")
    replay_reads(df)  # warm-up
    for run in range(RUNS):
        results, side, dropped, total = replay_reads(df)
        print(f"  run {run + 1}{'':9}{results:12.2f}{side:10.2f}{dropped:9.2f}{total:8.2f}")


def main(n: int) -> None:
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = events(spark, n)
    df.count()
    cases = {
        "Spark groupBy(window()).agg(sum)": lambda: spark_own(df),
        "tidemark BATCH, user reduce": lambda: tidemark_run(df, lambda w: w.reduce(add)),
        "tidemark BATCH, .sum (SQL path)": lambda: tidemark_run(df, lambda w: w.sum("amount")),
    }
    for build in cases.values():  # warm-up: the JVM's first queries, the Python workers
        timed(build)
    times: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(RUNS):
        for label, build in cases.items():
            times[label].append(timed(build))
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    print(f"{n:,} events, local[2], spark.sql.shuffle.partitions={partitions}, seconds")
    print(f"{'':34}" + "".join(f"{'run ' + str(i + 1):>8}" for i in range(RUNS)) + f"{'median':>8}")
    for label, runs in times.items():
        cells = "".join(f"{t:8.2f}" for t in runs)
        print(f"{label:34}{cells}{statistics.median(runs):8.2f}")
    print_replay(df.withColumn("id", F.monotonically_increasing_id()))
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
