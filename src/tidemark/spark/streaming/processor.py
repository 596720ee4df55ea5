"""The StatefulProcessor that runs the window operator inside ``transformWithStateInPandas``.

Spark calls the processor once per key and micro-batch: ``handleInputRows`` for a key
with input rows, ``handleExpiredTimer`` for a key whose Spark timer expired. Each call

1. reads the key's :class:`StoredKey` (one state-store get) and restores the engine state
   into a fresh operator with the key's last clocks;
2. advances the clocks to the micro-batch's: ``process_watermark(W)`` when Spark's
   watermark maps to a later engine watermark ``W`` (event time), or
   ``advance_processing_time(T)`` with the batch's processing time ``T``; due timers fire;
3. feeds the key's rows of the batch, in Spark's order (``handleInputRows`` only);
4. emits results, side outputs and the late-record count as rows of the combined schema;
5. writes the key's state back (one update, or a clear when nothing is left) and moves
   the key's one Spark timer per time domain to its earliest engine timer.

With idleness (``ProcessorConfig.idleness_ms``) the engine's timers are event-time but
Spark runs the query in ProcessingTime mode, so that a micro-batch runs at every trigger
interval without data. Step 2 then advances the operator to the idle watermark
(:func:`~tidemark.spark.streaming.clock.idle_watermark`) of the key's idle clock, and step 5
registers, for a key with pending event-time timers, a processing-time timer that expires
in the next micro-batch, so that such a key is visited in every micro-batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from tidemark._engine.operator import WindowOperator
from tidemark.errors import WindowSpecError
from tidemark.spark.codec import column_values
from tidemark.spark.columns import (
    DROPPED,
    DROPPED_OUTPUT,
    MAIN,
    OUTPUT,
    SIDE,
    TS,
    encode_side,
)
from tidemark.spark.streaming.clock import (
    END_OF_INPUT_MS,
    check_timestamp,
    engine_watermark,
    idle_watermark,
    spark_event_timer,
)
from tidemark.spark.streaming.state import IDLE_STATE_SCHEMA, STATE_NAME, STATE_SCHEMA, StoredKey
from tidemark.time import LONG_MIN

__all__ = [
    "ProcessorConfig",
    "WindowStatefulProcessor",
    "object_frame",
    "EVENT_TIME",
    "PROCESSING_TIME",
    "NONE",
]

EVENT_TIME, PROCESSING_TIME, NONE = "EventTime", "ProcessingTime", "None"


@dataclass(frozen=True)
class ProcessorConfig:
    """Everything a worker needs to run the window operator for one query.

    Attributes
    ----------
    make_operator : callable
        ``() -> WindowOperator``; called once per key and micro-batch.
    time_mode : {"EventTime", "ProcessingTime", "None"}
        The ``timeMode`` of ``transformWithStateInPandas``: which engine timers Spark serves.
    value_names, value_types : tuple of str
        The columns of the Rows handed to the user's functions, and their Spark type names.
    value_positions : tuple of int
        Where those columns are in the processor's input; the timestamp (long ms) follows
        the last input column. Positions, because PySpark rebuilds the pandas frames from
        ``itertuples`` (4.3), which renames columns that are not identifiers.
    result_names : tuple of str
        The result columns, in the order ``result_to_row`` returns them.
    result_to_row : callable
        ``(result, timestamp_ms) -> tuple`` for one main result.
    engine_key : callable, optional
        Spark's grouping-key tuple to the engine's key; default: the value of a single key
        column, else the tuple.
    idleness_ms : int, optional
        Event time only: after this much processing time without a watermark advance,
        the watermark advances with the processing-time clock (Spark runs the query in
        ProcessingTime mode, see :meth:`spark_time_mode`).
    """

    make_operator: Callable[[], WindowOperator]
    time_mode: str
    value_names: tuple[str, ...]
    value_types: tuple[str, ...]
    value_positions: tuple[int, ...]
    result_names: tuple[str, ...]
    result_to_row: Callable[[Any, int], tuple]
    engine_key: Callable[[tuple], Any] | None = None
    idleness_ms: int | None = None

    def output_columns(self) -> list[str]:
        return [OUTPUT, TS, *self.result_names, SIDE, DROPPED]

    def spark_time_mode(self) -> str:
        """The ``timeMode`` Spark runs: ProcessingTime with idleness, else ``time_mode``."""
        return PROCESSING_TIME if self.idleness_ms is not None else self.time_mode


@dataclass
class _KeyCall:
    """One call of the processor for one key: the operator holding that key's state."""

    key: Any
    operator: WindowOperator
    stored: StoredKey
    spark_watermark: int = LONG_MIN  # the engine watermark of Spark's, before idleness


class WindowStatefulProcessor(StatefulProcessor):
    """Runs a tidemark window operator per key in ``transformWithStateInPandas``.

    Supported: every assigner, trigger, evictor and window function of the engine;
    event-time timers (``timeMode="EventTime"``) or processing-time timers
    (``timeMode="ProcessingTime"``); late data to the side output or the dropped count.

    Not supported: processing-time timers in an event-time query and event-time timers
    in a processing-time query (Spark serves one time domain per query); registering
    either fails the query with :class:`~tidemark.errors.WindowSpecError`.
    """

    def __init__(self, config: ProcessorConfig):
        self._config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._idle = self._config.idleness_ms is not None
        schema = IDLE_STATE_SCHEMA if self._idle else STATE_SCHEMA
        self._state = handle.getValueState(STATE_NAME, schema)
        self._row_class = Row(*self._config.value_names)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        call = self._open(key, timerValues)
        for pdf in rows:
            self._feed(call, pdf)
        return self._close(call)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        return self._close(self._open(key, timerValues))

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ per key

    def _open(self, key: tuple, timer_values: TimerValues) -> _KeyCall:
        config = self._config
        stored = StoredKey.decode(self._state.get())
        engine_key = config.engine_key(key) if config.engine_key else _default_key(key)
        operator = config.make_operator()
        if stored.key_state is not None:
            operator.restore_key(engine_key, stored.key_state)
        operator.current_watermark = stored.watermark
        operator.current_processing_time = stored.processing_time
        watermark = self._advance_clocks(operator, timer_values, stored)
        return _KeyCall(engine_key, operator, stored, watermark)

    def _advance_clocks(
        self, operator: WindowOperator, timer_values: TimerValues, stored: StoredKey
    ) -> int:
        """Move the operator's clocks to the batch's; the engine watermark of Spark's."""
        processing_time = max(
            timer_values.getCurrentProcessingTimeInMs(), operator.current_processing_time
        )
        if self._config.time_mode == PROCESSING_TIME:
            # Past processing-time timers fire as soon as possible, as in Flink.
            operator.advance_processing_time(processing_time)
            return LONG_MIN
        operator.current_processing_time = processing_time
        if self._config.time_mode != EVENT_TIME:
            return LONG_MIN
        spark_watermark = timer_values.getCurrentWatermarkInMs()
        watermark = engine_watermark(spark_watermark)
        effective = watermark
        if self._idle:
            effective = self._idle_watermark(stored, spark_watermark, watermark, timer_values)
        if effective > operator.current_watermark:
            operator.process_watermark(effective)
        return watermark

    def _idle_watermark(
        self, stored: StoredKey, spark_watermark: int, watermark: int, timer_values: TimerValues
    ) -> int:
        """Update the key's idle clock; the watermark advanced by the idle time, if any."""
        assert self._config.idleness_ms is not None
        now = timer_values.getCurrentProcessingTimeInMs()
        if stored.seen_watermark != spark_watermark or stored.seen_at is None:
            stored.seen_watermark, stored.seen_at = spark_watermark, now
        return idle_watermark(watermark, stored.seen_at, now, self._config.idleness_ms)

    def _feed(self, call: _KeyCall, pdf: pd.DataFrame) -> None:
        config = self._config
        event_time = config.time_mode == EVENT_TIME
        series = [column for _, column in pdf.items()]  # cheaper than iloc per column
        timestamps = column_values(series[-1], "LongType")
        columns = [
            column_values(series[i], t)
            for i, t in zip(config.value_positions, config.value_types, strict=True)
        ]
        values = zip(*columns, strict=True) if columns else [()] * len(timestamps)
        make_row, operator, key = self._row_class, call.operator, call.key
        for timestamp, row_values in zip(timestamps, values, strict=True):
            if timestamp is not None and timestamp >= END_OF_INPUT_MS:
                continue  # an end-of-input marker: it only moves the watermark
            check_timestamp(timestamp, key, event_time)
            operator.process_element(key, make_row(*row_values), timestamp)

    def _close(self, call: _KeyCall) -> Iterator[pd.DataFrame]:
        frame = self._output_frame(call.operator)
        self._save(call)
        return iter([frame]) if frame is not None else iter([])

    # ------------------------------------------------------------------ output

    def _output_frame(self, operator: WindowOperator) -> pd.DataFrame | None:
        config = self._config
        blanks = (None,) * len(config.result_names)
        records: list[tuple[Any, ...]] = []
        for value, timestamp in operator.output:
            result = tuple(config.result_to_row(value, timestamp))
            if len(result) != len(blanks):
                raise WindowSpecError(
                    f"`result_to_row` must return {len(blanks)} values {list(config.result_names)};"
                    f" got {result!r}"
                )
            records.append((MAIN, timestamp, *result, None, None))
        for tag, items in operator.side_outputs.items():
            for value, timestamp in items:
                records.append((tag.tag_id, timestamp, *blanks, encode_side(value), None))
        if operator.num_late_records_dropped:
            records.append((DROPPED_OUTPUT, None, *blanks, None, operator.num_late_records_dropped))
        return object_frame(config.output_columns(), records) if records else None

    # ------------------------------------------------------------------ state and timers

    def _save(self, call: _KeyCall) -> None:
        operator, stored = call.operator, call.stored
        key_state = operator.snapshot_key(call.key)
        if key_state is not None and key_state.is_empty():
            key_state = None
        event_times = [t for t, _ in key_state.event_timers] if key_state else []
        processing_times = [t for t, _ in key_state.processing_timers] if key_state else []
        self._check_timer_domains(call.key, event_times, processing_times)
        # A key without state keeps its idle clock while its watermark is ahead of Spark's:
        # a new element of the key is judged by the idle-advanced watermark.
        keep_clock = self._idle and operator.current_watermark > call.spark_watermark
        timers = self._spark_timers(operator, event_times, processing_times, keep_clock)
        event_timer, processing_timer = timers
        self._move_timer(stored.event_timer, event_timer)
        self._move_timer(stored.processing_timer, processing_timer)
        if key_state is None and not keep_clock:
            if stored.exists:
                self._state.clear()
            return
        updated = StoredKey(
            key_state,
            operator.current_watermark,
            operator.current_processing_time,
            event_timer,
            processing_timer,
            seen_watermark=stored.seen_watermark,
            seen_at=stored.seen_at,
        )
        self._state.update(updated.encode(self._idle))

    def _spark_timers(
        self,
        operator: WindowOperator,
        event_times: list[int],
        processing_times: list[int],
        keep_clock: bool,
    ) -> tuple[int | None, int | None]:
        """The Spark (event-time, processing-time) timers the key needs, if any."""
        if self._idle:
            assert self._config.idleness_ms is not None
            now = operator.current_processing_time
            # A pending event-time timer may fire in any later micro-batch (the watermark
            # moved or the idle advance reached it): visit the key in the next one. A
            # kept clock is checked once per idleness, to be cleared when Spark catches up.
            if event_times:
                return None, now + 1
            return None, (now + self._config.idleness_ms if keep_clock else None)
        event_timer = None
        if event_times:
            event_timer = spark_event_timer(min(event_times), operator.current_watermark)
        return event_timer, min(processing_times) if processing_times else None

    def _move_timer(self, registered: int | None, wanted: int | None) -> None:
        if registered == wanted:
            return
        if registered is not None:
            self._handle.deleteTimer(registered)  # harmless when it already fired
        if wanted is not None:
            self._handle.registerTimer(wanted)

    def _check_timer_domains(
        self, key: Any, event_times: list[int], processing_times: list[int]
    ) -> None:
        mode = self._config.time_mode
        if processing_times and mode != PROCESSING_TIME:
            raise WindowSpecError(
                f"a processing-time timer was registered (key={key!r}, times="
                f"{sorted(processing_times)[:3]}) in a query with time_mode={mode!r}: Spark "
                "serves one time domain per query; use time_mode='ProcessingTime' with "
                "processing-time windows and triggers only"
            )
        if event_times and mode != EVENT_TIME:
            raise WindowSpecError(
                f"an event-time timer was registered (key={key!r}, times="
                f"{sorted(event_times)[:3]}) in a query with time_mode={mode!r}: event-time "
                "windows and triggers need time_mode='EventTime' and a watermark"
            )


def object_frame(names: list[str], records: list[tuple[Any, ...]]) -> pd.DataFrame:
    """A pandas frame of Python values; object columns keep ints exact and None as null."""
    return pd.DataFrame(records, columns=names, dtype=object)


def _default_key(key: tuple) -> Any:
    return key[0] if len(key) == 1 else tuple(key)
