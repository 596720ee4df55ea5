"""The Spark operators that call the key groups (:class:`.processor.WindowGroups`).

A window not in a chain runs in ``applyInPandasWithState`` (:class:`WindowGroupFunction`):
Spark hands each call its group's row with the rows and takes it back with the results,
and holds one timeout per group, set at every call to the group's earliest timer in the
domain Spark serves. A call makes no round trip to the JVM, Spark turns each Arrow batch
into pandas frames per group without visiting rows one by one, and the query is planned
without a Python process on the driver. Spark allows one ``applyInPandasWithState`` per
query, and its output carries no event-time column a later stateful operator could
follow, so the windows of a chain (:mod:`.chain`) run in ``transformWithStateInPandas``
(:class:`WindowStatefulProcessor`): the group's row is a ValueState, its timers Spark
timers (one per time domain). Both run the same key groups, so the equivalence of
:mod:`.query` holds in either.

A timeout is due once Spark's clock passes it (``timeout < watermark``, or ``< batch
time``); a Spark timer once the clock reaches it (``timer <= watermark``), so a group's
timeout is its timer less 1 ms.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import StructType

from tidemark.spark.columns import KEY_GROUP, WATERMARK_MARK
from tidemark.spark.streaming.config import ProcessorConfig
from tidemark.spark.streaming.modes import EVENT_TIME, PROCESSING_TIME
from tidemark.spark.streaming.processor import BatchClock, KeyRun, WindowGroups
from tidemark.spark.streaming.state import STATE_NAME, STATE_SCHEMA, StoredGroup

__all__ = ["WindowStatefulProcessor", "WindowGroupFunction", "key_group_operator"]

WATERMARK_DELAY = "spark.watermarkDelayMs"  # Spark's metadata key on a watermark column


def key_group_operator(
    prepared: DataFrame,
    config: ProcessorConfig,
    output_schema: StructType,
    watermark_delay: int | None,
) -> DataFrame:
    """``prepared`` (rows with their key group) through the window's key groups: in
    ``applyInPandasWithState``, or in ``transformWithStateInPandas`` for a window of a
    chain.

    Spark only accepts an event-time timeout, and only shows the function its watermark,
    when a column of the operator's input carries the watermark's metadata; and it drops
    input rows behind the watermark on that column. The watermark's own column is
    projected away before (:func:`.query._prepare_input`), so a null column carries the
    metadata (``watermark_delay``, ms) instead: Spark's watermark is unchanged, and no
    row is behind a null, so Spark drops none."""
    grouped = prepared.groupBy(F.col(KEY_GROUP))
    if config.upstream is not None or config.feeds_downstream:
        return grouped.transformWithStateInPandas(
            WindowStatefulProcessor(config), output_schema, "Append", config.spark_time_mode()
        )
    function = WindowGroupFunction(config)
    if watermark_delay is not None:
        metadata = {WATERMARK_DELAY: watermark_delay}
        marker = F.lit(None).cast("timestamp").alias(WATERMARK_MARK, metadata=metadata)
        columns = [F.col(f"`{c}`") for c in prepared.columns]
        grouped = prepared.select(*columns, marker).groupBy(F.col(KEY_GROUP))
    return grouped.applyInPandasWithState(
        function, output_schema, STATE_SCHEMA, "append", function.timeout()
    )


class WindowStatefulProcessor(WindowGroups, StatefulProcessor):
    """The key groups in ``transformWithStateInPandas`` (a window of a chain): the
    group's row is a ValueState, its timers Spark timers (one per time domain)."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._prepare()
        self._handle = handle
        self._state = handle.getValueState(STATE_NAME, STATE_SCHEMA)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        return self._call(*self._split_frames(rows), timerValues, None)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        expired = expiredTimerInfo.getExpiryTimeInMs() if expiredTimerInfo else None
        return self._call({}, [], {}, timerValues, expired)

    def close(self) -> None:
        pass

    def _call(
        self,
        runs: dict[Any, KeyRun],
        passed: list[tuple[Any, ...]],
        forwarded: dict[Any, int],
        timer_values: TimerValues,
        expired: int | None,
    ) -> Iterator[pd.DataFrame]:
        group = StoredGroup.decode(self._state.get(), self._config.max_parallelism)
        clock = self._clock(
            timer_values.getCurrentProcessingTimeInMs(), timer_values.getCurrentWatermarkInMs
        )
        records = self._run(group, runs, clock, passed, forwarded)
        self._save(group, expired, clock)
        return self._frames(records)

    def _save(self, group: StoredGroup, expired: int | None, clock: BatchClock) -> None:
        """Write the group's row once and move its Spark timers to its keys' earliest."""
        event_timer, processing_timer = self._wanted_timers(group, clock)
        registered_event, registered_processing = group.event_timer, group.processing_timer
        if self._polls_watermark:
            registered_event = None  # the row's note of the earliest, not a Spark timer
        if expired is not None:
            # Spark deletes the expired timer after this call: re-registering the same
            # time would be lost, so a timer still due waits for the next batch (+1 ms).
            if registered_event == expired:
                registered_event = None
                event_timer = expired + 1 if event_timer == expired else event_timer
            if registered_processing == expired:
                registered_processing = None
                processing_timer = expired + 1 if processing_timer == expired else processing_timer
        if not self._polls_watermark:
            self._move_timer(registered_event, event_timer)
        self._move_timer(registered_processing, processing_timer)
        if not group.keys:
            if group.exists:
                self._state.clear()
            return
        group.event_timer, group.processing_timer = event_timer, processing_timer
        self._state.update(group.encode(self._config.max_parallelism))

    def _move_timer(self, registered: int | None, wanted: int | None) -> None:
        if registered == wanted:
            return
        if registered is not None:
            self._handle.deleteTimer(registered)  # harmless when it already fired
        if wanted is not None:
            self._handle.registerTimer(wanted)


class WindowGroupFunction(WindowGroups):
    """The key groups in ``applyInPandasWithState``: the function Spark calls with a
    group's rows and its ``GroupState`` (the group's row and its one timeout)."""

    def timeout(self) -> str:
        """The ``GroupStateTimeout`` of the query."""
        mode = self._config.spark_time_mode()
        if mode == EVENT_TIME:
            return "EventTimeTimeout"
        return "ProcessingTimeTimeout" if mode == PROCESSING_TIME else "NoTimeout"

    def __call__(
        self, key: Any, rows: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        if self._row_type is None:
            self._prepare()
        # a timed-out group comes with an empty frame
        runs, passed, forwarded = self._split_frames([] if state.hasTimedOut else rows)
        stored = state.get if state.exists else None
        group = StoredGroup.decode(stored, self._config.max_parallelism)
        clock = self._clock(state.getCurrentProcessingTimeMs(), state.getCurrentWatermarkMs)
        records = self._run(group, runs, clock, passed, forwarded)
        self._save(state, group, clock)
        return self._frames(records)

    def _save(self, state: Any, group: StoredGroup, clock: BatchClock) -> None:
        """Write the group's row and set its timeout (Spark unsets it at every call): the
        timer less 1 ms, at least the current watermark, at least 1 ms ahead in
        processing time."""
        event_timer, processing_timer = self._wanted_timers(group, clock)
        if not group.keys:
            if state.exists:
                state.remove()
            return
        group.event_timer, group.processing_timer = event_timer, processing_timer
        state.update(group.encode(self._config.max_parallelism))
        timeout = self.timeout()
        if timeout == "EventTimeTimeout" and event_timer is not None:
            state.setTimeoutTimestamp(max(event_timer - 1, clock.spark_watermark_ms))
        elif timeout == "ProcessingTimeTimeout" and processing_timer is not None:
            state.setTimeoutDuration(max(processing_timer - 1 - clock.now, 1))
