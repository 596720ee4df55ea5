"""Spark time modes: which engine clocks a streaming query moves, as one typed value.

A pipeline needs the time domains its assigner and trigger declare (``timer_domains()``);
a :class:`TimeMode` names that set with Spark's own ``timeMode`` name. Spark runs the
query in :attr:`TimeMode.PROCESSING_TIME` whenever a micro-batch must run without data
(processing-time timers, or idleness), else in the time mode itself
(:meth:`TimeMode.spark_time_mode`). Which mode the stream can serve is checked on the
driver, when the window is defined
(:func:`~tidemark.spark.streaming.driver.query.window_stream`).
"""

from __future__ import annotations

import enum

from tidemark.errors import WindowSpecError
from tidemark.time import TimeDomain

__all__ = ["TimeMode"]


class TimeMode(str, enum.Enum):
    """The engine clocks a streaming query moves: the time domains of the timers it
    serves. The value is Spark's ``timeMode`` name, and a mode is equal to it.

    >>> TimeMode.serving(frozenset((TimeDomain.PROCESSING_TIME, TimeDomain.EVENT_TIME)))
    <TimeMode.EVENT_AND_PROCESSING_TIME: 'EventTimeAndProcessingTime'>
    >>> TimeMode.of("EventTime").event_time, TimeMode.EVENT_TIME == "EventTime"
    (True, True)
    >>> str(TimeMode.NONE), TimeMode.EVENT_TIME.spark_time_mode(idleness_ms=1000).value
    ('None', 'ProcessingTime')
    """

    EVENT_TIME = "EventTime"
    PROCESSING_TIME = "ProcessingTime"
    EVENT_AND_PROCESSING_TIME = "EventTimeAndProcessingTime"
    NONE = "None"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, value: str | TimeMode) -> TimeMode:
        """The mode named ``value`` (a mode, or its name); another value is an error."""
        try:
            return cls(value)
        except ValueError:
            names = [mode.value for mode in cls]
            raise WindowSpecError(f"`time_mode` must be one of {names}; got {value!r}") from None

    @classmethod
    def serving(cls, domains: frozenset[TimeDomain]) -> TimeMode:
        """The mode that serves timers in ``domains``."""
        return next(mode for mode in cls if mode.domains == domains)

    @property
    def domains(self) -> frozenset[TimeDomain]:
        """The time domains whose clocks the query moves."""
        return _DOMAINS[self]

    @property
    def event_time(self) -> bool:
        """Whether the engine's watermark follows Spark's."""
        return TimeDomain.EVENT_TIME in _DOMAINS[self]

    @property
    def processing_time(self) -> bool:
        """Whether the engine's processing time follows the batches'."""
        return TimeDomain.PROCESSING_TIME in _DOMAINS[self]

    def spark_time_mode(self, idleness_ms: int | None) -> TimeMode:
        """The mode Spark runs the query in: ProcessingTime whenever a micro-batch must
        run without data (processing-time timers, or idleness), else this one."""
        if self.processing_time or idleness_ms is not None:
            return TimeMode.PROCESSING_TIME
        return self

    @property
    def timeout(self) -> str:
        """The ``GroupStateTimeout`` of ``applyInPandasWithState`` in this Spark mode."""
        return _TIMEOUTS.get(self, "NoTimeout")


_DOMAINS = {
    TimeMode.EVENT_TIME: frozenset((TimeDomain.EVENT_TIME,)),
    TimeMode.PROCESSING_TIME: frozenset((TimeDomain.PROCESSING_TIME,)),
    TimeMode.EVENT_AND_PROCESSING_TIME: frozenset(
        (TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME)
    ),
    TimeMode.NONE: frozenset(),
}

_TIMEOUTS = {
    TimeMode.EVENT_TIME: "EventTimeTimeout",
    TimeMode.PROCESSING_TIME: "ProcessingTimeTimeout",
}
