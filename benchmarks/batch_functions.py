"""User window functions per element in BATCH (issue 31, target 3): a keyed 1-minute
tumbling window with a user ``AggregateFunction`` (count, sum) and with a
``ProcessWindowFunction`` counting its elements, each beside Spark's own
``groupBy(user, window(ts, '1 minute')).agg(count, sum)`` on the same cached input, in one
session, alternated.

The input (cached): N events, 2,000 keys, integer amounts 0..99, timestamps ~0.366 ms
apart with up to 5 s of disorder (10M events: ~61 minutes, ~124,000 windows of ~80
events; the issue's shape). Every side writes to Spark's ``noop`` sink. Each function's
results are checked equal to Spark's before anything is timed: the aggregate's
``(window max_timestamp, count, sum)`` rows (its results carry no key) and the process
function's ``(user, window start, count)`` rows, as multisets.

Then one untimed warm-up round and ROUNDS alternated rounds (Spark, aggregate, process),
printing every time, and each function's ratio (Spark's time over tidemark's: tidemark's
events/s over Spark's) per round, median and range. ``--floor`` also times the floor
under any implementation that hands these functions ``Row`` elements: tidemark's Rows of
each Arrow batch of the input and nothing but the user's own calls on them, in
``mapInArrow`` without a shuffle (the aggregate: ``add`` per element into one
accumulator per key and window; the process function: one call per run of a key's
window, ``elements`` a list).

``--combine-floor`` also times, in the same alternation, the floor of combining the
aggregate before the shuffle (Spark's own plan; issue 31, target 3): each input
partition, where it is, folds its elements with the user's ``add`` per (key, window)
into partials, only the partials are shuffled by key, and the reduce side merges them
with the user's ``merge``. Three local steps: a look-up of the accumulator per element
with the partials as plain columns (``columns``) or one cloudpickle per partial
(``pickles``, the encoding a general accumulator needs), and each Arrow batch sorted by
key and window first with one look-up per run (``runs``). Their results are checked
equal to Spark's first. Every timed run also prints the CPU seconds of this session's
JVM and Python workers (read from ``/proc``), which the other jobs on a shared machine
disturb less than the wall time.

Usage: python benchmarks/batch_functions.py [--events N] [--rounds R] [--floor]
       [--combine-floor] [--no-process] [--no-check]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

warnings.filterwarnings("ignore")

import tidemark as tm  # noqa: E402
from tidemark.spark.protocol.columns import MAIN, OUTPUT, TS  # noqa: E402
from tidemark.spark.runtime.session import get_spark  # noqa: E402

KEYS = 2_000
MINUTE_MS = 60_000
TARGET = 0.33


class CountSum(tm.AggregateFunction):
    """(count, sum of ``amount``) of a window."""

    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + 1, accumulator[1] + value.amount)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


class CountElements(tm.ProcessWindowFunction):
    """``(key, window start, number of elements)`` of a window."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield (key, context.window().start, sum(1 for _ in elements))


def events(spark: Any, n: int) -> Any:
    """N events (user, amount, ts): 2,000 keys, ~0.366 ms apart, up to 5 s of disorder."""
    from pyspark.sql import functions as F

    ts = (F.col("id") * 366 / 1000).cast("long") + (F.col("id") * 7919) % 5000
    return spark.range(n).select(
        (F.col("id") % KEYS).cast("string").alias("user"),
        (F.col("id") % 100).alias("amount"),
        ts.alias("ts"),
    )


def cases(df: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], None]]]:
    """Spark's frame, and per tidemark function ``(frame, check against Spark)``."""
    from pyspark.sql import functions as F

    def spark_frame() -> Any:
        window = F.window(F.timestamp_millis("ts"), "1 minute")
        grouped = df.groupBy("user", window.alias("w"))
        return grouped.agg(F.count("amount").alias("n"), F.sum("amount").alias("total"))

    def windowed() -> Any:
        stream = tm.from_dataframe(df, timestamp="ts").key_by("user")
        return stream.window(tm.TumblingEventTimeWindows.of(MINUTE_MS))

    def aggregate() -> Any:
        return windowed().aggregate(CountSum(), output_schema="n long, total long")

    def process() -> Any:
        return windowed().process(CountElements(), output_schema="user string, start long, n long")

    def check_aggregate() -> None:
        ends = (F.unix_millis("w.end") - 1).alias("ts")
        theirs = spark_frame().select(ends, "n", "total")
        combined = aggregate().combined_dataframe()
        ours = combined.where(F.col(OUTPUT) == MAIN).select(F.col(TS).alias("ts"), "n", "total")
        _equal(ours, theirs, "aggregate (count, sum)")

    def check_process() -> None:
        theirs = spark_frame().select("user", F.unix_millis("w.start").alias("start"), "n")
        _equal(process().to_dataframe(), theirs, "process (count)")

    return {
        "Spark": (spark_frame, lambda: None),
        "aggregate": (lambda: aggregate().to_dataframe(), check_aggregate),
        "process": (lambda: process().to_dataframe(), check_process),
    }


def _equal(ours: Any, theirs: Any, name: str) -> None:
    """Stop the benchmark unless both frames hold the same rows."""
    a, b = sorted(tuple(r) for r in ours.collect()), sorted(tuple(r) for r in theirs.collect())
    if a != b or not a:
        raise SystemExit(f"{name}: tidemark's {len(a):,} rows differ from Spark's {len(b):,}")
    print(f"  {name}: {len(a):,} results, equal to Spark's", flush=True)


def _spark_by_start(frame: Any) -> Any:
    from pyspark.sql import functions as F

    return frame.select("user", F.unix_millis("w.start").alias("start"), "n", "total")


CPU: dict[str, list[float]] = {}
"""CPU seconds of every timed run, per side (this process's JVM and Python workers)."""


def _noop(frame: Callable[[], Any], name: str = "") -> float:
    cpu = _descendants_cpu()
    started = time.perf_counter()
    frame().write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - started
    CPU.setdefault(name, []).append(_descendants_cpu() - cpu)
    return elapsed


def _descendants_cpu() -> float:
    """CPU seconds used so far by this process's descendants (the JVM, its Python
    workers, and those it reaped), read from ``/proc``: what this session costs, apart
    from the other jobs sharing the machine."""
    import os

    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        ticks[int(entry)] = sum(int(v) for v in fields[11:15])
    ours, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - ours
        ours |= frontier
    return sum(ticks[pid] for pid in ours) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- the floor


def _aggregate_floor(batches: Any) -> Any:
    """Tidemark's Rows of each batch and the aggregate's ``add`` per element, into one
    accumulator per key and window start: the user's calls and nothing else of note."""
    import pyarrow as pa

    from tidemark.spark.protocol.column_values import arrow_rows_and_columns

    function, accumulators = CountSum(), {}
    add, create = function.add, function.create_accumulator
    for batch in batches:
        for row in arrow_rows_and_columns(batch, batch.schema.names)[0]:
            slot = (row.user, row.ts - row.ts % MINUTE_MS)
            acc = accumulators.get(slot)
            accumulators[slot] = add(row, create() if acc is None else acc)
    yield pa.RecordBatch.from_pylist([{"n": len(accumulators)}])


def _process_floor(batches: Any) -> Any:
    """Tidemark's Rows of each batch and one call of the process function per run of
    equal (key, window start) in the batch's order, ``elements`` the run's list."""
    import pyarrow as pa

    from tidemark.spark.protocol.column_values import arrow_rows_and_columns

    function, calls = CountElements(), 0
    for batch in batches:
        rows = arrow_rows_and_columns(batch, batch.schema.names)[0]
        users, ts = batch.column(0).to_pylist(), batch.column(2).to_pylist()
        slots = [(u, t - t % MINUTE_MS) for u, t in zip(users, ts)]
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or slots[i] != slots[start]:
                context = _FloorContext(slots[start][1])
                for _ in function.process(slots[start][0], context, rows[start:i]):
                    calls += 1
                start = i
    yield pa.RecordBatch.from_pylist([{"n": calls}])


class _FloorContext:
    """What ``CountElements`` reads of its context: the window's start."""

    def __init__(self, start: int) -> None:
        self.start = start

    def window(self) -> Any:
        return self


def _local_partials(batches: Any, pickled: bool = False, runs: bool = False) -> Any:
    """The combine floor's local step: the user's ``add`` per element into one
    accumulator per key and window start, the partials emitted at the end of the
    partition as one Arrow batch: ``(user, start, n, total)`` columns, or (``pickled``)
    ``(user, start, partial)`` with one cloudpickle per partial. Per element a look-up
    of the accumulator (the aggregate floor's fold), or (``runs``) each batch sorted by
    key and window start in Arrow first, one look-up per run of a key's window."""
    import pyarrow as pa

    from tidemark.spark.protocol.columns import encode_side

    fold = _fold_runs if runs else _fold_elements
    accumulators: dict[Any, Any] = {}
    for batch in batches:
        fold(batch, accumulators)
    users = [u for u, _ in accumulators]
    starts = [s for _, s in accumulators]
    if pickled:
        blobs = [encode_side(a) for a in accumulators.values()]
        yield pa.RecordBatch.from_arrays(
            [pa.array(users), pa.array(starts), pa.array(blobs, pa.binary())],
            ["user", "start", "partial"],
        )
        return
    counts = [a[0] for a in accumulators.values()]
    totals = [a[1] for a in accumulators.values()]
    yield pa.RecordBatch.from_arrays(
        [pa.array(users), pa.array(starts), pa.array(counts), pa.array(totals)],
        ["user", "start", "n", "total"],
    )


def _fold_elements(batch: Any, accumulators: dict[Any, Any]) -> None:
    from tidemark.spark.protocol.column_values import arrow_rows_and_columns

    function = CountSum()
    add, create = function.add, function.create_accumulator
    for row in arrow_rows_and_columns(batch, batch.schema.names)[0]:
        slot = (row.user, row.ts - row.ts % MINUTE_MS)
        acc = accumulators.get(slot)
        accumulators[slot] = add(row, create() if acc is None else acc)


def _fold_runs(batch: Any, accumulators: dict[Any, Any]) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from tidemark.spark.protocol.column_values import arrow_rows_and_columns

    function = CountSum()
    add, create = function.add, function.create_accumulator
    ts = batch.column(2)
    start = pc.subtract(ts, pc.subtract(ts, pc.multiply(pc.divide(ts, MINUTE_MS), MINUTE_MS)))
    keyed = pa.table([batch.column(0), start], ["user", "start"])
    batch = batch.take(pc.sort_indices(keyed, [("user", "ascending"), ("start", "ascending")]))
    rows = arrow_rows_and_columns(batch, batch.schema.names)[0]
    users = batch.column(0).to_pylist()
    starts = (pc.divide(batch.column(2), MINUTE_MS)).to_pylist()
    begin = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or users[i] != users[begin] or starts[i] != starts[begin]:
            slot = (users[begin], starts[begin] * MINUTE_MS)
            acc = accumulators.get(slot)
            acc = create() if acc is None else acc
            for row in rows[begin:i]:
                acc = add(row, acc)
            accumulators[slot] = acc
            begin = i


def _merge_partials(batches: Any, pickled: bool = False) -> Any:
    """The combine floor's reduce step: every partial of a (key, window) merged with the
    user's ``merge``, each window's ``get_result`` out as ``(user, start, n, total)``."""
    import pickle

    import pyarrow as pa

    function, merged = CountSum(), {}
    merge = function.merge
    for batch in batches:
        columns = batch.to_pydict()
        if pickled:
            partials = map(pickle.loads, columns["partial"])
        else:
            partials = zip(columns["n"], columns["total"])
        for slot, partial in zip(zip(columns["user"], columns["start"]), partials):
            acc = merged.get(slot)
            merged[slot] = partial if acc is None else merge(acc, partial)
    results = [function.get_result(acc) for acc in merged.values()]
    yield pa.RecordBatch.from_arrays(
        [
            pa.array([u for u, _ in merged], pa.string()),
            pa.array([s for _, s in merged], pa.int64()),
            pa.array([r[0] for r in results], pa.int64()),
            pa.array([r[1] for r in results], pa.int64()),
        ],
        ["user", "start", "n", "total"],
    )


def combine_floors(df: Any, partitions: int) -> dict[str, Callable[[], Any]]:
    """The floor of combining before the shuffle (``--combine-floor``): the local fold
    per input partition, the partials shuffled by key, merged per key and window."""
    import functools

    frame = df.select("user", "amount", "ts")
    out = "user string, start long, n long, total long"

    def combined(pickled: bool, runs: bool = False) -> Any:
        local_schema = (
            "user string, start long, partial binary"
            if pickled
            else "user string, start long, n long, total long"
        )
        local_step = functools.partial(_local_partials, pickled=pickled, runs=runs)
        local = frame.mapInArrow(local_step, local_schema)
        shuffled = local.repartition(partitions, "user")
        return shuffled.mapInArrow(functools.partial(_merge_partials, pickled=pickled), out)

    return {
        "combine (columns)": lambda: combined(False),
        "combine (pickles)": lambda: combined(True),
        "combine (runs)": lambda: combined(False, runs=True),
    }


def floors(df: Any) -> dict[str, Callable[[], Any]]:
    """The floor frames (``--floor``), one per function."""
    frame = df.select("user", "amount", "ts")
    return {
        "aggregate": lambda: frame.mapInArrow(_aggregate_floor, "n long"),
        "process": lambda: frame.mapInArrow(_process_floor, "n long"),
    }


# ---------------------------------------------------------------------- main


def measure(sides: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """One untimed round, then ``rounds`` rounds of every side in turn."""
    for frame in sides.values():
        _noop(frame)
    CPU.clear()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, frame in sides.items():
            times[name].append(_noop(frame, name))
    return times


def report(n: int, times: dict[str, list[float]], floor: dict[str, list[float]]) -> float:
    """Print every run and each function's ratios; the worst median ratio."""
    for name, runs in times.items():
        shown = ", ".join(f"{t:.1f}" for t in runs)
        cpu = ", ".join(f"{t:.1f}" for t in CPU.get(name, []))
        rate = n / statistics.median(runs)
        print(f"  {name:<10} {shown} s ({rate:,.0f} events/s; CPU {cpu} s)", flush=True)
    worst = float("inf")
    for name in [n for n in times if n != "Spark"]:
        ratios = [s / t for s, t in zip(times["Spark"], times[name])]
        median = statistics.median(ratios)
        worst = min(worst, median)
        verdict = "met" if median >= TARGET else "NOT met"
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        line = f"  {name}: tidemark / Spark {median:.2f}x ({spread}; target {TARGET}x {verdict})"
        if name in floor:
            floor_median = statistics.median(floor[name])
            shown = ", ".join(f"{t:.1f}" for t in floor[name])
            above = statistics.median(times[name]) / floor_median
            best = statistics.median(times["Spark"]) / floor_median
            line += f"; floor {shown} s ({best:.2f}x Spark's; tidemark {above:.2f}x the floor)"
        print(line, flush=True)
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--floor", action="store_true", help="also time the Row floor")
    parser.add_argument("--no-check", action="store_true", help="skip the equality checks")
    parser.add_argument(
        "--combine-floor", action="store_true", help="also time combining before the shuffle"
    )
    parser.add_argument("--no-process", action="store_true", help="leave the process case out")
    args = parser.parse_args(argv)
    spark = get_spark()
    spark.sparkContext.setLogLevel("ERROR")
    df = events(spark, args.events).cache()
    cores = spark.sparkContext.defaultParallelism
    print(f"{args.events:,} events, {KEYS:,} keys, 1-minute tumbling windows, {cores} cores")
    df.count()
    both = cases(df)
    if not args.no_check:
        for _, check in both.values():
            check()
    sides = {name: frame for name, (frame, _) in both.items()}
    if args.no_process:
        del sides["process"]
    if args.combine_floor:
        from tidemark.spark.batch.run import engine_partitions

        combines = combine_floors(df, engine_partitions(spark))
        if not args.no_check:
            for name, frame in combines.items():
                _equal(frame(), _spark_by_start(both["Spark"][0]()), name)
        sides.update(combines)
    times = measure(sides, args.rounds)
    floor: dict[str, list[float]] = {}
    if args.floor:
        floor = {name: [_noop(f) for _ in range(args.rounds)] for name, f in floors(df).items()}
    return 0 if report(args.events, times, floor) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
