"""What runs in a Spark task: one engine operator over a partition sorted by key.

The partition arrives as Arrow batches sorted by key, then by time (BATCH) or arrival
(replay), or unsorted for a BATCH partition the worker sorts itself
(:mod:`tidemark.spark.batch.sorting`). Rows become ``pyspark.sql.Row`` elements; each key is
processed to its end and then flushed:

- BATCH (Flink's ``execution.runtime-mode=BATCH``): elements in timestamp order under
  no watermark, then the watermark jumps to +inf and all timers fire; processing time is
  the wall clock, and processing-time timers also fire at the end of the key.
- replay: before each element the watermark advances, step by step, to the watermark
  the stream had when the element arrived (so every timer fires at the watermark that
  first reached it), and processing time to its arrival time; after a key's last
  element, processing time goes on to the stream's last arrival (the stream's clock did,
  whichever key arrived), then the stream's final watermark, then +inf, as a bounded
  Flink source ends. Processing-time timers beyond the last arrival do not fire, as in
  Flink.
"""

from __future__ import annotations

import contextlib
import gc
import pickle
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark._engine.operator import WindowOperator
from tidemark.errors import InputDataError
from tidemark.spark.batch.replay import advance_to_recorded_watermark
from tidemark.spark.batch.sorting import sorted_batches
from tidemark.spark.codec import (
    arrow_batch,
    arrow_column,
    arrow_rows_and_columns,
    result_tuple,
)
from tidemark.time import LONG_MAX, LONG_MIN

__all__ = ["RunnerConfig", "PartitionRunner", "DROPPED_OUTPUT"]

_NO_KEY = object()
DROPPED_OUTPUT = "__late_records_dropped"  # one row per task: its dropped late records
_FLUSH_ROWS = 10_000


@dataclass
class RunnerConfig:
    """Everything a task needs, picklable (no DataFrames)."""

    operator: Any  # api.OperatorFactory: () -> WindowOperator
    value_names: list[str]
    value_types: list[str]
    key_columns: list[str]
    function_key: bool
    output_names: list[str]
    output_schema: Any
    replay: bool
    watermarks: Any
    timestamp_column: str | None
    has_processing_time: bool
    final_processing_time: int | None = None
    timestamps_in: str = "__tm_ts"  # the column with long-ms timestamps
    # BATCH: the columns the worker sorts its partition by, when Spark has not sorted it
    sort_columns: list[str] | None = None
    sort_budget: int = 0  # bytes of input a worker sorts in memory before spilling

    def make_operator(self) -> WindowOperator:
        op: WindowOperator = self.operator()
        if self.replay:
            op.output_watermarks = []
        else:  # each key's elements come sorted by time, then the watermark jumps to +inf
            op.batch_mode = True
        return op


class _Output:
    """Collects emitted rows of one partition in the combined output's column order.

    BATCH results, the bulk of the output, are kept apart as values and timestamps and
    become columns directly (no row tuple per result); everything else is kept as rows.
    """

    def __init__(self, config: RunnerConfig):
        self.config = config
        self.rows: list[tuple[Any, ...]] = []
        self.result_values: list[Any] = []  # BATCH results, each fitting output_names
        self.result_stamps: list[int] = []
        self.seq = 0
        width = len(config.output_names)
        self.empty_result = (None,) * width

    def __len__(self) -> int:
        return len(self.rows) + len(self.result_values)

    def result(self, value: Any, ts: int, order: int, wm_before: int) -> None:
        self.seq += 1
        values = result_tuple(value, self.config.output_names)
        meta = (order, self.seq, wm_before) if self.config.replay else ()
        self.rows.append(("main", ts, *meta, *values, None))

    def results(self, emitted: list[tuple[Any, int]]) -> None:
        """BATCH results, ``(value, timestamp)`` pairs (:meth:`result` without placement)."""
        names, values, stamps = self.config.output_names, self.result_values, self.result_stamps
        for value, ts in emitted:
            values.append(result_tuple(value, names))
            stamps.append(ts)

    def side(self, tag_id: str, value: Any, ts: int, order: int, wm_before: int) -> None:
        self.seq += 1
        meta = (order, self.seq, wm_before) if self.config.replay else ()
        blob = pickle.dumps(value, protocol=4)
        self.rows.append((tag_id, ts, *meta, *self.empty_result, blob))

    def batches(self, schema: Any) -> list[Any]:
        """What was collected so far as pyarrow RecordBatches of ``schema``."""
        names = schema.fieldNames()
        out = []
        if self.result_values:
            values, self.result_values = self.result_values, []
            stamps, self.result_stamps = self.result_stamps, []
            n = len(values)
            columns = dict(zip(self.config.output_names, zip(*values)))
            columns.update({names[0]: ["main"] * n, names[1]: stamps, names[-1]: [None] * n})
            out.append(arrow_batch(columns, schema))
        if self.rows:
            rows, self.rows = self.rows, []
            out.append(arrow_batch(dict(zip(names, zip(*rows))), schema))
        return out


def _uses_processing_time(trigger: Any) -> bool:
    from tidemark.triggers import (
        ContinuousProcessingTimeTrigger,
        CountTrigger,
        DeltaTrigger,
        EventTimeTrigger,
        PurgingTrigger,
    )

    while isinstance(trigger, PurgingTrigger):
        trigger = trigger.nested
    event_or_count = (EventTimeTrigger, CountTrigger, DeltaTrigger)
    return trigger is not None and (
        isinstance(trigger, ContinuousProcessingTimeTrigger) or not isinstance(trigger, event_or_count)
    )


@contextlib.contextmanager
def fewer_gc_passes(young: int = 50_000) -> Any:
    """Python's cyclic garbage collector, run less often while a task turns batches of
    rows into Python objects: by default it scans after every 700 net allocations, which
    costs a task a third of its time and frees nothing (Rows and accumulators form no
    cycles). Cycles are still collected, later; the worker's setting is restored after."""
    before = gc.get_threshold()
    gc.set_threshold(max(young, before[0]), *before[1:])
    gc.freeze()  # the worker's modules: full passes need not walk them
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def _changes(column: Any) -> Any:
    """A numpy bool array: does element ``i + 1`` of ``column`` differ from element ``i``
    (nulls never occur here: null keys are rejected before)."""
    changed = pc.not_equal(column.slice(1), column.slice(0, len(column) - 1))
    return changed.to_numpy(zero_copy_only=False)


class PartitionRunner:
    """``mapInArrow`` function: runs the operator over one key-sorted partition."""

    def __init__(self, config: RunnerConfig):
        self.config = config
        # BATCH reads the wall clock only for pipelines that use processing time.
        self.wall_clock = not config.operator.assigner.is_event_time() or _uses_processing_time(
            config.operator.trigger
        )

    def __call__(self, batches: Any) -> Any:
        columns = self.config.sort_columns
        if columns:
            batches = sorted_batches(batches, columns, self.config.sort_budget)
        with fewer_gc_passes():
            yield from self._run(batches)

    def _run(self, batches: Any) -> Any:
        config = self.config
        op = config.make_operator()
        out = _Output(config)
        sequence = config.watermarks.value if config.replay else None
        current: Any = _NO_KEY
        for batch in batches:
            rows, columns = arrow_rows_and_columns(batch, config.value_names)
            keys = self._keys(batch, rows, columns)
            stamps = columns.get(config.timestamps_in) or arrow_column(batch, config.timestamps_in)
            replay_cols = self._replay_columns(batch) if config.replay else None
            if replay_cols is None and not self.wall_clock and None not in stamps:
                current = self._batch_elements(op, out, current, batch, keys, rows, stamps)
                if len(out) >= _FLUSH_ROWS:
                    yield from out.batches(config.output_schema)
                continue
            for i, row in enumerate(rows):
                key = keys[i]
                if current is _NO_KEY or key != current:
                    if current is not _NO_KEY:
                        self._finish_key(op, current, out, sequence)
                    current = key
                self._element(op, key, row, stamps[i], i, replay_cols, out, sequence)
            if len(out) >= _FLUSH_ROWS:
                yield from out.batches(config.output_schema)
        if current is not _NO_KEY:
            self._finish_key(op, current, out, sequence)
        if op.num_late_records_dropped:
            out.side(DROPPED_OUTPUT, op.num_late_records_dropped, 0, LONG_MAX, LONG_MAX)
        yield from out.batches(config.output_schema)

    def _batch_elements(
        self,
        op: WindowOperator,
        out: _Output,
        current: Any,
        batch: Any,
        keys: list[Any],
        rows: list[Any],
        stamps: list[Any],
    ) -> Any:
        """BATCH, event time, every timestamp present: :meth:`_element` without the
        per-element branching; returns the key being processed at the end."""
        bounds = self._key_bounds(batch, keys)
        for start, end in zip(bounds, bounds[1:]):
            key = keys[start]
            if key != current or current is _NO_KEY:
                if current is not _NO_KEY:
                    self._finish_key(op, current, out, None)
                current = key
            op.process_elements(key, rows[start:end], stamps[start:end])
            if op.output or op.side_outputs:
                self._drain(op, out, order=0, element_fired=True, sequence=None)
        return current

    def _key_bounds(self, batch: Any, keys: list[Any]) -> list[int]:
        """Where the batch's runs of equal keys start, and its length: ``[0, ..., n]``.
        Found by Arrow where the key columns allow it, else by comparing Python keys."""
        n = len(keys)
        columns = ["__tm_key"] if self.config.function_key else self.config.key_columns
        if n > 1 and columns:
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
            return [pickle.loads(blob) for blob in arrow_column(batch, "__tm_key")]
        if not config.key_columns:
            return [None] * len(rows)
        columns = [by_name[c] for c in config.key_columns]
        for name, values in zip(config.key_columns, columns):
            if batch.column(batch.schema.get_field_index(name)).null_count:
                bad = rows[values.index(None)]
                raise InputDataError(
                    f"null key in column {name!r}: every element needs a key; example row: {bad}"
                )
        return columns[0] if len(columns) == 1 else list(zip(*columns))

    def _replay_columns(self, batch: Any) -> tuple[list[Any], ...]:
        orders = arrow_column(batch, "__tm_order")
        wms = arrow_column(batch, "__tm_wm")
        pts = arrow_column(batch, "__tm_pt") if self.config.has_processing_time else None
        return orders, wms, pts  # type: ignore[return-value]

    def _element(
        self,
        op: WindowOperator,
        key: Any,
        row: Any,
        ts: int | None,
        i: int,
        replay_cols: Any,
        out: _Output,
        sequence: Any,
    ) -> None:
        config = self.config
        if ts is None and config.timestamp_column is not None:
            raw = row[config.timestamp_column]
            problem = "null" if raw is None else f"unparseable ({raw!r})"
            raise InputDataError(
                f"{problem} timestamp in column {config.timestamp_column!r}; example row: {row}"
            )
        if replay_cols is None:
            if self.wall_clock:
                op.current_processing_time = int(time.time() * 1000)
            op.process_element(key, row, ts)
            if op.output or op.side_outputs:
                self._drain(op, out, order=0, element_fired=True, sequence=None)
            return
        orders, wms, pts = replay_cols
        if pts is not None and pts[i] is not None:
            op.advance_processing_time_stepwise(int(pts[i]))
        advance_to_recorded_watermark(op, int(wms[i]), sequence)
        self._drain(op, out, order=2 * int(orders[i]) - 1, element_fired=False, sequence=sequence)
        op.process_element(key, row, ts)
        self._drain(op, out, order=2 * int(orders[i]), element_fired=True, sequence=sequence)

    def _finish_key(self, op: WindowOperator, key: Any, out: _Output, sequence: Any) -> None:
        if sequence is None:
            op.process_watermark(LONG_MAX)
            op.advance_processing_time(LONG_MAX)
            self._drain(op, out, order=0, element_fired=False, sequence=None)
        else:
            if self.config.final_processing_time is not None:
                # the stream's clock went on to its last arrival, for this key's timers too
                op.advance_processing_time_stepwise(self.config.final_processing_time)
            last = int(sequence.values[-1]) if len(sequence.values) else LONG_MIN
            advance_to_recorded_watermark(op, last, sequence)
            op.process_watermark(LONG_MAX)
            self._drain(op, out, order=LONG_MAX, element_fired=False, sequence=sequence)
        op.evict_key(key)
        op.reset_clocks()

    def _drain(
        self, op: WindowOperator, out: _Output, *, order: int, element_fired: bool, sequence: Any
    ) -> None:
        """Move what the operator emitted into ``out``, with replay placement."""
        if op.output and sequence is None and not self.config.replay:
            out.results(op.output)
            op.output.clear()
        if op.output:
            watermarks = op.output_watermarks or [op.current_watermark] * len(op.output)
            for (value, ts), wm in zip(op.output, watermarks):
                position, before = self._placement(wm, order, element_fired, sequence)
                out.result(value, ts, position, before)
            op.output.clear()
            if op.output_watermarks is not None:
                op.output_watermarks.clear()
        for tag, emitted in op.side_outputs.items():
            for value, ts in emitted:
                out.side(tag.tag_id, value, ts, order, op.current_watermark)
        op.side_outputs.clear()

    @staticmethod
    def _placement(wm: int, order: int, element_fired: bool, sequence: Any) -> tuple[int, int]:
        if sequence is None or element_fired:
            return order, wm
        if wm == LONG_MAX:
            last = int(sequence.values[-1]) if len(sequence.values) else LONG_MIN
            return LONG_MAX, last
        return sequence.place(wm)
