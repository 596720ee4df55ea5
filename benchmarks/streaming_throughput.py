"""Streaming throughput and micro-batch latency: tidemark's key-group runtime beside
Spark's own ``groupBy(window()).agg`` streaming aggregation, same input, same run.

For each key count (1,000, 20,000 and 200,000 distinct keys in every micro-batch) both
queries read the same parquet files (one file per micro-batch, ``availableNow``), count
and sum a value per key and 10-second event-time window (watermark: 2 s of disorder),
and write to a sink that only counts rows. Every micro-batch spans 40 s of event time,
whatever its size, so each key fires about as many windows per batch in every row of
the table. Neither query gets an end-of-input marker: both leave their last windows
open. Printed per key count:

* rows/s over the query's wall time (start to end, with Spark's query start-up), and
  the ratio tidemark / Spark;
* median and max latency (``triggerExecution``) of the micro-batches that had data;
* tidemark's peak Python worker memory: the proportional set size (PSS) of the largest
  of this run's Python processes (workers, their daemon, the driver-side helper), and of
  all of them together, sampled every 0.2 s and its state at the end: keys held, bytes
  of their rows (state data source reader), and each query's checkpoint ``state/``
  directory on disk.

Then the same tiny stream (three rows per micro-batch) on Spark's default 200 shuffle
partitions: micro-batch latency of both queries (each partition opens its state store).

Usage::

    python benchmarks/streaming_throughput.py            # the full table (~2 min, 2 cores)
    python benchmarks/streaming_throughput.py --quick    # smaller batches (~1 min)
    python benchmarks/streaming_throughput.py --keys 20000 --batch-rows 40000 --batches 5
    python benchmarks/streaming_throughput.py --keys 1000 --batches 10 --repeat 5 --skip-default-partitions

Ratios in one run are what to compare: a busy machine slows both sides. Spark's own
rows/s moves by 20% from one run to the next on 2 cores: ``--repeat N`` runs each key
count N times, the two queries one after the other each time, and prints the median,
mean and range of the ratios.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tidemark import AggregateFunction, TumblingEventTimeWindows
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.spark.streaming import StreamPlan, window_stream, write_outputs
from tidemark.spark.streaming.driver.keygroups import session_max_parallelism
from tidemark.spark.streaming.driver.state_reader import read_group_rows
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS

WINDOW_MS = 10_000
OUT_OF_ORDERNESS_MS = 2_000
BATCH_SPAN_MS = 40_000

# (distinct keys in every micro-batch, rows per micro-batch, micro-batches)
FULL = [(1_000, 40_000, 5), (20_000, 40_000, 5), (200_000, 400_000, 3)]
QUICK = [(1_000, 10_000, 3), (20_000, 40_000, 3), (200_000, 200_000, 2)]


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


SPEC = OperatorSpec(TumblingEventTimeWindows.of(WINDOW_MS), window_logic(CountSum()))


def count_sum_row(result: Any, timestamp: int) -> tuple:
    return (timestamp, result[0], result[1])


# ---------------------------------------------------------------------- input


def write_input(directory: Path, keys: int, batch_rows: int, batches: int) -> None:
    """``batches`` parquet files of ``key, v, ts``: every key in every file; each file
    spans ``BATCH_SPAN_MS`` of event time with up to 2 s of disorder."""
    directory.mkdir(parents=True)
    for batch in range(batches):
        ids = pd.RangeIndex(batch * batch_rows, (batch + 1) * batch_rows)
        offsets = (ids - batch * batch_rows) * BATCH_SPAN_MS // batch_rows
        frame = pd.DataFrame(
            {
                "key": [f"k{i * 7919 % keys}" for i in ids],
                "v": ids % 100,
                "ts": batch * BATCH_SPAN_MS + offsets - (ids * 31 % OUT_OF_ORDERNESS_MS),
            }
        )
        path = directory / f"part-{batch:04d}.parquet"
        frame.to_parquet(path, index=False)
        stamp = time.time() - 3600 + batch  # the file source reads files in mtime order
        os.utime(path, (stamp, stamp))


class CountingSink:
    """A foreachBatch sink that only counts rows (one Spark job per batch)."""

    def __init__(self) -> None:
        self.rows = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        self.rows += df.count()


def _source(spark: Any, directory: Path) -> Any:
    return (
        spark.readStream.schema("key string, v long, ts long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )


def start_tidemark(
    spark: Any, directory: Path, checkpoint: Path, sink: Any, groups: int | None
) -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField(n, LongType()) for n in ("window_max_ts", "count", "total")])
    combined = window_stream(
        _source(spark, directory),
        StreamPlan(
            key_columns=["key"],
            timestamp_column="ts",
            spec=SPEC,
            out_of_orderness_ms=OUT_OF_ORDERNESS_MS,
            value_columns=["key", "v", "ts"],
            result_schema=schema,
            result_to_row=count_sum_row,
        ),
        max_parallelism=groups,
        spark_offset_ms=SPARK_OFFSET_MS,  # events from the epoch on, some before it
    )
    return write_outputs(combined, {"main": sink}, str(checkpoint), {"availableNow": True})


def start_spark(
    spark: Any, directory: Path, checkpoint: Path, sink: Any, groups: int | None
) -> Any:
    from pyspark.sql import functions as F

    events = _source(spark, directory).withColumn("event_time", F.timestamp_millis("ts"))
    aggregated = (
        events.withWatermark("event_time", f"{OUT_OF_ORDERNESS_MS + 1} milliseconds")
        .groupBy("key", F.window("event_time", f"{WINDOW_MS} milliseconds"))
        .agg(F.count("*").alias("count"), F.sum("v").alias("total"))
    )
    writer = aggregated.writeStream.outputMode("append").foreachBatch(sink)
    writer = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    return writer.start()


# ---------------------------------------------------------------------- measuring


class WorkerMemory:
    """Samples the resident memory of this process's Python workers (descendants of the
    JVM this driver started, not the driver itself) every 0.2 s; keeps the peak sum."""

    def __init__(self) -> None:
        self.peak_bytes = 0  # the largest sum over the workers
        self.peak_worker_bytes = 0  # the largest single worker
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            sizes = _python_worker_pss()
            self.peak_bytes = max(self.peak_bytes, sum(sizes))
            self.peak_worker_bytes = max(self.peak_worker_bytes, max(sizes, default=0))


def _python_worker_pss() -> list[int]:
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                commands[int(entry)] = f.read().decode(errors="replace")
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    me, sizes = os.getpid(), []
    for pid, command in commands.items():
        program = os.path.basename(command.split("\0", 1)[0])  # not the JVM: its class
        if not program.startswith("python") or pid == me:  # path names python too
            continue
        if not _descends_from(pid, me, parents):
            continue
        try:  # PSS: pages shared by the forked workers count once in the sum
            with open(f"/proc/{pid}/smaps_rollup") as f:
                pss = next(line for line in f if line.startswith("Pss:"))
            sizes.append(int(pss.split()[1]) * 1024)
        except (OSError, StopIteration):
            continue
    return sizes


def _descends_from(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    while pid in parents and pid > 1:
        pid = parents[pid]
        if pid == ancestor:
            return True
    return False


def _disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def tidemark_state(spark: Any, checkpoint: Path) -> tuple[int, int]:
    """(keys held, bytes of the key-group rows) in the state store after the run."""
    rows = read_group_rows(spark, str(checkpoint))
    keys = sum(len(pickle.loads(r.keys)) for r in rows)
    return keys, sum(len(r.keys) for r in rows)


@dataclass
class Run:
    elapsed_s: float
    median_ms: float
    max_ms: float
    batches: int
    results: int
    state_disk: int
    peak_workers: int = 0
    peak_worker: int = 0


def timed(spark: Any, start: Any, directory: Path, checkpoint: Path, groups: int | None) -> Run:
    sink = CountingSink()
    with WorkerMemory() as memory:
        started = time.perf_counter()
        query = start(spark, directory, checkpoint, sink, groups)
        query.awaitTermination()
        elapsed = time.perf_counter() - started
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    latencies = [p["durationMs"]["triggerExecution"] for p in progress] or [0]
    return Run(
        elapsed,
        statistics.median(latencies),
        max(latencies),
        len(query.recentProgress),
        sink.rows,
        _disk_bytes(checkpoint / "state"),
        memory.peak_bytes,
        memory.peak_worker_bytes,
    )


# ---------------------------------------------------------------------- report


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def key_count_table(
    spark: Any, root: Path, configs: list[tuple[int, int, int]], groups: int | None, repeat: int = 1
) -> None:
    print(
        f"\n{'keys/batch':>10} {'rows':>9} | {'Spark rows/s':>12} {'tidemark':>9} {'ratio':>6} | "
        f"{'median ms S/t':>15} {'ratio':>6} | {'max ms S/t':>15} | tidemark Python PSS peak; state at end"
    )
    for keys, batch_rows, batches in configs:
        directory = root / f"in-{keys}"
        write_input(directory, keys, batch_rows, batches)
        ratios = [
            key_count_row(spark, root, directory, keys, batch_rows * batches, groups, f"{keys}-{n}")
            for n in range(repeat)
        ]
        if repeat > 1:
            print(
                f"{'':>10} {'':>9} | rows/s ratio over {repeat} runs: median "
                f"{statistics.median(ratios):.2f}x, mean {statistics.mean(ratios):.2f}x, "
                f"{min(ratios):.2f}x-{max(ratios):.2f}x",
                flush=True,
            )
        shutil.rmtree(directory, ignore_errors=True)


def key_count_row(
    spark: Any, root: Path, directory: Path, keys: int, rows: int, groups: int | None, name: str
) -> float:
    """Both queries over ``directory``, Spark's first; prints a row, returns the ratio."""
    native = timed(spark, start_spark, directory, root / f"ck-spark-{name}", groups)
    ours = timed(spark, start_tidemark, directory, root / f"ck-tm-{name}", groups)
    held, held_bytes = tidemark_state(spark, root / f"ck-tm-{name}")
    native_rate, our_rate = rows / native.elapsed_s, rows / ours.elapsed_s
    print(
        f"{keys:>10,} {rows:>9,} | {native_rate:>12,.0f} {our_rate:>9,.0f} "
        f"{our_rate / native_rate:>5.2f}x | {native.median_ms:>7,.0f}/{ours.median_ms:<7,.0f} "
        f"{ours.median_ms / max(native.median_ms, 1):>5.2f}x | "
        f"{native.max_ms:>7,.0f}/{ours.max_ms:<7,.0f} | largest {_mb(ours.peak_worker)}, "
        f"all {_mb(ours.peak_workers)}; "
        f"{held:,} keys in {_mb(held_bytes)} of rows; state dirs on disk: tidemark "
        f"{_mb(ours.state_disk)}, Spark {_mb(native.state_disk)}",
        flush=True,
    )
    return our_rate / native_rate


def default_partitions(spark: Any, root: Path, groups: int | None) -> None:
    """Three rows per micro-batch, two micro-batches, on 200 shuffle partitions."""
    directory = root / "in-tiny"
    write_input(directory, keys=3, batch_rows=3, batches=2)
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    try:
        native = timed(spark, start_spark, directory, root / "ck-spark-tiny", groups)
        ours = timed(spark, start_tidemark, directory, root / "ck-tm-tiny", groups)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
    print(
        "\nSpark's default 200 shuffle partitions, 3 rows per micro-batch, 2 micro-batches "
        f"(+ no-data batches):\n  median data micro-batch: Spark {native.median_ms:,.0f} ms, "
        f"tidemark {ours.median_ms:,.0f} ms ({ours.median_ms / max(native.median_ms, 1):.2f}x); "
        f"max: Spark {native.max_ms:,.0f} ms, tidemark {ours.max_ms:,.0f} ms; whole query "
        f"(start-up + all batches): Spark {native.elapsed_s:.1f} s, tidemark "
        f"{ours.elapsed_s:.1f} s ({ours.elapsed_s / native.elapsed_s:.2f}x)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller micro-batches")
    parser.add_argument("--keys", type=int, help="one key count instead of the table")
    parser.add_argument("--batch-rows", type=int, default=40_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument(
        "--max-parallelism", type=int, help="key groups; default: the session's (8 here)"
    )
    parser.add_argument("--skip-default-partitions", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each key count N times (Spark, tidemark)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from tidemark.spark.session import get_spark

    configs = QUICK if args.quick else FULL
    if args.keys:
        configs = [(args.keys, args.batch_rows, args.batches)]
    spark = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="tidemark-bench-"))
    started = time.perf_counter()
    try:
        print(
            f"local[2], 2 shuffle partitions, tumbling {WINDOW_MS} ms windows, count and sum "
            f"per key; {BATCH_SPAN_MS // 1000} s of event time per micro-batch; tidemark "
            f"max_parallelism={args.max_parallelism or session_max_parallelism(spark)}. "
            "Warming up both queries...",
            flush=True,
        )
        write_input(root / "warm", 100, 2_000, 2)
        for name, start in (("spark", start_spark), ("tidemark", start_tidemark)):
            timed(spark, start, root / "warm", root / f"ck-warm-{name}", args.max_parallelism)
        key_count_table(spark, root, configs, args.max_parallelism, args.repeat)
        if not args.skip_default_partitions:
            default_partitions(spark, root, args.max_parallelism)
        print(f"\ntotal {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
