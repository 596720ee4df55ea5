"""Windows: the half-open time interval and the single global window.

A :class:`TimeWindow` is ``[start, end)``: ``start`` belongs to it, ``end`` does not, and
its last timestamp is ``max_timestamp() == end - 1``. Results fired for a window carry
that timestamp, which is what lets windowed operations be chained.

The guide: ``docs/concepts/windows.md``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any, NamedTuple

from tidemark.time import LONG_MAX, to_datetime

__all__ = [
    "Window",
    "TimeWindow",
    "GlobalWindow",
    "get_window_start_with_offset",
    "AlignedLayout",
]

_MASK64 = (1 << 64) - 1


def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
    """Start of the aligned window of ``window_size`` that holds ``timestamp``.

    Windows are aligned to ``offset`` (epoch + offset, + k * size). Python's floor
    modulo is exactly the correction Flink applies for negative remainders.

    Examples
    --------
    >>> get_window_start_with_offset(-8, 0, 7), get_window_start_with_offset(1, 3, 7)
    (-14, -4)
    """
    return timestamp - (timestamp - offset) % window_size


class AlignedLayout(NamedTuple):
    """Windows of ``size_ms`` starting every ``slide_ms`` at ``offset_ms`` from the epoch
    (tumbling windows: ``slide_ms == size_ms``). An assigner whose windows follow it
    says so (``WindowAssigner.aligned_layout``), and the engine's aligned fast path
    computes them from it.

    >>> AlignedLayout(10, 5, 0).last_start(12)
    10
    """

    size_ms: int
    slide_ms: int
    offset_ms: int

    def last_start(self, timestamp: int) -> int:
        """The start of the latest window holding ``timestamp``."""
        return get_window_start_with_offset(timestamp, self.offset_ms, self.slide_ms)


class Window:
    """Base class of windows: anything with a ``max_timestamp()``."""

    __slots__ = ()

    def max_timestamp(self) -> int:
        """The largest timestamp that still belongs to this window."""
        raise NotImplementedError

    def java_hash_code(self) -> int:
        """Flink's ``hashCode`` of this window, used to reproduce Java's set ordering."""
        return hash(self) & 0xFFFFFFFF


class TimeWindow(tuple, Window):  # type: ignore[type-arg]
    """The half-open interval ``[start, end)`` of event or processing time, in ms.

    Every time the engine hands a function (``start``, ``end``, ``max_timestamp()``,
    ``context.current_watermark()``, timer times) is int milliseconds since the epoch,
    UTC; ``end`` is excluded, so a window's length is ``end - start``, never
    ``max_timestamp() - start``. An element's own timestamp column may be a
    ``datetime``: compare it with :meth:`start_datetime` / :meth:`end_datetime`, or
    convert it with :func:`tidemark.time.from_datetime`.

    A tuple underneath, so hashing, equality and ordering (by start, then end) run at C
    speed on the engine's per-element path.

    Examples
    --------
    >>> w = TimeWindow(0, 5)
    >>> w, w.start, w.end, w.max_timestamp()
    (TimeWindow[0, 5), 0, 5, 4)
    >>> w.intersects(TimeWindow(5, 8)), w.cover(TimeWindow(5, 8))
    (True, TimeWindow[0, 8))
    >>> sorted([TimeWindow(3, 4), TimeWindow(0, 9)])
    [TimeWindow[0, 9), TimeWindow[3, 4)]
    >>> minute = TimeWindow(1_590_292_800_000, 1_590_292_860_000)
    >>> minute.start_datetime().isoformat(), minute.end_datetime().isoformat()
    ('2020-05-24T04:00:00+00:00', '2020-05-24T04:01:00+00:00')
    """

    __slots__ = ()

    def __new__(cls, start: int, end: int) -> TimeWindow:
        return tuple.__new__(cls, (start, end))

    start = property(itemgetter(0), doc="First timestamp in the window.")
    end = property(itemgetter(1), doc="First timestamp after the window (exclusive).")

    def max_timestamp(self) -> int:
        return self[1] - 1

    def start_datetime(self) -> datetime.datetime:
        """``start`` as a timezone-aware UTC ``datetime`` (the first instant inside)."""
        return to_datetime(self[0])

    def end_datetime(self) -> datetime.datetime:
        """``end`` as a timezone-aware UTC ``datetime`` (the first instant after)."""
        return to_datetime(self[1])

    def intersects(self, other: TimeWindow) -> bool:
        """True when the windows overlap or touch (``end == other.start`` counts)."""
        return self[0] <= other[1] and self[1] >= other[0]

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window that contains both."""
        return TimeWindow(min(self[0], other[0]), max(self[1], other[1]))

    def java_hash_code(self) -> int:
        """Flink's ``hashCode`` of this window, used to reproduce Java's set ordering."""
        return _long_to_int_with_bit_mixing(self[0] + self[1])

    @staticmethod
    def merge_windows(
        windows: Iterable[TimeWindow],
        callback: Callable[[list[TimeWindow], TimeWindow], Any],
    ) -> None:
        """Sort by start and sweep: each run of intersecting windows merges into its cover.

        ``callback(to_be_merged, merge_result)`` is called once for every run of more than
        one window; ``to_be_merged`` holds distinct windows.
        """
        runs: list[tuple[TimeWindow, list[TimeWindow]]] = []
        for candidate in sorted(windows, key=_start_of):
            if runs and runs[-1][0].intersects(candidate):
                cover, members = runs[-1]
                runs[-1] = (cover.cover(candidate), members)
                if candidate not in members:
                    members.append(candidate)
            else:
                runs.append((candidate, [candidate]))
        for cover, members in runs:
            if len(members) > 1:
                callback(members, cover)

    def __repr__(self) -> str:
        return f"TimeWindow[{self[0]}, {self[1]})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TimeWindow, (self[0], self[1]))


def _start_of(window: TimeWindow) -> int:
    return window[0]


class GlobalWindow(Window):
    """The one window of :class:`~tidemark.assigners.GlobalWindows`; it never ends.

    >>> GlobalWindow.get() is GlobalWindow.get(), GlobalWindow.get().max_timestamp()
    (True, 9223372036854775807)
    """

    __slots__ = ()
    _instance: GlobalWindow | None = None

    def __new__(cls) -> GlobalWindow:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @classmethod
    def get(cls) -> GlobalWindow:
        return cls()

    def max_timestamp(self) -> int:
        return LONG_MAX

    def java_hash_code(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalWindow)

    def __hash__(self) -> int:
        return 0

    def __lt__(self, other: object) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindow"

    def __reduce__(self) -> tuple[Any, ...]:
        return (GlobalWindow, ())


def _long_to_int_with_bit_mixing(value: int) -> int:
    """Flink's ``MathUtils.longToIntWithBitMixing`` (the splitmix64 finaliser), as
    unsigned 32 bits."""
    v = value & _MASK64
    v = ((v ^ (v >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    v = ((v ^ (v >> 27)) * 0x94D049BB133111EB) & _MASK64
    v = v ^ (v >> 31)
    return v & 0xFFFFFFFF
