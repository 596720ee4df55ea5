"""State that grows: a stream whose keys pile up in state, tidemark beside Spark's own
``groupBy(window).agg``, micro-batch by micro-batch (issue 31, target 1).

The stream: ``--batches`` parquet files of ``--events`` rows each, one per micro-batch
(``maxFilesPerTrigger=1``), keys drawn at random from ``--key-space`` longs, every
timestamp inside the first hour, so with 1-hour tumbling windows nothing fires while the
files are read and every key seen stays in state (4M key space, 100,000 x 24: 1.8M live
keys). Each side counts and sums ``v`` per key and window (watermark: 10 s of disorder),
both on Spark's RocksDB state store with the same settings, on the same session:

* **spark**: ``withWatermark`` + ``groupBy(key, window(ts, "1 hour")).agg(count, sum)``,
  append mode;
* **tidemark**: ``key_by("key").window(TumblingEventTimeWindows.of(1 h)).aggregate(...)``
  through the public API (``write_outputs``), in the default state layout (deltas);
* **tidemark-deltas**, **tidemark-row**: the same query in tidemark's deltas state
  layout (a call writes the keys it changed) or its row layout (a call rewrites its key
  group whole), asked for at its first start (``spark.tidemark.streaming.stateLayout``;
  see the streaming guide's "State layouts");
* **floor** (``--sides spark,tidemark,floor``): the least a Python operator keeping a
  key group's state in one row does for this stream (:func:`floor_call`): the same key
  groups in ``applyInPandasWithState``, each group's windows as four int64 arrays (no
  pickle), read and written whole, counted in pandas. What no design on that operator
  with a row per key group gets under.

A run reads the data files (``availableNow``), stops, and its checkpoint is measured (the
whole directory, with every live key in it); it then restarts on the same checkpoint with
one more file, an end-of-input row (tidemark's ``END_OF_INPUT_MS``: every window
fires; for Spark a row that far in time moves its watermark past every window), and the
fired windows are compared: each side's results as a digest (count of rows, sums of
count and total, and an order-free hash of every ``(key, window start, count, total)``),
which must be equal, or the run's figures are not printed. ``--rounds`` runs each side
that many times, alternated (Spark first), each on a fresh checkpoint.

Printed per run: every data micro-batch's ``triggerExecution`` (ms), the medians of the
first and the last quarter and their ratio (growth), the checkpoint size; then per side
the median over the rounds, and tidemark ÷ Spark for the last quarter (the late
micro-batches) and for the checkpoint, with their spread.

Usage::

    python benchmarks/state_growth.py --conf spark.driver.memory=4g  # the issue's size
    python benchmarks/state_growth.py --key-space 1000000 --events 50000 --batches 16
    python benchmarks/state_growth.py --quick                  # a smoke run
    python benchmarks/state_growth.py --conf spark.driver.memory=4g --sides spark,tidemark-deltas --rounds 2
    python benchmarks/state_growth.py --sides tidemark --rounds 1 --conf spark.sql.shuffle.partitions=2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import tidemark as tm  # noqa: E402
from tidemark.spark.streaming import END_OF_INPUT_MS  # noqa: E402

WINDOW_MS = 3_600_000
OUT_OF_ORDERNESS_MS = 10_000
FULL = {"key_space": 4_000_000, "events": 100_000, "batches": 24}
QUICK = {"key_space": 200_000, "events": 10_000, "batches": 8}
RESULT_SCHEMA = "key long, start long, n long, total long"


class CountSum(tm.AggregateFunction):
    """(count, sum of v) of a window."""

    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + 1, accumulator[1] + value.v)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


class KeyedResult(tm.ProcessWindowFunction):
    """``(key, window start, count, total)`` of a window from its accumulator."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        for n, total in elements:
            yield (key, context.window().start, n, total)


# ---------------------------------------------------------------------- input


def write_input(directory: Path, key_space: int, events: int, batches: int) -> None:
    """``batches`` files of ``key, v, ts`` (random keys; batch ``b`` spans its share of
    the first hour, rows in random order), then ``end/``: the end-of-input row."""
    rng = np.random.default_rng(31)
    span = WINDOW_MS // batches
    (directory / "data").mkdir(parents=True)
    for batch in range(batches):
        frame = pd.DataFrame(
            {
                "key": rng.integers(0, key_space, events),
                "v": rng.integers(0, 1_000, events),
                "ts": batch * span + rng.integers(0, span, events),
            }
        )
        _write_file(directory / "data" / f"part-{batch:04d}.parquet", frame, batch)
    end = pd.DataFrame({"key": [0], "v": [0], "ts": [END_OF_INPUT_MS]})
    _write_file(directory / "end" / "part-end.parquet", end, batches)


def _write_file(path: Path, frame: pd.DataFrame, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)
    stamp = time.time() - 3600 + n  # the file source reads files in mtime order
    os.utime(path, (stamp, stamp))


def _source(spark: Any, directory: Path) -> Any:
    return (
        spark.readStream.schema("key long, v long, ts long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )


# ---------------------------------------------------------------------- the two sides


class DigestSink:
    """A ``foreachBatch`` sink that keeps an order-free digest of the rows it gets."""

    def __init__(self) -> None:
        self.digest = np.zeros(4, dtype=np.int64)

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        row = df.select(
            F.count("*"),
            F.sum("n"),
            F.sum("total"),
            F.sum(F.pmod(F.xxhash64("key", "start", "n", "total"), F.lit(1 << 40))),
        ).first()
        self.digest += np.array([v or 0 for v in row], dtype=np.int64)


def start_tidemark(spark: Any, directory: Path, checkpoint: Path, sink: DigestSink) -> Any:
    stream = tm.from_dataframe(
        _source(spark, directory),
        timestamp="ts",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(OUT_OF_ORDERNESS_MS),
        # The first file's timestamps start at 0: its watermark is before the epoch,
        # which Spark's own clock cannot carry.
        shift_spark_clock=True,
    )
    result = (
        stream.key_by("key")
        .window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
        .aggregate(CountSum(), KeyedResult(), output_schema=RESULT_SCHEMA)
    )
    return result.write_outputs(
        {"main": sink}, checkpoint=str(checkpoint), trigger={"availableNow": True}
    )


def start_tidemark_deltas(spark: Any, directory: Path, checkpoint: Path, sink: DigestSink) -> Any:
    """:func:`start_tidemark` in the deltas state layout (``docs/streaming.md``, "State
    layouts", the default), asked for at the first start; the restart keeps the
    checkpoint's."""
    return _in_layout("deltas", spark, directory, checkpoint, sink)


def start_tidemark_row(spark: Any, directory: Path, checkpoint: Path, sink: DigestSink) -> Any:
    """:func:`start_tidemark` in the row state layout, asked for at the first start."""
    return _in_layout("row", spark, directory, checkpoint, sink)


def _in_layout(layout: str, spark: Any, directory: Path, checkpoint: Path, sink: Any) -> Any:
    spark.conf.set(LAYOUT_CONF, layout)
    try:
        return start_tidemark(spark, directory, checkpoint, sink)
    finally:
        spark.conf.unset(LAYOUT_CONF)


LAYOUT_CONF = "spark.tidemark.streaming.stateLayout"


def start_spark(spark: Any, directory: Path, checkpoint: Path, sink: DigestSink) -> Any:
    from pyspark.sql import functions as F

    # The end-of-input row's timestamp (year 9999) would overflow Spark's window end: a
    # row 100 hours on moves Spark's watermark past every window all the same.
    capped = F.least(F.col("ts"), F.lit(100 * WINDOW_MS))
    events = _source(spark, directory).withColumn("event_time", F.timestamp_millis(capped))
    aggregated = (
        events.withWatermark("event_time", f"{OUT_OF_ORDERNESS_MS + 1} milliseconds")
        .groupBy("key", F.window("event_time", f"{WINDOW_MS} milliseconds"))
        .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        .select("key", F.unix_millis("window.start").alias("start"), "n", "total")
    )
    writer = aggregated.writeStream.outputMode("append").foreachBatch(sink)
    writer = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    return writer.start()


FLOOR_STATE = "key binary, start binary, n binary, total binary"
FLOOR_COLUMNS = ("key", "start", "n", "total")


def floor_call(group: Any, frames: Any, state: Any) -> Any:
    """The least a Python operator holding a key group's state in one row does: the
    group's windows as four int64 arrays (8 bytes a field, no pickle), read whole, the
    windows Spark's watermark has passed emitted, the micro-batch's rows counted and
    summed in pandas and merged in, the arrays written back whole."""
    held = (
        pd.DataFrame(
            {c: np.frombuffer(b, dtype=np.int64) for c, b in zip(FLOOR_COLUMNS, state.get)}
        )
        if state.exists
        else pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in FLOOR_COLUMNS})
    )
    due = held["start"] + WINDOW_MS <= state.getCurrentWatermarkMs()
    if due.any():
        yield held[due]
        held = held[~due]
    rows = [frame for frame in frames if len(frame)]
    if rows:
        batch = pd.concat(rows)
        batch = batch.assign(start=batch["ts"] - batch["ts"] % WINDOW_MS)
        counted = batch.groupby(["key", "start"], sort=False)["v"].agg(["size", "sum"])
        counted = counted.reset_index().set_axis(FLOOR_COLUMNS, axis=1)
        held = pd.concat([held, counted]).groupby(["key", "start"], sort=False).sum()
        held = held.reset_index()
    if held.empty:
        state.remove()
        return
    state.update(tuple(held[c].to_numpy(dtype=np.int64).tobytes() for c in FLOOR_COLUMNS))
    state.setTimeoutTimestamp(int(held["start"].min()) + WINDOW_MS)


def _grouped_events(spark: Any, directory: Path) -> Any:
    """The events with Spark's watermark and tidemark's key group of each key (``group``):
    what the floor sides group by, on the same state partitions as tidemark's."""
    from pyspark.sql import functions as F

    from tidemark.spark.streaming.driver.keygroups import session_max_parallelism, slot_column

    groups = session_max_parallelism(spark)
    capped = F.least(F.col("ts"), F.lit(100 * WINDOW_MS))  # as start_spark's
    return (
        _source(spark, directory)
        .withColumn("ts", capped)
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", f"{OUT_OF_ORDERNESS_MS + 1} milliseconds")
        .withColumn("group", slot_column(["key"], groups))
        .select("group", "key", "v", "ts", "event_time")
    )


def start_floor(spark: Any, directory: Path, checkpoint: Path, sink: DigestSink) -> Any:
    """:func:`floor_call` in ``applyInPandasWithState``, grouped by key group as tidemark
    groups (as many groups, each on the same state partition), on Spark's watermark."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    events = _grouped_events(spark, directory)
    counted = events.groupBy("group").applyInPandasWithState(
        floor_call, RESULT_SCHEMA, FLOOR_STATE, "append", GroupStateTimeout.EventTimeTimeout
    )
    writer = counted.writeStream.outputMode("append").foreachBatch(sink)
    writer = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    return writer.start()


SIDES = {
    "spark": start_spark,
    "tidemark": start_tidemark,
    "tidemark-deltas": start_tidemark_deltas,
    "tidemark-row": start_tidemark_row,
    "floor": start_floor,
}


# ---------------------------------------------------------------------- one run


@dataclass
class Run:
    side: str
    batch_ms: list[int]
    checkpoint_bytes: int
    elapsed_s: float
    digest: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def quarter(self, last: bool) -> float:
        n = max(1, len(self.batch_ms) // 4)
        part = self.batch_ms[-n:] if last else self.batch_ms[:n]
        return float(statistics.median(part))


def _disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def run_side(spark: Any, side: str, root: Path, inputs: Path, name: str) -> Run:
    """The data files, then the end-of-input file on the same checkpoint."""
    start = SIDES[side]
    stream, checkpoint = root / f"in-{name}", root / f"ck-{name}"
    stream.mkdir()
    for path in sorted((inputs / "data").iterdir()):
        os.link(path, stream / path.name)  # hard links keep the files' mtimes
    sink = DigestSink()
    started = time.perf_counter()
    query = start(spark, stream, checkpoint, sink)
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    batch_ms = [p["durationMs"]["triggerExecution"] for p in progress]
    size = _disk_bytes(checkpoint)
    os.link(inputs / "end" / "part-end.parquet", stream / "part-end.parquet")
    start(spark, stream, checkpoint, sink).awaitTermination()
    shutil.rmtree(checkpoint, ignore_errors=True)
    shutil.rmtree(stream, ignore_errors=True)
    return Run(side, batch_ms, size, elapsed, tuple(int(v) for v in sink.digest))


# ---------------------------------------------------------------------- report


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MB"


def print_run(run: Run) -> None:
    first, last = run.quarter(False), run.quarter(True)
    print(
        f"{run.side:>9}: {len(run.batch_ms)} micro-batches in {run.elapsed_s:,.1f} s; "
        f"first quarter {first:,.0f} ms, last quarter {last:,.0f} ms "
        f"(x{last / max(first, 1):.2f}); checkpoint {_mb(run.checkpoint_bytes)}\n"
        f"{'':>11}ms: {' '.join(str(ms) for ms in run.batch_ms)}",
        flush=True,
    )


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def summary(runs: list[Run]) -> None:
    by_side: dict[str, list[Run]] = {}
    for run in runs:
        by_side.setdefault(run.side, []).append(run)
    print("\nmedian over rounds: first quarter / last quarter ms, growth, checkpoint")
    for side, own in by_side.items():
        first = statistics.median(r.quarter(False) for r in own)
        last = statistics.median(r.quarter(True) for r in own)
        growth = [r.quarter(True) / max(r.quarter(False), 1) for r in own]
        size = statistics.median(r.checkpoint_bytes for r in own)
        print(
            f"{side:>9}: {first:,.0f} / {last:,.0f} ms, growth {_spread(growth)}, "
            f"checkpoint {_mb(size)}"
        )
    spark = by_side.get("spark", [])
    for side, own in by_side.items():  # round n of a side against Spark's round n
        if side == "spark" or not spark:
            continue
        late = [t.quarter(True) / s.quarter(True) for s, t in zip(spark, own)]
        size_ratio = [t.checkpoint_bytes / s.checkpoint_bytes for s, t in zip(spark, own)]
        print(
            f"{side} / Spark: late micro-batches (last quarter) {_spread(late)}, "
            f"checkpoint {_spread(size_ratio)}",
            flush=True,
        )


def check(runs: list[Run]) -> None:
    """Every run's results equal every other's (as a digest), or no figure counts."""
    digests = {run.digest for run in runs}
    if len(digests) != 1:
        for run in runs:
            print(f"{run.side}: digest {run.digest}", file=sys.stderr)
        raise SystemExit("the results differ between runs: no figure is valid")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (small sizes)")
    parser.add_argument("--key-space", type=int, default=FULL["key_space"])
    parser.add_argument("--events", type=int, default=FULL["events"], help="a micro-batch")
    parser.add_argument("--batches", type=int, default=FULL["batches"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sides", default="spark,tidemark")
    parser.add_argument("--partitions", type=int, default=2, help="shuffle partitions")
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE, both sides")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else {k: getattr(args, k) for k in FULL}
    conf = {"spark.sql.shuffle.partitions": str(args.partitions)}
    conf.update(dict(c.split("=", 1) for c in args.conf))
    from tidemark.spark.runtime.session import get_spark

    spark = get_spark(master="local[2]", conf=conf)
    root = Path(tempfile.mkdtemp(prefix="tidemark-state-growth-"))
    print(
        f"local[2], {args.partitions} shuffle partitions, RocksDB; 1-hour tumbling windows, "
        f"count and sum per key; {sizes['events']:,} events x {sizes['batches']} micro-batches, "
        f"{sizes['key_space']:,} key space; extra conf {args.conf or 'none'}",
        flush=True,
    )
    try:
        write_input(root / "inputs", sizes["key_space"], 2_000, 2)
        for side in args.sides.split(","):  # warm: workers started, classes loaded
            run_side(spark, side, root, root / "inputs", f"warm-{side}")
        shutil.rmtree(root / "inputs")
        write_input(root / "inputs", sizes["key_space"], sizes["events"], sizes["batches"])
        runs = []
        for n in range(args.rounds):
            for side in args.sides.split(","):
                run = run_side(spark, side, root, root / "inputs", f"{side}-{n}")
                runs.append(run)
                check(runs)
                print_run(run)
        summary(runs)
        print(f"results equal in every run: digest {runs[0].digest}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
