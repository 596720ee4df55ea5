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

Then a stream: ``STREAM_BATCHES`` JSON files of ``STREAM_ROWS`` events, one file per
micro-batch (``availableNow``), through tidemark's keyed tumbling ``.sum`` and through
Spark's own ``withWatermark`` + ``groupBy(window()).agg(sum)`` (append mode); prints the
median micro-batch (``triggerExecution``) of the batches with rows, and of those without.

Usage: python benchmarks/default_session.py [N]   (default 50,000). To compare two
versions of tidemark, run it with each one first on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
# the workers need the Python that has tidemark: the one thing a plain session lacks
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import Row, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import tidemark as tm  # noqa: E402

RUNS = 3
STREAM_BATCHES = 6
STREAM_ROWS = 2_500


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


def write_stream_files(directory: Path) -> None:
    """STREAM_BATCHES files of STREAM_ROWS events over 1,000 users, time moving on."""
    for batch in range(STREAM_BATCHES):
        rows = []
        for i in range(STREAM_ROWS):
            n = batch * STREAM_ROWS + i
            rows.append(json.dumps({"user": str(n % 1000), "amount": n % 100, "ts": n * 6}))
        (directory / f"{batch:03d}.json").write_text("\n".join(rows) + "\n")


def micro_batches(query) -> tuple[float, float | None]:
    """Median seconds of the micro-batches with rows, and of those without (None: none)."""
    query.awaitTermination()
    full, empty = [], []
    for progress in query.recentProgress:
        seconds = progress["durationMs"].get("triggerExecution", 0) / 1000
        (full if progress["numInputRows"] else empty).append(seconds)
    return statistics.median(full), statistics.median(empty) if empty else None


def stream_runs(spark, root: Path) -> dict[str, tuple[float, float | None]]:
    source = spark.readStream.schema("user string, amount long, ts long")
    source = source.option("maxFilesPerTrigger", 1).json(str(root / "in"))
    own = (
        source.withColumn("t", F.timestamp_millis("ts"))
        .withWatermark("t", "1 second")
        .groupBy(F.window("t", "5 seconds"), "user")
        .agg(F.sum("amount").alias("amount"))
    )
    spark_query = (
        own.writeStream.outputMode("append")
        .foreachBatch(lambda d, b: d.write.format("noop").mode("overwrite").save())
        .option("checkpointLocation", str(root / "spark"))
        .trigger(availableNow=True)
        .start()
    )
    spark_times = micro_batches(spark_query)
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)
    # events from the epoch on: their first watermarks need Spark's clock shifted
    stream = tm.from_dataframe(
        source, timestamp="ts", watermark_strategy=strategy, shift_spark_clock=True
    )
    result = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(5000)).sum("amount")
    query = result.write_outputs(
        {"main": lambda d, b: d.write.format("noop").mode("overwrite").save()},
        checkpoint=str(root / "tidemark"),
        trigger={"availableNow": True},
    )
    return {"Spark withWatermark + groupBy": spark_times, "tidemark .sum": micro_batches(query)}


def print_stream(spark) -> None:
    print(f"\nstream, {STREAM_ROWS:,} rows per micro-batch, seconds  with rows  without")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "in").mkdir()
        write_stream_files(root / "in")
        for label, (full, empty) in stream_runs(spark, root).items():
            without = f"{empty:9.2f}" if empty is not None else f"{'-':>9}"
            print(f"  {label:38}{full:9.2f}{without}")


def main(n: int) -> None:
    # nothing else set: only the console progress bar, which would fill the table, is off
    builder = SparkSession.builder.master("local[2]")
    spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
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
    print_stream(spark)
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
