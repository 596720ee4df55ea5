"""How time advances for a key group's keys, chosen once per query: which clocks a call
moves each key to, and which Spark timers bring the group back.

======================= ===================================================================
:class:`TimeAdvance`    no event time (processing-time windows, count windows): keys move
                        with the batch's processing time only
:class:`SparkTimers`    event time in an EventTime query: keys move to the engine watermark
                        of Spark's, Spark holds the group's event-time timer
:class:`PolledWatermark` event time in a ProcessingTime query (timers in both domains):
                        Spark holds no event-time timer, so a group whose keys wait for the
                        watermark is called in every micro-batch to compare
:class:`IdleClock`      event time with idleness: the watermark also advances with
                        processing time once it stood still (the idle watermark)
======================= ===================================================================

:func:`time_advance_for` picks one from the
:class:`~.config.ProcessorConfig`; the per-call path asks it and
never branches on which it is. The rules are those of the streaming guide
(``docs/streaming.md``: the watermark equivalence, mixed time domains, idleness).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidemark.spark.streaming.worker.clock import (
    engine_watermark,
    idle_watermark,
    spark_event_timer,
)
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.spark.streaming.worker.state import StoredGroup, StoredKey

__all__ = [
    "BatchClock",
    "Visit",
    "TimeAdvance",
    "SparkTimers",
    "PolledWatermark",
    "IdleClock",
    "time_advance_for",
]

Timers = tuple[int | None, int | None]
"""(event-time, processing-time) Spark timers; None where there is none."""


@dataclass(frozen=True)
class BatchClock:
    """What Spark presents to every call of one micro-batch."""

    now: int  # the batch's processing time (ms)
    spark_watermark_ms: int  # Spark's watermark, on Spark's clock
    watermark: int  # its engine watermark, before idleness


@dataclass
class Visit:
    """One key in one call: its stored entry and the clocks it moves to."""

    key: Any
    stored: StoredKey
    watermark: int  # the key's engine watermark once advanced
    processing_time: int
    advances_watermark: bool  # whether the operator advances to ``watermark`` with it
    advances_processing_time: bool  # and to ``processing_time``
    seen_watermark: int | None = None
    seen_at: int | None = None


class TimeAdvance:
    """Keys move with the batch's processing time (when the query serves it) only."""

    holds_event_timers = True
    """Whether Spark holds the group's event-time timer (else the row only notes it)."""

    def __init__(self, config: ProcessorConfig):
        self._moves_processing_time = config.time_mode.processing_time
        self._idleness_ms = config.idleness_ms
        self._offset_ms = config.spark_offset_ms  # Spark's clock ahead of the engine's

    def clock(self, now: int, spark_watermark_ms: Callable[[], int]) -> BatchClock:
        """The batch's clocks; Spark's watermark is read only where the query has one."""
        return BatchClock(now, 0, engine_watermark(0))

    def visit(self, key: Any, stored: StoredKey, clock: BatchClock) -> Visit:
        """The clocks ``key`` moves to, as a processor called for it alone moves them.
        Past processing-time timers fire as soon as possible, as in Flink."""
        processing_time = max(clock.now, stored.processing_time)
        return Visit(
            key, stored, stored.watermark, processing_time, False, self._moves_processing_time
        )

    def keeps_clock(self, visit: Visit, clock: BatchClock) -> bool:
        """Whether a key without state keeps its clocks in the group's row."""
        return False

    def key_timers(
        self, visit: Visit, event_times: list[int], processing_times: list[int], keep_clock: bool
    ) -> Timers:
        """The Spark timers the key would need on its own, for its engine timers."""
        return None, min(processing_times) if processing_times else None

    def group_timers(self, group: StoredGroup, clock: BatchClock) -> Timers:
        """The group's Spark timers after a call: its keys' earliest."""
        return group.earliest_timers()


class SparkTimers(TimeAdvance):
    """Keys move to the engine watermark of Spark's; an engine event-time timer is a
    Spark timer on Spark's clock (:func:`~.clock.spark_event_timer`)."""

    def clock(self, now: int, spark_watermark_ms: Callable[[], int]) -> BatchClock:
        watermark_ms = spark_watermark_ms()
        return BatchClock(now, watermark_ms, engine_watermark(watermark_ms, self._offset_ms))

    def visit(self, key: Any, stored: StoredKey, clock: BatchClock) -> Visit:
        visit = super().visit(key, stored, clock)
        return self._advanced(visit, self._target(visit, clock))

    def _target(self, visit: Visit, clock: BatchClock) -> int:
        return clock.watermark

    @staticmethod
    def _advanced(visit: Visit, target: int) -> Visit:
        if target > visit.stored.watermark:
            visit.watermark, visit.advances_watermark = target, True
        return visit

    def key_timers(
        self, visit: Visit, event_times: list[int], processing_times: list[int], keep_clock: bool
    ) -> Timers:
        _, processing_timer = super().key_timers(visit, event_times, processing_times, keep_clock)
        if not event_times:
            return None, processing_timer
        event_timer = spark_event_timer(min(event_times), visit.watermark, self._offset_ms)
        return event_timer, processing_timer


class PolledWatermark(SparkTimers):
    """As :class:`SparkTimers`, but Spark holds no event-time timer (a ProcessingTime
    query): the group's earliest event-time timer is only noted in its row, and a
    processing-time timer brings the group back in the next micro-batch to compare it
    with the watermark."""

    holds_event_timers = False

    def group_timers(self, group: StoredGroup, clock: BatchClock) -> Timers:
        event_timer, processing_timer = group.earliest_timers()
        if event_timer is not None:
            processing_timer = _earliest(processing_timer, clock.now + 1)
        return event_timer, processing_timer


class IdleClock(PolledWatermark):
    """Event time with idleness: a key moves to the idle watermark of its idle clock
    (:func:`~.clock.idle_watermark`), which moves with
    processing time, so a key with pending event-time timers is visited in every
    micro-batch; a key without state keeps its clock while its watermark is ahead of
    Spark's, checked once per idleness."""

    def _target(self, visit: Visit, clock: BatchClock) -> int:
        assert self._idleness_ms is not None
        stored = visit.stored
        seen_watermark, seen_at = stored.seen_watermark, stored.seen_at
        if seen_watermark != clock.spark_watermark_ms or seen_at is None:
            seen_watermark, seen_at = clock.spark_watermark_ms, clock.now
        visit.seen_watermark, visit.seen_at = seen_watermark, seen_at
        return idle_watermark(clock.watermark, seen_at, clock.now, self._idleness_ms)

    def keeps_clock(self, visit: Visit, clock: BatchClock) -> bool:
        # a new element of the key is judged by the idle-advanced watermark
        return visit.watermark > clock.watermark

    def key_timers(
        self, visit: Visit, event_times: list[int], processing_times: list[int], keep_clock: bool
    ) -> Timers:
        assert self._idleness_ms is not None
        processing_timer = min(processing_times) if processing_times else None
        now = visit.processing_time
        # A pending event-time timer may fire in any later micro-batch (the watermark
        # moved or the idle advance reached it): visit the key in the next one. A kept
        # clock is checked once per idleness, to be cleared when Spark catches up.
        if event_times:
            return None, _earliest(processing_timer, now + 1)
        visit_again = now + self._idleness_ms if keep_clock else None
        return None, _earliest(processing_timer, visit_again)


def time_advance_for(config: ProcessorConfig) -> TimeAdvance:
    """The time advance of ``config``'s query, chosen once."""
    if not config.time_mode.event_time:
        return TimeAdvance(config)
    if config.idleness_ms is not None:
        return IdleClock(config)
    if config.spark_time_mode() is TimeMode.PROCESSING_TIME:
        return PolledWatermark(config)
    return SparkTimers(config)


def _earliest(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
