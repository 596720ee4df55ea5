"""End-to-end throughput and per-micro-batch latency of a keyed tumbling window on a
file stream: tidemark's streaming runner beside Spark's own ``groupBy(window())``
streaming aggregation, on the same input, in the same run.

Both queries read the same parquet files (one file per micro-batch, ``availableNow``),
count and sum a value per key and 10-second event-time window, and write to a sink that
only counts rows. tidemark's query ends with an end-of-input marker file so its last
windows fire; Spark's last windows stay open (it has no final watermark), which the
report notes.

Usage::

    python benchmarks/streaming_throughput.py [--rows 200000] [--keys 1000] [--files 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from tidemark import AggregateFunction, TumblingEventTimeWindows
from tidemark._engine.create import window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.operator import WindowOperator
from tidemark.spark.streaming import END_OF_INPUT_MS, window_stream, write_outputs

WINDOW_MS = 10_000
OUT_OF_ORDERNESS_MS = 2_000


class CountSum(AggregateFunction):
    """(count, sum of v) of a window."""

    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + 1, accumulator[1] + value.v)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


def make_operator() -> WindowOperator:
    return window_operator(TumblingEventTimeWindows.of(WINDOW_MS), window_logic(CountSum()))


def count_sum_row(result: Any, timestamp: int) -> tuple:
    return (timestamp, result[0], result[1])


def write_input(directory: Path, rows: int, keys: int, files: int) -> None:
    """``files`` parquet files of ``key, v, ts``; timestamps rise ~1 ms a row, jittered."""
    directory.mkdir(parents=True)
    per_file = rows // files
    for index in range(files):
        start = index * per_file
        ids = pd.RangeIndex(start, start + per_file)
        frame = pd.DataFrame(
            {
                "key": [f"k{i * 7919 % keys}" for i in ids],
                "v": [i % 100 for i in ids],
                "ts": [i - (i * 31 % OUT_OF_ORDERNESS_MS) for i in ids],
            }
        )
        frame.to_parquet(directory / f"part-{index:04d}.parquet", index=False)


def write_end_marker(directory: Path) -> None:
    frame = pd.DataFrame({"key": ["_end"], "v": [0], "ts": [END_OF_INPUT_MS]})
    frame.to_parquet(directory / "part-9999-end.parquet", index=False)


class CountingSink:
    """A foreachBatch sink that only counts rows (one Spark job per batch)."""

    def __init__(self) -> None:
        self.rows = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        self.rows += df.count()


def run_tidemark(spark: Any, directory: Path, checkpoint: Path) -> tuple[Any, int]:
    from pyspark.sql.types import LongType, StructField, StructType

    df = (
        spark.readStream.schema("key string, v long, ts long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )
    schema = StructType([StructField(n, LongType()) for n in ("window_max_ts", "count", "total")])
    combined = window_stream(
        df,
        key_columns=["key"],
        timestamp_column="ts",
        make_operator=make_operator,
        out_of_orderness_ms=OUT_OF_ORDERNESS_MS,
        value_columns=["key", "v", "ts"],
        result_schema=schema,
        result_to_row=count_sum_row,
        late_tag=None,
    )
    sink = CountingSink()
    query = write_outputs(combined, {"main": sink}, str(checkpoint), {"availableNow": True})
    query.awaitTermination()
    return query, sink.rows


def run_spark_native(spark: Any, directory: Path, checkpoint: Path) -> tuple[Any, int]:
    from pyspark.sql import functions as F

    df = (
        spark.readStream.schema("key string, v long, ts long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )
    events = df.where(F.col("ts") < END_OF_INPUT_MS)
    events = events.withColumn("event_time", F.timestamp_millis("ts"))
    aggregated = (
        events.withWatermark("event_time", f"{OUT_OF_ORDERNESS_MS + 1} milliseconds")
        .groupBy("key", F.window("event_time", f"{WINDOW_MS} milliseconds"))
        .agg(F.count("*").alias("count"), F.sum("v").alias("total"))
    )
    sink = CountingSink()
    query = (
        aggregated.writeStream.outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query, sink.rows


def report(name: str, query: Any, elapsed: float, rows: int, results: int) -> None:
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    latencies = [p["durationMs"]["triggerExecution"] for p in query.recentProgress]
    data_latencies = [p["durationMs"]["triggerExecution"] for p in progress]
    print(
        f"{name:<16} {elapsed:7.1f} s  {rows / elapsed:9.0f} rows/s  "
        f"batches {len(latencies):3d} (with data {len(progress):3d})  "
        f"batch latency ms: median {statistics.median(data_latencies):7.0f}  "
        f"max {max(data_latencies):7.0f}  results {results}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--files", type=int, default=10)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from tidemark.spark.session import get_spark

    spark = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    root = Path(tempfile.mkdtemp(prefix="tidemark-bench-"))
    try:
        write_input(root / "in", args.rows, args.keys, args.files)
        write_end_marker(root / "in")
        print(
            f"{args.rows} rows, {args.keys} keys, {args.files} files (+ end marker), "
            f"tumbling {WINDOW_MS} ms windows, local[2]"
        )
        for name, run in (("spark groupBy", run_spark_native), ("tidemark", run_tidemark)):
            started = time.perf_counter()
            query, results = run(spark, root / "in", root / f"ck-{name.replace(' ', '-')}")
            report(name, query, time.perf_counter() - started, args.rows, results)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
