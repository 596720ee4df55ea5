"""The watermarks of a recorded stream, computed with a distributed scan.

A replay emits the strategy's watermark after every element, over the whole stream (all
keys), in arrival order, exactly as a single Flink source would. Each row gets
``__tm_wm``: the watermark in force when it arrived (after the element before it).

Two passes over the stream range-partitioned by arrival order, no global window:
1. each partition reports the running maximum timestamps it reaches (its *records*,
   positions and timestamps);
2. the driver folds them in partition order into the stream's watermark sequence (the
   distinct watermarks and the position after which each was first emitted), and each
   partition then stamps its rows starting from the maximum of the partitions before it.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tidemark.spark.columns import ORDER, TS, WM
from tidemark.spark.session import is_connect
from tidemark.time import LONG_MIN

__all__ = [
    "WatermarkSequence",
    "ArrivalTimes",
    "advance_to_arrival_time",
    "stamp_replay_watermarks",
    "advance_to_recorded_watermark",
    "share_with_tasks",
    "session_parallelism",
]


@dataclass
class WatermarkSequence:
    """The distinct watermarks of a stream, ascending, with the arrival position after
    which each was emitted."""

    values: np.ndarray
    positions: np.ndarray

    def first_at_or_after(self, time: int) -> int:
        """The first watermark ``>= time`` (``LONG_MAX`` if the stream never got there)."""
        index = int(np.searchsorted(self.values, time, side="left"))
        return int(self.values[index]) if index < len(self.values) else 2**63 - 1

    def place(self, watermark: int) -> tuple[int, int]:
        """``(position, previous watermark)`` of a watermark of this sequence."""
        index = int(np.searchsorted(self.values, watermark, side="left"))
        if index < len(self.values) and self.values[index] == watermark:
            previous = int(self.values[index - 1]) if index > 0 else LONG_MIN
            return int(self.positions[index]), previous
        last = int(self.values[-1]) if len(self.values) else LONG_MIN
        return 2**63 - 1, last


@dataclass
class ArrivalTimes:
    """The distinct arrival (processing) times of a recorded stream, ascending: the
    times its processing-time clock advanced to."""

    values: np.ndarray

    def first_at_or_after(self, time: int) -> int:
        """The first arrival time ``>= time`` (``LONG_MAX`` after the last)."""
        index = int(np.searchsorted(self.values, time, side="left"))
        return int(self.values[index]) if index < len(self.values) else 2**63 - 1


def advance_to_arrival_time(op: Any, time: int, arrivals: ArrivalTimes) -> None:
    """Advance ``op``'s processing time to ``time`` as the recorded stream's clock did:
    each due timer fires at its own time, and a timer held for the next advance (see
    ``WindowOperator.advance_processing_time``) at each later arrival time of the stream,
    any key's, as the engine fed every arrival time fires it."""

    def resolve(t: int) -> int:
        return arrivals.first_at_or_after(max(t, op.current_processing_time + 1))

    op.advance_processing_time_stepwise(time, resolve)


def advance_to_recorded_watermark(op: Any, watermark: int, sequence: WatermarkSequence) -> None:
    """Advance ``op``'s event time to ``watermark`` as the recorded stream did.

    Only a watermark that advances reaches a Flink operator, and a due timer fires at
    the first watermark that reaches it *after it was registered*: a timer registered at
    or below the current watermark (a late element's trigger, a continuous trigger's
    next firing) waits for the stream's next, higher watermark. So nothing happens when
    ``watermark`` does not advance, and each timer resolves to the first watermark of
    the stream above both its time and the current watermark.
    """
    if watermark <= op.current_watermark:
        return

    def resolve(time: int) -> int:
        return sequence.first_at_or_after(max(time, op.current_watermark + 1))

    op.advance_watermark_stepwise(watermark, resolve)


@dataclass
class InTask:
    """A value shipped inside the task's closure: what a broadcast is on Spark Connect,
    which has none (``.value``, as a broadcast's)."""

    value: Any


def share_with_tasks(spark: Any, value: Any) -> Any:
    """``value`` for every task: a broadcast on a classic session, else in the closure."""
    if is_connect(spark):
        return InTask(value)
    return spark.sparkContext.broadcast(value)


def session_parallelism(spark: Any) -> int:
    """The session's cores: the default parallelism on a classic session; over Connect,
    which has no SparkContext, ``spark.default.parallelism`` if configured, else the
    shuffle partitions. The scan's range partitions are this many."""
    if not is_connect(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured is None:
        configured = spark.conf.get("spark.sql.shuffle.partitions")
    return max(1, int(configured))


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _local_records(column: str) -> Any:
    """Pass 1: this partition's first position and the running-maximum records of
    ``column`` (timestamps, or recorded watermarks)."""
    return lambda batches: _records_of(batches, column)


def _records_of(batches: Any, column: str) -> Any:
    first = None
    best = None
    rec_ts: list[int] = []
    rec_pos: list[int] = []
    for pdf in batches:
        if pdf.empty:
            continue
        if first is None:
            first = int(pdf[ORDER].iloc[0])
        for pos, ts in zip(pdf[ORDER].tolist(), pdf[column].tolist()):
            if ts is None or ts != ts:
                continue
            if best is None or ts > best:
                best = int(ts)
                rec_ts.append(best)
                rec_pos.append(int(pos))
    if first is not None:
        blob = pickle.dumps((rec_ts, rec_pos))
        yield pd.DataFrame({"pid": [_partition_id()], "first": [first], "records": [blob]})


def _fold(
    rows: list[Any], out_of_orderness_ms: int | None, recorded: bool = False
) -> tuple[dict[int, int | None], Any]:
    """Global records and, per partition, the maximum before it.

    Positions are placements in a chained stream: a watermark derived from timestamps
    is emitted after its element (``2 * order + 1``); a recorded watermark was in force
    when its element arrived, so it came just before it (``2 * order - 1``).
    """
    prefix: dict[int, int | None] = {}
    best: int | None = None
    values: list[int] = []
    positions: list[int] = []
    for row in sorted(rows, key=lambda r: r["first"]):
        prefix[row["pid"]] = best
        rec_ts, rec_pos = pickle.loads(row["records"])
        for ts, pos in zip(rec_ts, rec_pos):
            if best is None or ts > best:
                best = ts
                values.append(ts)
                positions.append(2 * pos - 1 if recorded else 2 * pos + 1)
    if recorded:
        sequence = WatermarkSequence(
            np.array(values, dtype=np.int64), np.array(positions, dtype=np.int64)
        )
    elif out_of_orderness_ms is None:
        sequence = WatermarkSequence(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    else:
        wms = np.array(values, dtype=np.int64) - np.int64(out_of_orderness_ms + 1)
        sequence = WatermarkSequence(wms, np.array(positions, dtype=np.int64))
    return prefix, sequence


def _stamp(prefix: dict[int, int | None], out_of_orderness_ms: int | None) -> Any:
    def stamp(batches: Any) -> Any:
        best = prefix.get(_partition_id())
        for pdf in batches:
            wms = np.empty(len(pdf), dtype=np.int64)
            for i, ts in enumerate(pdf[TS].tolist()):
                if best is None or out_of_orderness_ms is None:
                    wms[i] = LONG_MIN
                else:
                    wms[i] = best - out_of_orderness_ms - 1
                if ts is not None and ts == ts and (best is None or ts > best):
                    best = int(ts)
            yield pdf.assign(**{WM: wms})

    return stamp


def stamp_replay_watermarks(
    frame: Any, out_of_orderness_ms: int | None, spark: Any
) -> tuple[Any, WatermarkSequence, Any]:
    """Add ``__tm_wm`` to ``frame`` (which has ``__tm_order`` and ``__tm_ts``).

    When ``frame`` already has ``__tm_wm`` (watermarks recorded with the stream), only
    the watermark sequence is computed. Also returned: the arrival-ordered frame both
    passes read, persisted (unpersist it when the replay is done with it).
    """
    from pyspark import StorageLevel
    from pyspark.sql.types import LongType, StructField, StructType

    partitions = session_parallelism(spark)
    ranged = frame.repartitionByRange(partitions, ORDER).sortWithinPartitions(ORDER)
    ranged = ranged.persist(StorageLevel.MEMORY_AND_DISK)
    recorded = WM in frame.columns
    column = WM if recorded else TS
    rows = ranged.mapInPandas(_local_records(column), "pid int, first long, records binary")
    prefix, sequence = _fold([r.asDict() for r in rows.collect()], out_of_orderness_ms, recorded)
    if recorded:
        return ranged, sequence, ranged
    schema = StructType(ranged.schema.fields + [StructField(WM, LongType(), False)])
    return ranged.mapInPandas(_stamp(prefix, out_of_orderness_ms), schema), sequence, ranged
