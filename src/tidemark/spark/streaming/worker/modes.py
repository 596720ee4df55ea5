"""Spark time modes: which engine clocks a streaming query moves, and the check that
the stream can serve what a pipeline needs.

A pipeline needs the time domains its assigner and trigger declare (``timer_domains()``);
a ``time_mode`` names that set. Spark runs the query in :data:`PROCESSING_TIME` whenever
a micro-batch must run without data (processing-time timers, or idleness), else in the
``time_mode`` itself (:meth:`~.config.ProcessorConfig.spark_time_mode`).
"""

from __future__ import annotations

from tidemark.assigners import WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.time import TimeDomain

__all__ = [
    "EVENT_TIME",
    "PROCESSING_TIME",
    "NONE",
    "EVENT_AND_PROCESSING_TIME",
    "TIME_MODES",
    "time_mode_for",
    "check_time_mode",
]

EVENT_TIME, PROCESSING_TIME, NONE = "EventTime", "ProcessingTime", "None"
EVENT_AND_PROCESSING_TIME = "EventTimeAndProcessingTime"

TIME_MODES: dict[str, frozenset[TimeDomain]] = {
    EVENT_TIME: frozenset((TimeDomain.EVENT_TIME,)),
    PROCESSING_TIME: frozenset((TimeDomain.PROCESSING_TIME,)),
    EVENT_AND_PROCESSING_TIME: frozenset((TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME)),
    NONE: frozenset(),
}
"""Each ``time_mode`` and the engine clocks it moves: the time domains of the timers it serves."""


def time_mode_for(domains: frozenset[TimeDomain]) -> str:
    """The ``time_mode`` that serves timers in ``domains``.

    >>> time_mode_for(frozenset((TimeDomain.PROCESSING_TIME, TimeDomain.EVENT_TIME)))
    'EventTimeAndProcessingTime'
    """
    return next(mode for mode, served in TIME_MODES.items() if served == domains)


def check_time_mode(
    assigner: WindowAssigner,
    time_mode: str,
    out_of_orderness_ms: int | None,
    idleness_ms: int | None,
) -> None:
    """Refuse a time mode the stream or the assigner cannot serve, naming the fix."""
    event_time = TimeDomain.EVENT_TIME in TIME_MODES[time_mode]
    if event_time and out_of_orderness_ms is None:
        raise WindowSpecError(
            f"time_mode={time_mode!r} needs a watermark: give a WatermarkStrategy with "
            "bounded out-of-orderness (out_of_orderness_ms); got none. Without a watermark "
            "Spark never fires event-time timers, so no event-time window would ever close"
        )
    if out_of_orderness_ms is not None and out_of_orderness_ms < 0:
        raise WindowSpecError(
            f"`out_of_orderness_ms` must be >= 0; got out_of_orderness={out_of_orderness_ms}ms"
        )
    if idleness_ms is not None and idleness_ms <= 0:
        raise WindowSpecError(f"`idleness` must be > 0; got idleness={idleness_ms}ms")
    if idleness_ms is not None and not event_time:
        raise WindowSpecError(
            f"`idleness` advances the event-time watermark and needs time_mode='EventTime' "
            f"or 'EventTimeAndProcessingTime' (event-time windows or triggers); got "
            f"idleness={idleness_ms}ms, "
            f"time_mode={time_mode!r}: remove with_idleness from the WatermarkStrategy"
        )
    if not assigner.timer_domains() <= TIME_MODES[time_mode]:
        wanted = EVENT_TIME if assigner.is_event_time() else "ProcessingTime"
        raise WindowSpecError(
            f"the assigner {assigner!r} needs time_mode={wanted!r} (or "
            f"'EventTimeAndProcessingTime'); got time_mode={time_mode!r}"
        )
