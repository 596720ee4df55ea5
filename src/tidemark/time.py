"""Time: durations and the millisecond conventions tidemark uses everywhere.

Timestamps and watermarks are int milliseconds since the epoch (UTC). Every public time
parameter accepts a :class:`Duration`, a :class:`datetime.timedelta` or int milliseconds
(a NumPy integer is an int); :func:`to_millis` normalises them once, at definition time,
and :func:`exact_int` is how every duration and count tells an int. Inside a user's function an
element's timestamp column may arrive as a ``datetime`` while the engine's times
(``window.start``, ``context.current_watermark()``) are int ms: :func:`to_datetime` and
:func:`from_datetime` convert between the two, exactly.
"""

from __future__ import annotations

import datetime
import enum
import numbers
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar, Union

from tidemark.errors import WindowSpecError

__all__ = [
    "LONG_MIN",
    "LONG_MAX",
    "Duration",
    "TimeLike",
    "to_millis",
    "exact_int",
    "to_datetime",
    "from_datetime",
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

    def __post_init__(self) -> None:
        if isinstance(self.millis, bool) or not isinstance(self.millis, int):
            # a NumPy integer too: stored as the int it is, so it compares and hashes as one
            object.__setattr__(self, "millis", _whole_millis(self.millis, 1, "Duration"))

    @classmethod
    def of_millis(cls, millis: int) -> Duration:
        return cls(_whole_millis(millis, 1, "Duration.of_millis"))

    @classmethod
    def of_seconds(cls, seconds: float) -> Duration:
        return cls(_whole_millis(seconds, 1000, "Duration.of_seconds"))

    @classmethod
    def of_minutes(cls, minutes: float) -> Duration:
        return cls(_whole_millis(minutes, 60_000, "Duration.of_minutes"))

    @classmethod
    def of_hours(cls, hours: float) -> Duration:
        return cls(_whole_millis(hours, 3_600_000, "Duration.of_hours"))

    @classmethod
    def of_days(cls, days: float) -> Duration:
        return cls(_whole_millis(days, 86_400_000, "Duration.of_days"))

    def to_millis(self) -> int:
        return self.millis

    def __repr__(self) -> str:
        return f"Duration({self.millis}ms)"


Duration.ZERO = Duration(0)


def _whole_millis(amount: Any, unit_ms: int, factory: str) -> int:
    """``amount`` units of ``unit_ms`` as int milliseconds, exactly as written (a float by
    its shortest decimal, so ``of_minutes(0.1)`` is 6000), or a WindowSpecError."""
    try:
        if isinstance(amount, bool) or not isinstance(amount, (numbers.Real, Decimal)):
            raise TypeError
        exact = Fraction(amount if isinstance(amount, numbers.Rational) else str(amount))
    except (TypeError, ValueError):
        raise WindowSpecError(
            f"`{factory}` takes a finite number; got {amount!r} ({type(amount).__name__})"
        ) from None
    millis = exact * unit_ms
    if millis.denominator != 1:
        raise WindowSpecError(
            f"`{factory}({amount!r})` is {float(millis)!r} ms: time is int milliseconds "
            f"(as Flink's), so it would be rounded; give a whole number of milliseconds, "
            f"e.g. Duration.of_millis({round(millis)})"
        )
    return int(millis)


def exact_int(value: Any) -> int | None:
    """``value`` as a Python int when it is an integer, else None.

    An integer is an ``int`` or anything registered as :class:`numbers.Integral` (NumPy's
    ``np.int64``, ``np.uint8``, ...), never a bool (``True`` or ``np.bool_``) and never a
    float, however whole (``5000.0``, ``np.float64(5000)``): a count or a number of
    milliseconds read from a NumPy array or a pandas frame is accepted as the number it is.

    >>> import numpy as np
    >>> exact_int(np.int64(5000)), exact_int(7), exact_int(True), exact_int(np.float64(5))
    (5000, 7, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


TimeLike = Union[Duration, datetime.timedelta, int]  # noqa: UP007 (a runtime alias, 3.10)


def to_millis(value: TimeLike, name: str) -> int:
    """Normalise a public time parameter to int milliseconds.

    Parameters
    ----------
    value : Duration, datetime.timedelta or int
        The value the user passed; an int (a NumPy integer too, :func:`exact_int`) is
        taken as milliseconds.
    name : str
        The parameter's name, for the error message.

    Examples
    --------
    >>> to_millis(datetime.timedelta(seconds=1.5), "size")
    1500
    >>> import numpy as np
    >>> to_millis(np.int64(5000), "size")
    5000
    >>> to_millis("5s", "size")
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `size` must be a Duration, a datetime.timedelta or int milliseconds; got '5s' (str)
    """
    if isinstance(value, Duration):
        return value.millis
    if isinstance(value, datetime.timedelta):
        if value.microseconds % 1000:
            raise WindowSpecError(
                f"`{name}` must be a whole number of milliseconds; got {value!r}: time is int "
                "milliseconds (as Flink's), so it would be rounded; round the timedelta first"
            )
        return _floor_millis(value)
    millis = exact_int(value)
    if millis is not None:
        return millis
    raise WindowSpecError(
        f"`{name}` must be a Duration, a datetime.timedelta or int milliseconds; "
        f"got {value!r} ({type(value).__name__})"
    )


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def to_datetime(timestamp_ms: int) -> datetime.datetime:
    """The instant ``timestamp_ms`` (int milliseconds since the epoch) as a timezone-aware
    UTC ``datetime``.

    Raises
    ------
    TypeError
        ``timestamp_ms`` is not an int (a ``datetime`` wants :func:`from_datetime`).

    Examples
    --------
    >>> to_datetime(1_590_292_800_001)
    datetime.datetime(2020, 5, 24, 4, 0, 0, 1000, tzinfo=datetime.timezone.utc)
    >>> to_datetime(-1).isoformat()
    '1969-12-31T23:59:59.999000+00:00'
    """
    if not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool):
        hint = ": use from_datetime" if isinstance(timestamp_ms, datetime.datetime) else ""
        raise TypeError(
            "`timestamp_ms` must be int milliseconds since the epoch; "
            f"got {timestamp_ms!r} ({type(timestamp_ms).__name__}){hint}"
        )
    return _EPOCH + datetime.timedelta(milliseconds=timestamp_ms)


def from_datetime(moment: datetime.datetime) -> int:
    """``moment`` as int milliseconds since the epoch, the engine's time (microseconds
    are floored, as Spark's ``unix_millis`` does).

    A naive ``datetime`` is read as UTC: that is how a Spark timestamp column reaches a
    user's function, in every mode and whatever the session's time zone.

    Raises
    ------
    TypeError
        ``moment`` is not a ``datetime.datetime``.

    Examples
    --------
    >>> from_datetime(datetime.datetime(2020, 5, 24, 4, 0, 0, 1999))
    1590292800001
    >>> from_datetime(to_datetime(-1))
    -1
    """
    if not isinstance(moment, datetime.datetime):
        hint = ": it is already milliseconds" if isinstance(moment, int) else ""
        raise TypeError(
            f"`moment` must be a datetime.datetime; got {moment!r} ({type(moment).__name__}){hint}"
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return _floor_millis(moment - _EPOCH)


def _floor_millis(delta: datetime.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def java_mod(a: int, b: int) -> int:
    """Java's ``%``: the remainder takes the sign of the dividend.

    Flink's trigger arithmetic (``timestamp - timestamp % interval``) uses it, and it
    differs from Python's floor modulo for negative timestamps.

    >>> java_mod(-7, 5), -7 % 5
    (-2, 3)
    """
    r = abs(a) % abs(b)
    return -r if a < 0 else r
