"""What runs in a Spark task: one engine operator over a partition sorted by key.

Two drivers share the reading of a partition (:class:`PartitionDriver`): a
:class:`BatchDriver` runs Flink's BATCH semantics, a :class:`ReplayDriver` the replay of
a recorded stream; :mod:`tidemark.spark.execution` chooses one.

The partition arrives as Arrow batches sorted by key, then by time (BATCH) or arrival
(replay), or unsorted for a BATCH partition the worker sorts itself
(:mod:`tidemark.spark.batch.sorting`). Rows become ``pyspark.sql.Row`` elements; each key is
processed to its end and then flushed:

- BATCH (Flink's ``execution.runtime-mode=BATCH``): elements in timestamp order under
  no watermark, then the watermark jumps to +inf and all timers fire; processing time is
  the wall clock, and processing-time timers also fire at the end of the key.
- replay: before each element the watermark advances, step by step, to the watermark
  the stream had when the element arrived (so every timer fires at the watermark that
  first reached it), and processing time to its arrival time, the two clocks moving
  together as the stream's did (at each arrival its arrival time, then the watermark
  in force: :func:`~tidemark.spark.batch.replay.advance_clocks`); after a key's last
  element, processing time goes on to the stream's last arrival (the stream's clock did,
  whichever key arrived), then the stream's final watermark, then +inf, as a bounded
  Flink source ends. Processing-time timers beyond the last arrival do not fire, as in
  Flink.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark._engine.contract import OperatorHandle
from tidemark.errors import InputDataError, WindowResultError
from tidemark.ranges import first_out_of_range, out_of_range_error
from tidemark.spark.batch.replay import advance_clocks
from tidemark.spark.batch.sorting import sorted_batches
from tidemark.spark.protocol.codec import result_tuple
from tidemark.spark.protocol.column_values import arrow_batch, arrow_column, arrow_rows_and_columns
from tidemark.spark.protocol.columns import (
    DROPPED,
    DROPPED_OUTPUT,
    KEY,
    MAIN,
    ORDER,
    OUTPUT,
    PT,
    SIDE,
    STATS_OUTPUT,
    TS,
    WM,
    combined_schema,
    decode_key,
    encode_side,
)
from tidemark.spark.protocol.figures import Figures
from tidemark.spark.protocol.keys import NULL_KEY_ADVICE, key_normaliser, null_key_message
from tidemark.spark.protocol.timestamps import ACCEPTED_TIMESTAMP_STRINGS
from tidemark.spark.protocol.worker_plan import WorkerPlan
from tidemark.spark.runtime.worker_gc import fewer_gc_passes
from tidemark.time import LONG_MAX, LONG_MIN, TimeDomain

__all__ = [
    "RunnerConfig",
    "PartitionDriver",
    "BatchDriver",
    "ReplayDriver",
    "NULL_TIMESTAMP_ADVICE",
    "UNPARSEABLE_ADVICE",
]

# What to do about a bad input row (the SQL fast path says the same).
NULL_TIMESTAMP_ADVICE = "Every element needs an event timestamp: fill in or filter out those rows."
UNPARSEABLE_ADVICE = (
    f"Accepted timestamp strings: {ACCEPTED_TIMESTAMP_STRINGS}; or parse the column "
    "first with pyspark.sql.functions.to_timestamp(column, format)."
)

_NO_KEY = object()
_FLUSH_ROWS = 10_000


@dataclass(frozen=True)
class RunnerConfig(WorkerPlan):
    """Everything a task needs, picklable (no DataFrames): the
    :class:`~tidemark.spark.protocol.worker_plan.WorkerPlan` both modes share (the spec, the
    value columns and their types, the result schema), and what BATCH and replays add."""

    key_columns: list[str]
    function_key: bool
    replay: bool
    watermarks: Any
    timestamp_column: str | None
    has_processing_time: bool
    final_processing_time: int | None = None
    arrival_times: Any = None  # a replay's ArrivalTimes, shared with tasks
    timestamps_in: str = TS  # the column with long-ms timestamps
    # BATCH: the columns the worker sorts its partition by, when Spark has not sorted it
    sort_columns: list[str] | None = None
    sort_budget: int = 0  # bytes of input a worker sorts in memory before spilling

    @cached_property
    def output_schema(self) -> Any:
        """The combined output's schema (:func:`tidemark.spark.protocol.columns.combined_schema`)."""
        return combined_schema(self.result_schema, self.replay)


class _Output:
    """Collects emitted rows of one partition in the combined output's column order
    (:func:`tidemark.spark.protocol.columns.combined_schema`).

    BATCH results, the bulk of the output, are kept apart as values and timestamps and
    become columns directly (no row tuple per result); everything else is kept as rows.
    The key each stretch of them was emitted for is noted once per stretch, for the
    message of a result that does not fit the output schema.
    """

    def __init__(self, config: RunnerConfig):
        self.config = config
        self.rows: list[tuple[Any, ...]] = []
        self.result_values: list[Any] = []  # BATCH results, each fitting result_names
        self.result_stamps: list[int] = []
        self.seq = 0
        width = len(config.result_names)
        self.empty_result = (None,) * width
        # (first result index, first row index, key) of each stretch emitted for one key
        self.key_marks: list[tuple[int, int, Any]] = []
        self.figures = Figures()  # the task's, emitted by stats()
        late = config.spec.late_data_tag
        self.late_tag_id = None if late is None else late.tag_id

    def __len__(self) -> int:
        return len(self.rows) + len(self.result_values)

    def mark_key(self, key: Any) -> None:
        """What is collected next is emitted for ``key``."""
        marks = self.key_marks
        if not marks or marks[-1][2] != key:
            marks.append((len(self.result_values), len(self.rows), key))

    def _key_at(self, index: int, of_rows: bool) -> Any:
        """The key result ``index`` (or row ``index``) was emitted for."""
        starts = [mark[1 if of_rows else 0] for mark in self.key_marks]
        at = bisect.bisect_right(starts, index) - 1
        return self.key_marks[at][2] if at >= 0 else None

    def _meta(self, order: int, wm_before: int) -> tuple[int, ...]:
        """A replay's placement columns of the next row (none in BATCH)."""
        self.seq += 1
        return (order, self.seq, wm_before) if self.config.replay else ()

    def result(self, value: Any, ts: int, order: int, wm_before: int) -> None:
        values = self._fitted(value, ts)
        self.rows.append((MAIN, ts, *self._meta(order, wm_before), *values, None, None))
        self.figures.num_records_out += 1

    def results(self, emitted: list[tuple[Any, int]]) -> None:
        """BATCH results, ``(value, timestamp)`` pairs (:meth:`result` without placement)."""
        names, values, stamps = self.config.result_names, self.result_values, self.result_stamps
        try:
            for value, ts in emitted:
                values.append(result_tuple(value, names))
                stamps.append(ts)
        except WindowResultError:
            self._fitted(value, ts)  # raises it again, with the key and the window
            raise
        self.figures.num_records_out += len(emitted)

    def _fitted(self, value: Any, ts: int) -> tuple[Any, ...]:
        """``value`` as a tuple of the output's fields, or the error with its context."""
        try:
            return result_tuple(value, self.config.result_names)
        except WindowResultError as exc:
            key = self.key_marks[-1][2] if self.key_marks else None
            raise WindowResultError(f"{exc} ({_context(key, ts)})") from None

    def side(self, tag_id: str, value: Any, ts: int, order: int, wm_before: int) -> None:
        meta = self._meta(order, wm_before)
        self.rows.append((tag_id, ts, *meta, *self.empty_result, encode_side(value), None))
        if tag_id == self.late_tag_id:
            self.figures.num_late_records_side_output += 1

    def dropped(self, count: int) -> None:
        """The task's count of dropped late records (one row per task)."""
        meta = self._meta(LONG_MAX, LONG_MAX)
        self.rows.append((DROPPED_OUTPUT, None, *meta, *self.empty_result, None, count))

    def stats(self, records_in: int, dropped: int) -> None:
        """The task's figures (one ``"__tm_stats"`` row per task, placed last)."""
        figures = self.figures
        figures.num_records_in, figures.num_late_records_dropped = records_in, dropped
        meta = self._meta(LONG_MAX, LONG_MAX)
        row = (STATS_OUTPUT, None, *meta, *self.empty_result, figures.encode(), None)
        self.rows.append(row)

    def batches(self, schema: Any) -> list[Any]:
        """What was collected so far as pyarrow RecordBatches of ``schema``."""
        names = schema.fieldNames()
        out = []
        if self.result_values:
            values, stamps = self.result_values, self.result_stamps
            n = len(values)
            columns: dict[str, Any] = dict(zip(self.config.result_names, zip(*values)))
            blanks = [None] * n
            columns.update({OUTPUT: [MAIN] * n, TS: stamps, SIDE: blanks, DROPPED: blanks})
            described = self._describer(list(zip(values, stamps)), of_rows=False)
            out.append(arrow_batch(columns, schema, described))
        if self.rows:
            rows = self.rows
            described = self._describer(rows, of_rows=True)
            out.append(arrow_batch(dict(zip(names, zip(*rows))), schema, described))
        self.result_values, self.result_stamps, self.rows = [], [], []
        self.key_marks = self.key_marks[-1:]
        if self.key_marks:
            self.key_marks[0] = (0, 0, self.key_marks[0][2])
        return out

    def _describer(self, collected: list[tuple[Any, ...]], of_rows: bool) -> Any:
        """``index -> text`` naming a collected result (a ``(values, timestamp)`` pair,
        or a row), its key and its window."""
        names = self.config.result_names

        def describe(index: int) -> str:
            item = collected[index]
            if of_rows:  # (output, ts, [placement], *values, side, dropped)
                start = len(item) - len(names) - 2
                values, ts = item[start : start + len(names)], item[1]
            else:
                values, ts = item
            result = dict(zip(names, values))
            return f"result {result}, {_context(self._key_at(index, of_rows), ts)}"

        return describe


def _context(key: Any, ts: int | None) -> str:
    """Where a result was emitted: its key and its window's ``max_timestamp``."""
    return f"key={key!r}, window max_timestamp={ts}"


def _uses_processing_time(trigger: Any) -> bool:
    """Whether a pipeline's own trigger (None: the assigner's default) may register
    processing-time timers, as it declares."""
    return trigger is not None and TimeDomain.PROCESSING_TIME in trigger.timer_domains()


def _changes(column: Any) -> Any:
    """A numpy bool array: does element ``i + 1`` of ``column`` differ from element ``i``
    (nulls never occur here: null keys are rejected before)."""
    changed = pc.not_equal(column.slice(1), column.slice(0, len(column) - 1))
    return changed.to_numpy(zero_copy_only=False)


def _refuse_out_of_range(
    assigner: Any, stamps: list[Any], rows: list[Any], column: Any = None
) -> None:
    """An element whose windows would overflow a long is an error, with its row.
    ``column``, the batch's Arrow column of ``stamps`` where it has one, is checked
    first at Arrow's speed (its smallest and largest; nulls are left to whoever reports
    them); only a batch reaching past the bounds is searched for its first such row."""
    bounds = assigner.timestamp_range()
    if column is not None and pa.types.is_integer(column.type):
        extremes = pc.min_max(column)
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        if low is None or (bounds[0] <= low and high <= bounds[1]):
            return
    at = first_out_of_range(stamps, *bounds)
    if at is not None:
        raise out_of_range_error(assigner, stamps[at], bounds, rows[at])


class PartitionDriver:
    """``mapInArrow`` function: runs the operator over one key-sorted partition.

    What BATCH and replay share: sorting (when Spark has not), reading Arrow batches into
    Rows, keys and timestamps, and collecting the combined output. Subclasses say how a
    batch's elements are fed (:meth:`_feed`) and how a key ends (:meth:`_finish_key`).
    """

    def __init__(self, config: RunnerConfig):
        self.config = config
        # NaN, -0.0, struct and array key columns: their values as keys (spark/protocol/keys.py)
        types = dict(zip(config.value_names, config.value_types))
        self._key_normaliser = key_normaliser([types.get(c, "") for c in config.key_columns])

    def __call__(self, batches: Any) -> Any:
        columns = self.config.sort_columns
        if columns:
            batches = sorted_batches(batches, columns, self.config.sort_budget)
        fewer_gc_passes()
        yield from self._run(batches)

    def _run(self, batches: Any) -> Any:
        config = self.config
        op = config.make_operator()
        out = _Output(config)
        current: Any = _NO_KEY
        records_in = 0
        for batch in batches:
            records_in += batch.num_rows
            rows, columns = arrow_rows_and_columns(batch, config.value_names)
            keys = self._keys(batch, rows, columns)
            stamps = columns.get(config.timestamps_in) or arrow_column(batch, config.timestamps_in)
            time_column = batch.column(batch.schema.get_field_index(config.timestamps_in))
            _refuse_out_of_range(op.assigner, stamps, rows, time_column)
            current = self._feed(op, out, current, batch, keys, rows, stamps)
            if len(out) >= _FLUSH_ROWS:
                yield from out.batches(config.output_schema)
        if current is not _NO_KEY:
            self._finish_key(op, current, out)
        if op.num_late_records_dropped:
            out.dropped(op.num_late_records_dropped)
        out.stats(records_in, op.num_late_records_dropped)
        yield from out.batches(config.output_schema)

    def _feed(
        self,
        op: OperatorHandle,
        out: _Output,
        current: Any,
        batch: Any,
        keys: list[Any],
        rows: list[Any],
        stamps: list[Any],
    ) -> Any:
        """Feed one Arrow batch's elements, finishing each key as the next begins;
        returns the key being processed at the end."""
        raise NotImplementedError

    def _finish_key(self, op: OperatorHandle, key: Any, out: _Output) -> None:
        """After a key's last element: fire what the end of the input fires, emit it,
        and drop the key's state."""
        raise NotImplementedError

    def _next_key(self, op: OperatorHandle, out: _Output, current: Any, key: Any) -> Any:
        """The key now processed: ``key``, after finishing ``current`` if it differs."""
        if current is _NO_KEY or key != current:
            if current is not _NO_KEY:
                self._finish_key(op, current, out)
            return key
        return current

    def _key_bounds(self, batch: Any, keys: list[Any]) -> list[int]:
        """Where the batch's runs of equal keys start, and its length: ``[0, ..., n]``.
        Found by Arrow where the key columns allow it, else by comparing Python keys."""
        n = len(keys)
        columns = [KEY] if self.config.function_key else self.config.key_columns
        if not columns:  # window_all: one key
            return [0, n]
        if n > 1:
            try:
                changed = _changes(batch.column(batch.schema.get_field_index(columns[0])))
                for name in columns[1:]:
                    changed |= _changes(batch.column(batch.schema.get_field_index(name)))
                return [0, *(np.flatnonzero(changed) + 1).tolist(), n]
            except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass  # e.g. nested key columns: compare in Python
        bounds = [0]
        bounds.extend(i for i in range(1, n) if keys[i] != keys[i - 1])
        bounds.append(n)
        return bounds

    def _keys(self, batch: Any, rows: list[Any], by_name: dict[str, list[Any]]) -> list[Any]:
        config = self.config
        if config.function_key:
            return [decode_key(blob) for blob in arrow_column(batch, KEY)]
        if not config.key_columns:
            return [None] * len(rows)
        columns = [by_name[c] for c in config.key_columns]
        for name, values in zip(config.key_columns, columns):
            if batch.column(batch.schema.get_field_index(name)).null_count:
                bad = rows[values.index(None)]
                raise InputDataError(f"{null_key_message(name)}{bad}. {NULL_KEY_ADVICE}")
        keys = columns[0] if len(columns) == 1 else list(zip(*columns))
        normalise = self._key_normaliser
        return keys if normalise is None else list(map(normalise, keys))

    def _check_timestamp(self, row: Any, ts: int | None) -> None:
        """A missing timestamp is an error where the stream has a timestamp column."""
        column = self.config.timestamp_column
        if ts is None and column is not None:
            raw = row[column]
            problem = "null" if raw is None else f"unparseable ({raw!r})"
            advice = NULL_TIMESTAMP_ADVICE if raw is None else UNPARSEABLE_ADVICE
            raise InputDataError(
                f"{problem} timestamp in column {column!r}; example row: {row}. {advice}"
            )

    @staticmethod
    def _side_outputs(op: OperatorHandle, out: _Output, order: int) -> None:
        for tag, emitted in op.side_outputs.items():
            for value, ts in emitted:
                out.side(tag.tag_id, value, ts, order, op.current_watermark)
        op.side_outputs.clear()


class BatchDriver(PartitionDriver):
    """Flink's BATCH semantics: each key's elements in timestamp order under no
    watermark, then the watermark jumps to +inf and every timer fires."""

    def __init__(self, config: RunnerConfig):
        super().__init__(config)
        # BATCH reads the wall clock only for pipelines that use processing time.
        self.wall_clock = not config.spec.assigner.is_event_time() or _uses_processing_time(
            config.spec.trigger
        )

    def _feed(
        self,
        op: OperatorHandle,
        out: _Output,
        current: Any,
        batch: Any,
        keys: list[Any],
        rows: list[Any],
        stamps: list[Any],
    ) -> Any:
        if not self.wall_clock and None not in stamps:
            return self._key_runs(op, out, current, batch, keys, rows, stamps)
        if self.wall_clock and op.serves_runs_at_one_processing_time:
            if None in stamps:  # the first row without a timestamp, where one is needed
                for row, ts in zip(rows, stamps):
                    self._check_timestamp(row, ts)
            return self._key_runs(op, out, current, batch, keys, rows, stamps, read_clock=True)
        for i, row in enumerate(rows):
            current = self._next_key(op, out, current, keys[i])
            self._element(op, keys[i], row, stamps[i], out)
        return current

    def _key_runs(
        self,
        op: OperatorHandle,
        out: _Output,
        current: Any,
        batch: Any,
        keys: list[Any],
        rows: list[Any],
        stamps: list[Any],
        read_clock: bool = False,
    ) -> Any:
        """Each run of one key's elements in one call, the same as :meth:`_element` per
        element but faster: event time with every timestamp present, or (``read_clock``)
        an operator that serves runs at one processing time, the wall clock read once
        per run.

        Reading the clock once per run is a possible execution of Flink's reading per
        element: processing time is whenever the operator processes an element, and an
        operator may process a run within one millisecond, the clock's resolution. Here
        every element of the run is processed at the instant the run starts, within the
        time the run really takes (a run of a few thousand elements can span several
        milliseconds: its elements then all land in the windows of its first one, where
        Flink's reading could split them at a window boundary inside the run). Which
        windows exist stays a matter of the wall clock, as it is per element; they still
        fire at the key's end, after its last element, and carry what they did."""
        bounds = self._key_bounds(batch, keys)
        for start, end in zip(bounds, bounds[1:]):
            current = self._next_key(op, out, current, keys[start])
            if read_clock:
                op.current_processing_time = int(time.time() * 1000)
            op.process_elements(keys[start], rows[start:end], stamps[start:end])
            if op.output or op.side_outputs:
                self._drain(op, out, keys[start])
        return current

    def _element(
        self, op: OperatorHandle, key: Any, row: Any, ts: int | None, out: _Output
    ) -> None:
        self._check_timestamp(row, ts)
        if self.wall_clock:
            op.current_processing_time = int(time.time() * 1000)
        op.process_element(key, row, ts)
        if op.output or op.side_outputs:
            self._drain(op, out, key)

    def _finish_key(self, op: OperatorHandle, key: Any, out: _Output) -> None:
        op.process_watermark(LONG_MAX)
        op.advance_processing_time(LONG_MAX)
        self._drain(op, out, key)
        op.evict_key(key)
        op.reset_clocks()

    def _drain(self, op: OperatorHandle, out: _Output, key: Any) -> None:
        """Move what the operator emitted for ``key`` into ``out``."""
        if op.output:
            out.mark_key(key)
            out.results(op.output)
            op.output.clear()
        self._side_outputs(op, out, 0)


class ReplayDriver(PartitionDriver):
    """The replay of a recorded stream: before each element the watermark advances, step
    by step, to the watermark in force when it arrived, and processing time to its
    arrival time; each output is placed where the stream emitted it."""

    def _feed(
        self,
        op: OperatorHandle,
        out: _Output,
        current: Any,
        batch: Any,
        keys: list[Any],
        rows: list[Any],
        stamps: list[Any],
    ) -> Any:
        orders = arrow_column(batch, ORDER)
        wms = arrow_column(batch, WM)
        pts = arrow_column(batch, PT) if self.config.has_processing_time else None
        sequence = self.config.watermarks.value
        for i, row in enumerate(rows):
            current = self._next_key(op, out, current, keys[i])
            self._check_timestamp(row, stamps[i])
            pt = None if pts is None or pts[i] is None else int(pts[i])
            order = int(orders[i])
            advance_clocks(op, pt, int(wms[i]), sequence, self._arrivals())
            self._drain(op, out, keys[i], 2 * order - 1, False, sequence)
            op.process_element(keys[i], row, stamps[i])
            self._drain(op, out, keys[i], 2 * order, True, sequence)
        return current

    def _finish_key(self, op: OperatorHandle, key: Any, out: _Output) -> None:
        sequence = self.config.watermarks.value
        last = int(sequence.values[-1]) if len(sequence.values) else LONG_MIN
        # the stream's clocks went on to its last arrival and watermark, for this key too
        final = self.config.final_processing_time
        advance_clocks(op, final, last, sequence, self._arrivals())
        op.process_watermark(LONG_MAX)
        self._drain(op, out, key, LONG_MAX, False, sequence)
        op.evict_key(key)
        op.reset_clocks()

    def _arrivals(self) -> Any:
        """The stream's ArrivalTimes (None without processing time)."""
        shared = self.config.arrival_times
        return None if shared is None else shared.value

    def _drain(
        self,
        op: OperatorHandle,
        out: _Output,
        key: Any,
        order: int,
        element_fired: bool,
        sequence: Any,
    ) -> None:
        """Move what the operator emitted for ``key`` into ``out``, each result where it
        belongs."""
        if op.output:
            out.mark_key(key)
            watermarks = op.output_watermarks or [op.current_watermark] * len(op.output)
            for (value, ts), wm in zip(op.output, watermarks):
                position, before = _placement(wm, order, element_fired, sequence)
                out.result(value, ts, position, before)
            op.output.clear()
            if op.output_watermarks is not None:
                op.output_watermarks.clear()
        self._side_outputs(op, out, order)


def _placement(wm: int, order: int, element_fired: bool, sequence: Any) -> tuple[int, int]:
    """``(position, watermark before)`` of a replay result fired at watermark ``wm``."""
    if element_fired:
        return order, wm
    if wm == LONG_MAX:
        last = int(sequence.values[-1]) if len(sequence.values) else LONG_MIN
        return LONG_MAX, last
    return sequence.place(wm)
