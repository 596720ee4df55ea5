"""What PySpark's Python stateful operators cost on Nexmark's streams before any window
logic: the floor under any per-element Python implementation, beside Spark's own query.

For each query's stream (``--queries``; parquet files of ``--batch-rows`` bids read one per
micro-batch, as ``run.py`` streams them), these queries run in one process, alternated:

* **Spark**: the query in Spark's own SQL (``queries.spark_query``);
* **floor**: the same bids through the Python stateful operator tidemark runs that
  query in, doing the least a per-element operator can: grouped by a key group of the
  query's key (two groups, one per state partition, where tidemark's default has four
  a partition; one for a non-keyed window), each call reads its rows into Python once (a count per key from
  the key column and the timestamps), keeps one state row and emits one row. q7 and q11
  run in ``applyInPandasWithState``; q5, a chain in tidemark, in one
  ``transformWithStateInPandas`` (its first window only: tidemark runs two);
* **hand** (q5 only): q5 written by hand for PySpark, two chained
  ``transformWithStateInPandas`` as tidemark runs it, the first counting bids per (2 s
  slice, auction) in one dict per key group and firing each 10 s window from its five
  slices, the second emitting each window's top auctions; checked against Spark's rows
  first. What an exact q5 on this operator costs without a general window operator;
* **combined** (q7 only): q7 with its bids combined before the shuffle, the design of
  issue 31's target 5 written by hand: a stateless ``mapInPandas`` per input partition
  folds the micro-batch's bids per 10 s window with q7's own ``HighestBid`` (one
  ``add`` per bid, on a light Row), into a partial (its accumulator and its number of
  bids); one ``applyInPandasWithState`` (one key group, as a ``window_all``) merges the
  partials of a window not yet late (``merge``), counts a late partial's bids as
  dropped, and fires a window once the watermark reaches its end. Checked against
  Spark's rows first. What tidemark's q7 could reach with the pre-pass, at most;
  **combined-rows** the same handing ``add`` what the DataStream contract hands it: a
  Row of all the bid's columns (tidemark's Row type, built as tidemark builds it);
* **floor-tws**, **floor-packed** (q11): the floor in ``transformWithStateInPandas``,
  the operator of tidemark's default (deltas) state layout: the rows as PySpark hands
  them, and packed per key group before the shuffle as tidemark packs them
  (``spark/streaming/worker/packing.py``), each call unpacking them as tidemark's does.
  q11's floors are q12's too (the same key and rows; q12's windows are processing time,
  whose trigger keeps a query running, so it is not streamed here);
* **floor-rows** (q11): floor-packed doing also what the DataStream contract asks of any
  implementation per element, and nothing of a window: a ``Row`` per bid (tidemark's
  own Row type, built as tidemark builds it) handed to q11's own ``CountBids.add``, one
  accumulator per key in a dict. What tidemark's default layout could reach if its
  windows, state and timers cost nothing; **floor-rows-apply** the same in
  ``applyInPandasWithState`` (the row layout's operator);
* **tidemark**: the query in tidemark (``queries.tidemark_query``) in its default state
  layout (the deltas layout; a ``window_all``'s, q7's, the row layout); **tidemark-row**
  (q11) in the row layout
  (``spark.tidemark.streaming.stateLayout=row``: ``applyInPandasWithState``).

It prints each one's events/s and its ratio to Spark's, the median of the rounds and
their range. A floor ratio near or under a target says what no Python window operator on
this operator can reach, whatever its engine does.

Usage::

    python benchmarks/nexmark/floor.py [--events 200000] [--batch-rows 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import pickle
import statistics
import sys
import tempfile
import time
from collections import Counter, namedtuple
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, StructField, StructType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexmark.generator import GeneratorConfig  # noqa: E402
from nexmark.queries import (  # noqa: E402
    SCHEMAS,
    CountBids,
    HighestBid,
    spark_query,
    tidemark_query,
)
from nexmark.run import CountingSink, write_inputs  # noqa: E402
from tidemark.spark.protocol.codec import row_type_of  # noqa: E402
from tidemark.spark.protocol.columns import KEY_GROUP, KEY_GROUP_ROWS  # noqa: E402
from tidemark.spark.runtime.session import get_spark  # noqa: E402
from tidemark.spark.streaming.worker.packing import (  # noqa: E402
    Unpacking,
    pack_batches,
    unpacked_frames,
)

KEYS = {"q5": "auction", "q7": None, "q11": "bidder"}
LAYOUT = "spark.tidemark.streaming.stateLayout"
OUTPUT = "group int, rows long"
WINDOW_MS, SLIDE_MS = 10_000, 2_000
LONG_MIN = -(2**63)


def count_rows(frames: Iterator[pd.DataFrame], key: str | None) -> int:
    """Each row read into Python once: a count per (key, 2 s of event time)."""
    counts: Counter[tuple[Any, int]] = Counter()
    for pdf in frames:
        keys = pdf[key].tolist() if key else [None] * len(pdf)
        counts.update(zip(keys, (t // 2_000 for t in pdf["date_time"].tolist())))
    return sum(counts.values())


def floor_function(key: str | None, read: Any = count_rows) -> Any:
    """The ``applyInPandasWithState`` function of the floor, reading each call's rows
    with ``read`` (:func:`count_rows`, or :func:`add_rows` for ``floor-rows-apply``)."""

    def call(group: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Any:
        rows = read(frames, key) + (state.get[0] if state.exists else 0)
        state.update((rows,))
        state.setTimeoutTimestamp(max(state.getCurrentWatermarkMs(), 0) + 3_600_000)
        yield pd.DataFrame({"group": [group[0]], "rows": [rows]})

    return call


class FloorProcessor(StatefulProcessor):
    """The ``transformWithStateInPandas`` processor of the floor (q5), reading each
    call's rows with ``read`` (:func:`count_rows`, or :func:`add_rows` for
    ``floor-rows``)."""

    def __init__(self, key: str | None, read: Any = count_rows):
        self._key, self._read = key, read

    def init(self, handle: Any) -> None:
        self._rows = handle.getValueState("rows", "rows long")

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        seen = self._rows.get()
        total = self._read(rows, self._key) + (seen[0] if seen else 0)
        self._rows.update((total,))
        yield pd.DataFrame({"group": [key[0]], "rows": [total]})

    def close(self) -> None:
        pass


class PackedFloorProcessor(FloorProcessor):
    """The floor in ``transformWithStateInPandas`` on rows packed per key group, each
    call unpacking them as tidemark's does (the ``floor-packed`` and ``floor-rows``
    sides)."""

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        unpacking = Unpacking(timezone="UTC", prefer_int_ext_dtype=False)
        return super().handleInputRows(key, unpacked_frames(rows, unpacking), timerValues)


def contract_rows(pdf: pd.DataFrame) -> tuple[tuple[str, ...], Iterator[Any]]:
    """The bid columns of ``pdf`` and a Row per bid: tidemark's Row type of those
    columns, built as tidemark builds it (what the DataStream contract hands ``add``)."""
    names = tuple(c for c in pdf.columns if not c.startswith("__") and c != "ts")
    columns = [pdf[c].tolist() for c in names]
    return names, map(tuple.__new__, repeat(row_type_of(names)), zip(*columns))


def add_rows(frames: Iterator[pd.DataFrame], key: str | None) -> int:
    """Each bid as a Row (:func:`contract_rows`) into ``CountBids.add``, one accumulator
    per key: the bids counted."""
    function = CountBids()
    accumulators: dict[Any, Any] = {}
    for pdf in frames:
        names, rows = contract_rows(pdf)
        at = names.index(key) if key else None
        for row in rows:
            k = None if at is None else row[at]
            accumulator = accumulators.get(k)
            if accumulator is None:
                accumulator = function.create_accumulator()
            accumulators[k] = function.add(row, accumulator)
    return sum(accumulators.values())


HAND_FIRST = "auction long, starttime long, endtime long, num long"


class HandCounts(StatefulProcessor):
    """q5's first window written by hand for PySpark (the ``hand`` side): one state row
    per key group, a count per (2 s slice, auction); the 10 s window ending at ``E``
    fires once the watermark reaches ``E - 1``, summing its five slices (as Flink SQL's
    slicing does), and a slice no later window needs is dropped. One timer per group,
    at the next window's firing time."""

    def init(self, handle: Any) -> None:
        self._handle = handle
        self._state = handle.getValueState("slices", "slices binary, fired long, timer long")

    def _call(self, frames: Any, watermark: int) -> Iterator[pd.DataFrame]:
        stored = self._state.get()
        slices: dict[int, Counter[int]] = pickle.loads(stored[0]) if stored else {}
        fired, registered = (stored[1], stored[2]) if stored else (LONG_MIN, None)
        for pdf in frames:
            for auction, t in zip(pdf["auction"].tolist(), pdf["date_time"].tolist()):
                start = t - t % SLIDE_MS
                if start + WINDOW_MS > fired:  # one of its windows is still to fire
                    slices.setdefault(start, Counter())[auction] += 1
        rows: list[tuple[int, int, int, int]] = []
        while slices:
            end = max(fired + SLIDE_MS, min(slices) + SLIDE_MS)  # the next window to fire
            if end - 1 > watermark:
                break
            total: Counter[int] = Counter()
            for start in range(end - WINDOW_MS, end, SLIDE_MS):
                total.update(slices.get(start, ()))
            rows.extend((a, end - WINDOW_MS, end, n) for a, n in total.items())
            fired = end
            for start in [s for s in slices if s + WINDOW_MS <= end]:
                del slices[start]
        timer = max(fired + SLIDE_MS, min(slices) + SLIDE_MS) - 1 if slices else None
        if timer != registered:
            if registered is not None:
                self._handle.deleteTimer(registered)
            if timer is not None:
                self._handle.registerTimer(timer)
        self._state.update((pickle.dumps(slices), fired, timer))
        if rows:
            yield pd.DataFrame(rows, columns=["auction", "starttime", "endtime", "num"])

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        return self._call(rows, timerValues.getCurrentWatermarkInMs())

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        return self._call([], timerValues.getCurrentWatermarkInMs())

    def close(self) -> None:
        pass


class HandTop(StatefulProcessor):
    """q5's second window by hand: the first fires a window's counts for every auction
    at one watermark, so they reach this operator in one call per window end, which
    emits the auctions with the most bids."""

    def init(self, handle: Any) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        pdf = pd.concat(list(rows))
        yield pdf[pdf["num"] == pdf["num"].max()][["auction", "num", "starttime", "endtime"]]

    def close(self) -> None:
        pass


PARTIAL = "start long, bids long, price long, auction long, bidder long, date_time long"
Bid = namedtuple("Bid", "price auction bidder date_time")


def light_bids(pdf: pd.DataFrame) -> Iterator[Any]:
    """A light Row per bid: the four columns q7 reads, as a named tuple."""
    return map(Bid._make, zip(*(pdf[c].tolist() for c in Bid._fields)))


def all_bids(pdf: pd.DataFrame) -> Iterator[Any]:
    """A Row per bid of every bid column, as the DataStream contract hands ``add``."""
    return contract_rows(pdf)[1]


def fold_partition(
    frames: Iterator[pd.DataFrame], bids_of: Any = light_bids
) -> Iterator[pd.DataFrame]:
    """The combined q7's stateless step: a partition's bids folded per 10 s window."""
    function = HighestBid()
    folded: dict[int, list[Any]] = {}
    for pdf in frames:
        for bid in bids_of(pdf):
            t = bid.date_time
            start = t - t % WINDOW_MS
            entry = folded.get(start)
            if entry is None:
                entry = folded[start] = [0, function.create_accumulator()]
            entry[0] += 1
            entry[1] = function.add(bid, entry[1])
    rows = [(start, n, *acc) for start, (n, acc) in folded.items()]
    yield pd.DataFrame(rows, columns=["start", "bids", *Bid._fields])


def merge_partials(group: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Any:
    """The combined q7's stateful step: partials into their windows (a late window's
    bids counted as dropped), the windows the watermark reached fired."""
    function = HighestBid()
    watermark = state.getCurrentWatermarkMs()
    windows, dropped = pickle.loads(state.get[0]) if state.exists else ({}, 0)
    for pdf in frames:
        for start, bids, *acc in pdf[["start", "bids", *Bid._fields]].itertuples(index=False):
            if start + WINDOW_MS - 1 <= watermark:
                dropped += bids
            else:
                windows[start] = function.merge(windows.get(start), tuple(acc))
    due = sorted(s for s in windows if s + WINDOW_MS - 1 <= watermark)
    rows = [(s, s + WINDOW_MS, *_q7_columns(windows.pop(s))) for s in due]
    state.update((pickle.dumps((windows, dropped)),))
    if windows:
        state.setTimeoutTimestamp(max(min(windows) + WINDOW_MS - 2, watermark + 1))
    yield pd.DataFrame(
        rows, columns=["starttime", "endtime", "auction", "bidder", "price", "date_time"]
    )


def _q7_columns(bid: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    price, auction, bidder, date_time = bid
    return auction, bidder, price, date_time


def combined_query(stream: Any, disorder_ms: int, contract: bool = False) -> Any:
    """q7 combined before the shuffle (the ``combined`` side, module docstring); with
    ``contract``, each bid handed to ``add`` as a Row of all its columns
    (``combined-rows``)."""
    bids = _watermarked(stream, disorder_ms)
    if contract:
        fold = functools.partial(fold_partition, bids_of=all_bids)
        partials = bids.select(*stream.columns).mapInPandas(fold, PARTIAL)
    else:
        partials = bids.select(*Bid._fields).mapInPandas(fold_partition, PARTIAL)
    # Spark's watermark is the query's; the operator needs a column carrying its
    # metadata to accept an event-time timeout (as tidemark's own operator does)
    metadata = {"spark.watermarkDelayMs": disorder_ms}
    marker = F.lit(None).cast("timestamp").alias("marker", metadata=metadata)
    grouped = partials.select("*", F.lit(0).alias("group"), marker).groupBy("group")
    return grouped.applyInPandasWithState(
        merge_partials, SCHEMAS["q7"], "state binary", "append", GroupStateTimeout.EventTimeTimeout
    )


def floor_query(query: str, stream: Any, disorder_ms: int, side: str = "floor") -> Any:
    """The floor's streaming DataFrame for ``query`` (see the module docstring)."""
    key = KEYS[query]
    group = _group(key) if key else F.lit(0)
    grouped = _watermarked(stream, disorder_ms).withColumn("group", group).groupBy("group")
    if side in ("floor-packed", "floor-rows"):
        rows = _watermarked(stream, disorder_ms).withColumn(KEY_GROUP, group)
        schema = StructType(
            [rows.schema[KEY_GROUP], StructField(KEY_GROUP_ROWS, BinaryType(), False)]
        )
        packed = rows.mapInArrow(pack_batches, schema).groupBy(KEY_GROUP)
        read = add_rows if side == "floor-rows" else count_rows
        processor = PackedFloorProcessor(key, read)
        return packed.transformWithStateInPandas(processor, OUTPUT, "append", "EventTime")
    if query == "q5" or side == "floor-tws":
        return grouped.transformWithStateInPandas(
            FloorProcessor(key), OUTPUT, "append", "EventTime"
        )
    read = add_rows if side == "floor-rows-apply" else count_rows
    return grouped.applyInPandasWithState(
        floor_function(key, read), OUTPUT, "rows long", "append", GroupStateTimeout.EventTimeTimeout
    )


def hand_query(stream: Any, disorder_ms: int) -> Any:
    """q5 written by hand for PySpark: :class:`HandCounts` then :class:`HandTop`, two
    chained ``transformWithStateInPandas`` operators, as tidemark runs q5."""
    events = _watermarked(stream, disorder_ms)
    counts = events.select("auction", "date_time", _group("auction").alias("group"))
    first = counts.groupBy("group").transformWithStateInPandas(
        HandCounts(), HAND_FIRST, "append", "EventTime"
    )
    return first.groupBy("endtime").transformWithStateInPandas(
        HandTop(), SCHEMAS["q5"], "append", "EventTime"
    )


def _watermarked(stream: Any, disorder_ms: int) -> Any:
    """The bids with Spark's watermark on their event time, as Spark's own query has it."""
    return stream.withColumn("ts", F.timestamp_millis("date_time")).withWatermark(
        "ts", f"{disorder_ms} milliseconds"
    )


def _group(key: str) -> Any:
    """One of two key groups of ``key``, one per state partition."""
    return F.pmod(F.hash(key), F.lit(2)).cast("int")


class CollectingSink:
    """A ``foreachBatch`` sink that keeps the rows (:func:`check_hand`)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        self.rows.extend(tuple(r) for r in df.collect())


def run_once(
    side: str, query: str, spark: Any, root: Path, disorder_ms: int, sink: Any = None
) -> float:
    """Seconds for one streaming run of ``side`` over the stream files."""
    stream = (
        spark.readStream.schema(spark.read.parquet(str(root / "bids")).schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(root / "stream"))
    )
    checkpoint = tempfile.mkdtemp(prefix=f"ck-{side}-{query}-", dir=root)
    trigger = {"availableNow": True}
    started = time.perf_counter()
    sink = sink or CountingSink()
    if side.startswith("tidemark"):
        if side == "tidemark-row":
            spark.conf.set(LAYOUT, "row")
        result = tidemark_query(query, stream, disorder_ms)
        handle = result.write_outputs({"main": sink}, checkpoint, trigger)
        spark.conf.unset(LAYOUT)
    else:
        if side == "hand":
            frame = hand_query(stream, disorder_ms)
        elif side in ("combined", "combined-rows"):
            frame = combined_query(stream, disorder_ms, contract=side == "combined-rows")
        else:
            frame = (
                spark_query(query, stream, disorder_ms)
                if side == "spark"
                else floor_query(query, stream, disorder_ms, side)
            )
        writer = frame.writeStream.outputMode("append")
        writer = writer.foreachBatch(sink).option("checkpointLocation", checkpoint)
        handle = writer.trigger(**trigger).start()
    handle.awaitTermination()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", default="q5,q7,q11")
    args = parser.parse_args()
    config = GeneratorConfig()
    spark = get_spark(master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    root = Path(tempfile.mkdtemp(prefix="nexmark-floor-"))
    write_inputs(root, args.events, args.batch_rows, config)
    print(f"{args.events:,} bids, {args.batch_rows:,} a micro-batch, {args.rounds} rounds")
    for query in args.queries.split(","):
        sides: tuple[str, ...] = ("spark", "floor", "tidemark")
        if query == "q5":
            sides = ("spark", "floor", "hand", "tidemark")
            check_hand(spark, root, config.max_disorder_ms)
        if query == "q7":
            sides = ("spark", "floor", "combined", "combined-rows", "tidemark")
            check_combined(spark, root, config.max_disorder_ms)
        if query == "q11":
            sides = (
                "spark",
                "floor",
                "floor-tws",
                "floor-packed",
                "floor-rows",
                "floor-rows-apply",
                "tidemark",
                "tidemark-row",
            )
        for side in sides:  # a warm-up of each
            run_once(side, query, spark, root, config.max_disorder_ms)
        seconds: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side in sides:
                seconds[side].append(run_once(side, query, spark, root, config.max_disorder_ms))
        cells = []
        for side in sides[1:]:
            ratios = [s / o for s, o in zip(seconds["spark"], seconds[side], strict=True)]
            cells.append(
                f"{side} {args.events / statistics.median(seconds[side]):>8,.0f} ev/s "
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            )
        spark_rate = args.events / statistics.median(seconds["spark"])
        print(f"{query:<4} Spark {spark_rate:>8,.0f} ev/s | " + " | ".join(cells))


def check_hand(spark: Any, root: Path, disorder_ms: int) -> None:
    """The hand-written q5 gives Spark's rows for every window both emitted (Spark's
    second aggregation emits a window one watermark step later: the stream ends with
    windows only the hand-written query has emitted)."""
    sinks = {side: CollectingSink() for side in ("spark", "hand")}
    for side, sink in sinks.items():
        run_once(side, "q5", spark, root, disorder_ms, sink)
    spark_rows, hand_rows = (set(sinks[side].rows) for side in ("spark", "hand"))
    both = {r[3] for r in spark_rows} & {r[3] for r in hand_rows}
    if not both or {r for r in spark_rows if r[3] in both} != {
        r for r in hand_rows if r[3] in both
    }:
        raise SystemExit("the hand-written q5 differs from Spark's")
    print(f"q5   hand-written: Spark's rows for all {len(both)} windows both emitted")


def check_combined(spark: Any, root: Path, disorder_ms: int) -> None:
    """Both combined q7s give Spark's rows for every window Spark emitted (they may emit
    later windows too: Spark's stream ends before the watermark passes them)."""
    sides = ("spark", "combined", "combined-rows")
    sinks = {side: CollectingSink() for side in sides}
    for side, sink in sinks.items():
        run_once(side, "q7", spark, root, disorder_ms, sink)
    spark_rows = set(sinks["spark"].rows)
    windows = {r[0] for r in spark_rows}
    for side in sides[1:]:
        kept = {r for r in sinks[side].rows if r[0] in windows}
        if not windows or kept != spark_rows:
            raise SystemExit(f"the {side} q7 differs from Spark's")
        print(f"q7   {side}: Spark's rows for all {len(windows)} windows Spark emitted")


if __name__ == "__main__":
    main()
