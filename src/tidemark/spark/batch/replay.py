"""The watermarks of a recorded stream, computed with a distributed scan.

A replay emits the strategy's watermark after every element, over the whole stream (all
keys), in arrival order, exactly as a single Flink source would. Each row gets
``__tm_wm``: the watermark in force when it arrived (after the element before it).

Two passes over the stream range-partitioned by arrival order, no global window:
1. each partition reports the running maximum timestamps it reaches (its *records*,
   positions and timestamps), and the first two rows it finds in the same place of the
   arrival order (equal ``order_by`` values) or a row with none: the order must be total,
   since a tie would be broken by however Spark happened to partition the rows;
2. the driver folds them in partition order into the stream's watermark sequence (the
   distinct watermarks and the position after which each was first emitted), and each
   partition then stamps its rows starting from the maximum of the partitions before it.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F

from tidemark._engine.replay import advance_processing_time_stepwise, advance_watermark_stepwise
from tidemark.errors import InputDataError
from tidemark.spark.protocol.columns import ORDER, TS, WM
from tidemark.spark.runtime.session import is_connect, session_cores
from tidemark.time import LONG_MIN

__all__ = [
    "WatermarkSequence",
    "ArrivalTimes",
    "advance_to_arrival_time",
    "advance_clocks",
    "stamp_replay_watermarks",
    "advance_to_recorded_watermark",
    "share_with_tasks",
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
    times its processing-time clock advanced to; and each watermark the stream had
    (ascending) with the arrival time of the first element that arrived under it."""

    values: np.ndarray
    watermarks: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64))
    watermark_arrivals: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64))

    def first_at_or_after(self, time: int) -> int:
        """The first arrival time ``>= time`` (``LONG_MAX`` after the last)."""
        index = int(np.searchsorted(self.values, time, side="left"))
        return int(self.values[index]) if index < len(self.values) else 2**63 - 1

    def in_force_at(self, watermark: int) -> int:
        """The arrival time at which ``watermark`` came in force (``LONG_MAX``: after the
        last arrival, no element arrived under it)."""
        index = int(np.searchsorted(self.watermarks, watermark, side="left"))
        if index < len(self.watermarks) and self.watermarks[index] == watermark:
            return int(self.watermark_arrivals[index])
        return 2**63 - 1


def advance_to_arrival_time(op: Any, time: int, arrivals: ArrivalTimes) -> None:
    """Advance ``op``'s processing time to ``time`` as the recorded stream's clock did:
    each due timer fires at its own time, and a timer held for the next advance (see
    ``OperatorHandle.advance_processing_time``) at each later arrival time of the stream,
    any key's, as the engine fed every arrival time fires it."""

    def resolve(t: int) -> int:
        return arrivals.first_at_or_after(max(t, op.current_processing_time + 1))

    advance_processing_time_stepwise(op, time, resolve)


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

    advance_watermark_stepwise(op, watermark, resolve)


def advance_clocks(
    op: Any, time: int | None, watermark: int, sequence: WatermarkSequence, arrivals: Any
) -> None:
    """Advance ``op``'s processing time to ``time`` (None: it stays) and its watermark to
    ``watermark`` as the recorded stream moved both: at each arrival, the arrival time
    first, then the watermark in force.

    A key skips the other keys' arrivals, so between two of its elements both clocks
    may have moved many times: each watermark a due event-time timer needs is met at
    the arrival time it came in force (the processing-time timers due by then fire
    first), then the rest of each clock's way is gone as
    :func:`advance_to_arrival_time` and :func:`advance_to_recorded_watermark` go it.
    """
    if time is None or arrivals is None:
        advance_to_recorded_watermark(op, watermark, sequence)
        return
    while watermark > op.current_watermark:
        due = _next_event_due(op.event_time_timers)
        if due is None or due > watermark:
            break
        step = sequence.first_at_or_after(max(due, op.current_watermark + 1))
        if step > watermark:
            break
        advance_to_arrival_time(op, min(arrivals.in_force_at(step), time), arrivals)
        advance_to_recorded_watermark(op, step, sequence)
    advance_to_arrival_time(op, time, arrivals)
    advance_to_recorded_watermark(op, watermark, sequence)


def _next_event_due(timers: Any) -> int | None:
    """The earliest watermark an event-time timer may be due at: the queue's first, or
    while one is held, the next advance."""
    due = timers.queue.peek_time()
    if timers.queue.has_held():
        step_up = timers.current_time + 1
        due = step_up if due is None else min(due, step_up)
    return due


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


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _local_records(column: str, order_by: list[str], floats: frozenset[str]) -> Any:
    """Pass 1: this partition's first position, the running-maximum records of
    ``column`` (timestamps, or recorded watermarks), and its first fault in the arrival
    order ``order_by`` (see :func:`order_fault`; ``floats``: its float columns)."""
    return lambda batches: _records_of(batches, column, order_by, floats)


def _records_of(batches: Any, column: str, order_by: list[str], floats: frozenset[str]) -> Any:
    first = None
    best = None
    rec_ts: list[int] = []
    rec_pos: list[int] = []
    fault: str | None = None
    last = None  # the previous batch's last row, a one-row frame
    for pdf in batches:
        if pdf.empty:
            continue
        if column == WM and pdf[WM].isna().any():  # a recorded watermark is missing
            at = int(pdf[WM].isna().to_numpy().argmax())
            fault = f"{_MISSING_WATERMARK}{_describe(pdf, order_by, at)}"
            first = int(pdf[ORDER].iloc[0]) if first is None else first
            break
        if last is not None:  # the seam between batches
            seam = pd.concat([last, pdf.iloc[[0]]], ignore_index=True)
            fault = order_fault(seam, order_by, floats)
        fault = fault or order_fault(pdf, order_by, floats)
        if first is None:
            first = int(pdf[ORDER].iloc[0]) if fault is None else LONG_MIN
        if fault is not None:
            break  # the stream is refused: no need for its records
        last = pdf.iloc[[-1]]
        best = running_records(pdf[ORDER], pdf[column], best, rec_ts, rec_pos)
    if first is not None:
        blob = pickle.dumps((rec_ts, rec_pos))
        yield pd.DataFrame(
            {"pid": [_partition_id()], "first": [first], "records": [blob], "fault": [fault]}
        )


def order_fault(
    pdf: pd.DataFrame, order_by: list[str], floats: frozenset[str] = frozenset()
) -> str | None:
    """Where rows sorted by the columns ``order_by`` fail to be a total arrival order:
    the first row without an order value, or the first two adjacent rows with equal
    values, described with their timestamps; None when every row has its own place.
    ``floats``: the columns of Spark's float types (pandas holds an integer column
    with nulls as floats too, a null as NaN)."""
    for name in order_by:
        missing = pdf[name].isna().to_numpy()
        if missing.any():
            where = _describe(pdf, order_by, int(missing.argmax()), floats)
            what = "null or NaN" if name in floats else "null"
            return f"{_NO_VALUE} ({what} {name!r}): {where}; {_fill_or_drop(order_by, name)}"
    same = np.ones(max(len(pdf) - 1, 0), dtype=bool)
    for name in order_by:
        values = pdf[name].to_numpy()
        if values.dtype == object:
            same &= np.fromiter(map(_equal, values[1:], values[:-1]), bool, len(same))
        else:
            same &= values[1:] == values[:-1]
    if not same.any():
        return None
    at = int(same.argmax())
    first, second = _describe(pdf, order_by, at), _describe(pdf, order_by, at + 1)
    return f"two rows share one place in it: {first} and {second}"


_NO_VALUE = "a row has no `order_by` value"


def _fill_or_drop(order_by: list[str], name: str) -> str:
    """How to give the rows without a value of ``name`` their place: fill the column, or
    (a tie-breaker) leave it out when the columns before it are unique already."""
    fill = f"fill {name!r} in with values that keep the rows apart, or filter those rows out"
    before = order_by[: order_by.index(name)]
    if not before:
        return fill
    shown = before[0] if len(before) == 1 else before
    alone = f"if {shown!r} alone gives every row its own place"
    return f"{fill}; or, {alone}, drop {name!r}: order_by={shown!r}"


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` for values of a pandas object column (arrays compare element-wise)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


def _describe(
    frame: pd.DataFrame, order_by: list[str], index: int, floats: frozenset[str] = frozenset()
) -> str:
    """One row's order values and timestamp (long ms) for a message (a missing value
    of a column not in ``floats`` as None)."""
    shown = [_plain(frame[name].iloc[index]) for name in order_by]
    shown = [None if n not in floats and _is_nan(v) else v for n, v in zip(order_by, shown)]
    values = ", ".join(f"{name}={value!r}" for name, value in zip(order_by, shown))
    ts = frame[TS].iloc[index]
    return f"({values}, timestamp={None if pd.isna(ts) else int(ts)}ms)"


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds (for a message)."""
    return value.item() if isinstance(value, np.generic) else value


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
        # never below Long.MIN_VALUE: Flink's bounded out-of-orderness starts its
        # maximum at Long.MIN_VALUE + out_of_orderness + 1 (int64 would wrap around)
        floor = np.int64(LONG_MIN + out_of_orderness_ms + 1)
        records = np.maximum(np.array(values, dtype=np.int64), floor)
        wms = records - np.int64(out_of_orderness_ms + 1)
        sequence = WatermarkSequence(wms, np.array(positions, dtype=np.int64))
    return prefix, sequence


def _stamp(prefix: dict[int, int | None], out_of_orderness_ms: int | None) -> Any:
    """Pass 2: each Arrow batch with ``__tm_wm``. Arrow, not pandas: the rows' own
    columns pass as Spark gave them (pandas would turn a NaN into a null, and a
    timestamp into a wall clock of the session's time zone, ambiguous where daylight
    saving repeats an hour, failing after 2262)."""

    def stamp(batches: Any) -> Any:
        best = prefix.get(_partition_id())
        for batch in batches:
            stamps = batch.column(batch.schema.get_field_index(TS))
            wms, best = watermarks_before(
                stamps.to_pandas(integer_object_nulls=True), best, out_of_orderness_ms
            )
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(wms, pa.int64())], names=[*batch.schema.names, WM]
            )

    return stamp


def _valid_longs(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(mask of rows with a value, their values as int64)`` of a timestamp column
    (nulls arrive as None, or NaN in a float column)."""
    valid = column.notna().to_numpy()
    values = column.to_numpy()[valid]
    if values.dtype != np.int64:
        values = np.array([int(v) for v in values], dtype=np.int64)
    return valid, values


def running_records(
    positions: pd.Series,
    column: pd.Series,
    best: int | None,
    rec_ts: list[int],
    rec_pos: list[int],
) -> int | None:
    """Append to ``rec_ts`` / ``rec_pos`` each value of ``column`` above every value
    before it (and above ``best``), with its position; return the new maximum."""
    valid, values = _valid_longs(column)
    if not len(values):
        return best
    running = np.maximum.accumulate(values if best is None else np.maximum(values, best))
    before = np.empty_like(running)
    before[1:] = running[:-1]
    before[0] = LONG_MIN if best is None else best
    records = running > before
    if best is None:
        records[0] = True  # the first value is a record, whatever it is
    places = positions.to_numpy()[valid]
    rec_ts.extend(running[records].tolist())
    rec_pos.extend(int(p) for p in places[records])
    return int(running[-1])


def watermarks_before(
    column: pd.Series, best: int | None, out_of_orderness_ms: int | None
) -> tuple[np.ndarray, int | None]:
    """Each row's watermark in force when it arrived (after the rows before it, whose
    largest timestamp before these rows is ``best``), and the largest timestamp after
    them: ``best - out_of_orderness - 1``, or ``LONG_MIN`` while there is none (or no
    strategy); never below ``LONG_MIN``, as Flink's bounded out-of-orderness starts."""
    n = len(column)
    valid, values = _valid_longs(column)
    seen = np.full(n, LONG_MIN, dtype=np.int64)
    seen[valid] = values
    has = valid.copy()
    if best is not None:
        seen = np.maximum(seen, np.int64(best))
        has[:] = True
    running = np.maximum.accumulate(seen) if n else seen
    has = np.logical_or.accumulate(has) if n else has
    # the watermark before row i comes from rows < i
    before, before_has = np.empty(n, dtype=np.int64), np.zeros(n, dtype=bool)
    if n:
        before[1:], before_has[1:] = running[:-1], has[:-1]
        before[0] = LONG_MIN if best is None else best
        before_has[0] = best is not None
    wms = np.full(n, LONG_MIN, dtype=np.int64)
    if out_of_orderness_ms is not None:
        floor = LONG_MIN + out_of_orderness_ms + 1
        lift = before_has & (before >= floor)
        wms[lift] = before[lift] - np.int64(out_of_orderness_ms + 1)
    last = best if not n or not has[-1] else int(running[-1])
    return wms, last


def stamp_replay_watermarks(
    frame: Any,
    out_of_orderness_ms: int | None,
    spark: Any,
    order_by: list[str],
    watermark: str | None = None,
) -> tuple[Any, WatermarkSequence, Any]:
    """Add ``__tm_wm`` to ``frame`` (which has ``__tm_ts`` and the ``order_by`` columns).

    ``frame`` holds ``__tm_order``, each row's position in the arrival order, or, when it
    has none, gets one here: increasing longs in the order of the ``order_by`` columns
    (Spark's ordering, compared one after another), ``monotonically_increasing_id``
    numbered after the range sort, which is deterministic since no two rows may tie. When ``frame`` already has
    ``__tm_wm`` (watermarks recorded with the stream), only the watermark sequence is
    computed.

    Also returned: the arrival-ordered frame both passes read, persisted (unpersist it
    when the replay is done with it).

    Raises
    ------
    InputDataError
        Two rows with equal ``order_by`` values, or a row without one; a row without
        its recorded watermark (``__tm_wm``, read from the user's column ``watermark``).
    """
    from pyspark import StorageLevel
    from pyspark.sql.types import LongType, StructField, StructType

    partitions = session_cores(spark)
    by = [F.col(f"`{name}`") for name in order_by]
    ranged = frame.repartitionByRange(partitions, *by).sortWithinPartitions(*by)
    if ORDER not in frame.columns:
        ranged = ranged.withColumn(ORDER, F.monotonically_increasing_id())
    ranged = ranged.persist(StorageLevel.MEMORY_AND_DISK)
    recorded = WM in frame.columns
    column = WM if recorded else TS
    read = [F.col(f"`{name}`") for name in dict.fromkeys([ORDER, TS, column, *order_by])]
    floats = frozenset(
        name for name in order_by if type(frame.schema[name].dataType).__name__ in _FLOAT_TYPES
    )
    pass_1 = ranged.select(*read).mapInPandas(
        _local_records(column, order_by, floats),
        "pid int, first long, records binary, fault string",
    )
    rows = [r.asDict() for r in pass_1.collect()]
    _refuse_faults(rows, order_by, watermark)
    prefix, sequence = _fold(rows, out_of_orderness_ms, recorded)
    if recorded:
        return ranged, sequence, ranged
    schema = StructType(ranged.schema.fields + [StructField(WM, LongType(), False)])
    return ranged.mapInArrow(_stamp(prefix, out_of_orderness_ms), schema), sequence, ranged


_MISSING_WATERMARK = "no recorded watermark: "
_FLOAT_TYPES = ("FloatType", "DoubleType")


def _refuse_faults(
    rows: list[dict[str, Any]], order_by: list[str], watermark: str | None = None
) -> None:
    """Raise the first partition's fault in the arrival order (in arrival order)."""
    faults = [r["fault"] for r in sorted(rows, key=lambda r: r["first"]) if r["fault"]]
    missing = [f[len(_MISSING_WATERMARK) :] for f in faults if f.startswith(_MISSING_WATERMARK)]
    if missing:
        raise InputDataError(
            f"null `watermark` in column {watermark!r}: a replay with recorded watermarks "
            f"needs the watermark in force at every arrival; first row without one: "
            f"{missing[0]}. Fill it in (e.g. the previous row's watermark, or "
            "-9223372036854775808 before the first), or filter those rows out"
        )
    if not faults:
        return
    given = order_by[0] if len(order_by) == 1 else order_by
    refusal = f"`order_by`={given!r} must give every row its own place in the arrival order"
    if faults[0].startswith(_NO_VALUE):  # the fault says which column to fill or drop
        raise InputDataError(f"{refusal}; {faults[0]}")
    columns = [order_by[0], "id"] if len(order_by) == 1 else [*order_by, "<another column>"]
    how = (
        "a column with unique values, or several columns"
        if len(order_by) == 1
        else "one more column"
    )
    advice = f"Give order_by {how}: order_by={columns!r}"
    raise InputDataError(f"{refusal}; {faults[0]}. {advice} to break ties by a rule you state")
