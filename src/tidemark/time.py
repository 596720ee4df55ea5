"""Time: durations and the millisecond conventions tidemark uses everywhere.

Timestamps and watermarks are int milliseconds since the epoch. Every public time
parameter accepts a :class:`Duration`, a :class:`datetime.timedelta` or int milliseconds;
:func:`to_millis` normalises them once, at definition time.
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass
from typing import ClassVar, Union

from tidemark.errors import WindowSpecError

__all__ = [
    "LONG_MIN",
    "LONG_MAX",
    "Duration",
    "TimeLike",
    "to_millis",
    "java_mod",
    "TimeDomain",
]

LONG_MIN = -(2**63)
"""Flink's ``Long.MIN_VALUE``: the watermark before any watermark arrived."""

LONG_MAX = 2**63 - 1
"""Flink's ``Long.MAX_VALUE``: the watermark that ends a bounded input."""


class TimeDomain(enum.Enum):
    """The clock a timer is registered with.

    Triggers and assigners declare the domains they register timers in
    (``Trigger.timer_domains``, ``WindowAssigner.timer_domains``); Spark's streaming mode
    picks its time mode from them, and a BATCH run reads the wall clock only for
    pipelines that declare processing time.
    """

    EVENT_TIME = "event_time"
    PROCESSING_TIME = "processing_time"


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time with millisecond precision, named as in Flink's ``Duration`` use.

    Examples
    --------
    >>> Duration.of_seconds(2).to_millis()
    2000
    >>> Duration.of_minutes(1) == Duration.of_millis(60_000)
    True
    >>> Duration.of_seconds(1)
    Duration(1000ms)
    """

    millis: int
    ZERO: ClassVar[Duration]

    @classmethod
    def of_millis(cls, millis: int) -> Duration:
        return cls(int(millis))

    @classmethod
    def of_seconds(cls, seconds: float) -> Duration:
        return cls(round(seconds * 1000))

    @classmethod
    def of_minutes(cls, minutes: float) -> Duration:
        return cls(round(minutes * 60_000))

    @classmethod
    def of_hours(cls, hours: float) -> Duration:
        return cls(round(hours * 3_600_000))

    @classmethod
    def of_days(cls, days: float) -> Duration:
        return cls(round(days * 86_400_000))

    def to_millis(self) -> int:
        return self.millis

    def __repr__(self) -> str:
        return f"Duration({self.millis}ms)"


Duration.ZERO = Duration(0)

TimeLike = Union[Duration, datetime.timedelta, int]  # noqa: UP007 (a runtime alias, 3.10)


def to_millis(value: TimeLike, name: str) -> int:
    """Normalise a public time parameter to int milliseconds.

    Parameters
    ----------
    value : Duration, datetime.timedelta or int
        The value the user passed; an int is taken as milliseconds.
    name : str
        The parameter's name, for the error message.

    Examples
    --------
    >>> to_millis(datetime.timedelta(seconds=1.5), "size")
    1500
    >>> to_millis("5s", "size")
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `size` must be a Duration, a datetime.timedelta or int milliseconds; got '5s' (str)
    """
    if isinstance(value, Duration):
        return value.millis
    if isinstance(value, datetime.timedelta):
        return (value.days * 86_400 + value.seconds) * 1000 + value.microseconds // 1000
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise WindowSpecError(
        f"`{name}` must be a Duration, a datetime.timedelta or int milliseconds; "
        f"got {value!r} ({type(value).__name__})"
    )


def java_mod(a: int, b: int) -> int:
    """Java's ``%``: the remainder takes the sign of the dividend.

    Flink's trigger arithmetic (``timestamp - timestamp % interval``) uses it, and it
    differs from Python's floor modulo for negative timestamps.

    >>> java_mod(-7, 5), -7 % 5
    (-2, 3)
    """
    r = abs(a) % abs(b)
    return -r if a < 0 else r
