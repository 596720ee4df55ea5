"""Non-keyed windows on every core (issue 31, target 2): tidemark's BATCH ``window_all``
beside Spark's own aggregation, on the same cached data, in one session, alternated.

Three cases, each checked equal to Spark's result before anything is timed:

- ``window_all`` max: N events (default 10,000,000; ``spark_batch.py``'s generator),
  1-minute tumbling windows, a user ``AggregateFunction`` (max of ``amount``) declared
  ``order_insensitive``; Spark: ``groupBy(window(ts, '1 minute')).agg(max(amount))``;
- ``window_all(...).max("amount")``, Flink's shorthand, over the same events (each
  window's first element with the largest ``amount``; tidemark runs it as Spark SQL on
  tumbling and sliding windows, ``spark/batch/sql_plan.py``: a hash aggregate where the
  rows hold only the field and the time, a sort-based one of the first row's struct
  where they hold more, as here), checked on each result's minute and ``amount``;
  Spark's side as above;
- Nexmark q7 BATCH: B bids (default 2,000,000; ``nexmark/generator.py``), the highest
  bid per 10 s window (``nexmark/queries.py``: ``HighestBid``, declared, with the
  ``ProcessAllWindowFunction`` that writes q7's row); Spark: its own q7.

Both sides write to the ``noop`` sink. Each case runs one untimed warm-up pair, then
``--rounds`` alternated pairs (Spark, tidemark); the line prints every run, the ratio of
Spark's time to tidemark's (events/s of tidemark over Spark's) per round, and its median
and range. ``--one-task`` also times the one-task run (``spark.tidemark.preAggregate=false``,
Flink's parallelism 1) once per case, for the record; ``--floor`` times, after the max
case's rounds, what any Row-based Python function costs on its input (tidemark's Rows of
each Arrow batch and a plain max loop in ``mapInArrow``): the best ratio such a function
can reach beside Spark's own.

Usage: python benchmarks/window_all.py [--events N] [--bids B] [--rounds R] [--one-task]
[--floor]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")
_BENCHMARKS = str(Path(__file__).resolve().parent)
sys.path.insert(0, _BENCHMARKS)  # the workers import nexmark.queries and this module by name
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_BENCHMARKS, os.environ.get("PYTHONPATH", "")) if p
)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from nexmark.generator import GeneratorConfig, generate_bids  # noqa: E402
from nexmark.queries import spark_query, tidemark_query  # noqa: E402
from spark_batch import events  # noqa: E402

import tidemark as tm  # noqa: E402
from tidemark.spark.protocol.columns import MAIN, OUTPUT, TS  # noqa: E402
from tidemark.spark.runtime.session import get_spark  # noqa: E402

PRE_AGGREGATE = "spark.tidemark.preAggregate"  # the public conf (docs/configuration.md)

MINUTE_MS = 60_000
TARGET = 0.5


class MaxAmount(tm.AggregateFunction):
    """The largest ``amount`` of a window (order-insensitive: declared)."""

    order_insensitive = True

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        amount = value.amount
        return amount if accumulator is None or amount > accumulator else accumulator

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        if acc_a is None or (acc_b is not None and acc_b > acc_a):
            return acc_b
        return acc_a


def max_cases(df: Any) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any]]:
    """``(spark, tidemark, check)`` of ``window_all`` max over ``df``."""
    from pyspark.sql import functions as F

    def spark_frame() -> Any:
        window = F.window(F.timestamp_millis("ts"), "1 minute")
        return df.groupBy(window.alias("w")).agg(F.max("amount").alias("amount"))

    def tidemark_result() -> Any:
        stream = tm.from_dataframe(df, timestamp="ts")
        windowed = stream.window_all(tm.TumblingEventTimeWindows.of(MINUTE_MS))
        return windowed.aggregate(MaxAmount(), output_schema="amount long")

    def check() -> None:
        theirs = spark_frame().select((F.unix_millis("w.end") - 1).alias("ts"), "amount")
        combined = tidemark_result().combined_dataframe()
        ours = combined.where(F.col(OUTPUT) == MAIN).select(F.col(TS).alias("ts"), "amount")
        _equal(ours, theirs, "window_all max")

    return spark_frame, lambda: tidemark_result().to_dataframe(), check


def shorthand_cases(df: Any) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any]]:
    """``(spark, tidemark, check)`` of Flink's ``max`` shorthand on ``window_all``: each
    window's first element with ``amount`` replaced by the window's largest (Spark's own
    side as in :func:`max_cases`: the largest ``amount`` only)."""
    from pyspark.sql import functions as F

    spark_frame = max_cases(df)[0]

    def tidemark_frame() -> Any:
        stream = tm.from_dataframe(df, timestamp="ts")
        windowed = stream.window_all(tm.TumblingEventTimeWindows.of(MINUTE_MS))
        return windowed.max("amount").to_dataframe()

    def check() -> None:
        # the result's ts is its first element's: its window is the minute it falls in
        theirs = spark_frame().select(
            (F.unix_millis("w.start") / MINUTE_MS).cast("long").alias("minute"), "amount"
        )
        minute = F.floor(F.col("ts") / MINUTE_MS).cast("long").alias("minute")
        _equal(tidemark_frame().select(minute, "amount"), theirs, "window_all .max shorthand")

    return spark_frame, tidemark_frame, check


def _rows_max(batches: Any) -> Any:
    """The floor of a Row-based Python function on this input: tidemark's Rows of each
    Arrow batch and a plain loop keeping the largest ``amount``, nothing else."""
    import pyarrow as pa

    from tidemark.spark.protocol.column_values import arrow_rows_and_columns

    best = None
    for batch in batches:
        for row in arrow_rows_and_columns(batch, batch.schema.names)[0]:
            amount = row.amount
            if best is None or amount > best:
                best = amount
    yield pa.RecordBatch.from_pylist([{"amount": best}])


def floor_case(df: Any) -> Callable[[], Any]:
    """The Row floor over every partition of ``df`` (``--floor``)."""
    return lambda: df.select("user", "amount", "ts").mapInArrow(_rows_max, "amount long")


def q7_cases(bids: Any, disorder_ms: int) -> tuple[Any, Any, Any]:
    """``(spark, tidemark, check)`` of Nexmark q7 in BATCH over ``bids``."""

    def spark_frame() -> Any:
        return spark_query("q7", bids, disorder_ms)

    def tidemark_frame() -> Any:
        return tidemark_query("q7", bids, disorder_ms).to_dataframe()

    return spark_frame, tidemark_frame, lambda: _equal(tidemark_frame(), spark_frame(), "q7")


def _equal(ours: Any, theirs: Any, name: str) -> None:
    """Stop the benchmark unless both frames hold the same rows."""
    a, b = sorted(tuple(r) for r in ours.collect()), sorted(tuple(r) for r in theirs.collect())
    if a != b or not a:
        raise SystemExit(f"{name}: tidemark's {len(a)} rows differ from Spark's {len(b)}")
    print(f"  {name}: {len(a):,} results, equal to Spark's", flush=True)


def _noop(frame: Callable[[], Any]) -> float:
    started = time.perf_counter()
    frame().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def measure(
    name: str,
    n: int,
    sides: tuple[Any, Any],
    rounds: int,
    spark: Any,
    one_task: bool,
    floor: Any = None,
):
    """Alternated rounds of ``sides`` (Spark, tidemark); prints and returns the ratios."""
    _noop(sides[0]), _noop(sides[1])  # warm-up: JIT, Python workers
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for side in (0, 1):
            times[side].append(_noop(sides[side]))
    ratios = [s / t for s, t in zip(*times)]
    shown = [", ".join(f"{t:.1f}" for t in side) for side in times]
    print(f"  {name}: Spark {shown[0]} s; tidemark {shown[1]} s ({n:,} events)")
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    median = statistics.median(ratios)
    verdict = "met" if median >= TARGET else "NOT met"
    rates = f"tidemark {n / statistics.median(times[1]):,.0f} events/s"
    print(
        f"  {name}: tidemark / Spark {median:.2f}x ({spread}; target {TARGET}x {verdict}), {rates}"
    )
    if floor is not None:
        floors = [_noop(floor) for _ in range(rounds)]
        shown = ", ".join(f"{t:.1f}" for t in floors)
        best = statistics.median(times[0]) / statistics.median(floors)
        print(f"  {name}: floor (Rows and a max loop in mapInArrow) {shown} s: {best:.2f}x at best")
    if one_task:
        spark.conf.set(PRE_AGGREGATE, "false")
        try:
            single = _noop(sides[1])
        finally:
            spark.conf.unset(PRE_AGGREGATE)
        print(
            f"  {name}: one task (preAggregate=false) {single:.1f} s: {min(times[0]) / single:.2f}x"
        )
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--bids", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one-task", action="store_true")
    parser.add_argument("--floor", action="store_true", help="also time the Row floor (max)")
    args = parser.parse_args(argv)
    spark = get_spark()
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism
    config = GeneratorConfig()
    df = events(spark, args.events)
    bids = spark.createDataFrame(generate_bids(args.bids, config)).cache()
    print(f"{args.events:,} events, {args.bids:,} bids, {cores} cores", flush=True)
    df.count(), bids.count()
    ratios = []
    floor = floor_case(df) if args.floor else None
    for name, n, (theirs, ours, check), floor_of in (
        ("window_all max", args.events, max_cases(df), floor),
        ("window_all .max shorthand", args.events, shorthand_cases(df), None),
        ("q7 BATCH", args.bids, q7_cases(bids, config.max_disorder_ms), None),
    ):
        check()
        measured = measure(name, n, (theirs, ours), args.rounds, spark, args.one_task, floor_of)
        ratios.append(statistics.median(measured))
    return 0 if min(ratios) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
