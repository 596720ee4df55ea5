"""Evictors: remove elements from a window's contents before or after its function runs.

When an evictor is set, a window keeps all its elements (not an incremental accumulator);
on every firing the operator calls ``evict_before``, evaluates the function on what is
left, calls ``evict_after``, and writes the survivors back. An evictor edits the list it
is given in place. PyFlink has no evictors; tidemark follows Flink's Java ones.

The guide: ``docs/concepts/evictors.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.time import TimeLike, exact_int, to_millis
from tidemark.windows import Window

__all__ = [
    "TimestampedValue",
    "EvictorContext",
    "Evictor",
    "CountEvictor",
    "TimeEvictor",
    "DeltaEvictor",
]


class TimestampedValue:
    """An element with its timestamp (``None`` when the element has none)."""

    __slots__ = ("value", "timestamp")

    def __init__(self, value: Any, timestamp: int | None):
        self.value = value
        self.timestamp = timestamp

    def get_value(self) -> Any:
        return self.value

    def get_timestamp(self) -> int | None:
        return self.timestamp

    def has_timestamp(self) -> bool:
        return self.timestamp is not None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TimestampedValue)
            and self.value == other.value
            and self.timestamp == other.timestamp
        )

    def __repr__(self) -> str:
        return f"TimestampedValue({self.value!r}, {self.timestamp})"


class EvictorContext(ABC):
    """What an evictor may ask: the clocks."""

    @abstractmethod
    def get_current_processing_time(self) -> int:
        """The processing-time clock, in ms."""

    @abstractmethod
    def get_current_watermark(self) -> int:
        """The watermark of the firing, in ms."""


class Evictor(ABC):
    """Removes elements from a firing window; subclass it for a custom evictor.

    On every firing of a window: :meth:`evict_before`, the window function on what is
    left, :meth:`evict_after`; the survivors are the window's contents afterwards (an
    empty list removes them). Both methods get ``elements``, a list of
    :class:`TimestampedValue` in insertion order, to edit in place, and
    ``size == len(elements)``.

    Supported
    ---------
    - removing any elements (``del elements[i]``, slice assignment, ``clear()``).

    Not supported
    -------------
    - adding elements or changing their values; state or timers.
    """

    @abstractmethod
    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext
    ) -> None:
        """Called on every firing, before the window function sees ``elements``."""

    @abstractmethod
    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext
    ) -> None:
        """Called on every firing, after the window function saw ``elements``."""


class _BeforeOrAfter(Evictor):
    def __init__(self, do_evict_after: bool):
        if not isinstance(do_evict_after, bool):
            raise WindowSpecError(f"`do_evict_after` must be a bool; got {do_evict_after!r}")
        self.do_evict_after = do_evict_after

    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext
    ) -> None:
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext
    ) -> None:
        if self.do_evict_after:
            self._evict(elements, size)

    @abstractmethod
    def _evict(self, elements: list[TimestampedValue], size: int) -> None: ...


class CountEvictor(_BeforeOrAfter):
    """Keeps the last ``max_count`` elements.

    >>> elements = [TimestampedValue(v, v) for v in range(5)]
    >>> CountEvictor.of(2).evict_before(elements, 5, None, None)
    >>> [e.value for e in elements]
    [3, 4]
    """

    def __init__(self, max_count: int, do_evict_after: bool = False):
        count = exact_int(max_count)
        if count is None or count < 0:
            raise WindowSpecError(f"`max_count` must be an int >= 0; got max_count={max_count!r}")
        super().__init__(do_evict_after)
        self.max_count = count

    @classmethod
    def of(cls, max_count: int, do_evict_after: bool = False) -> CountEvictor:
        return cls(max_count, do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        if size > self.max_count:
            del elements[: size - self.max_count]

    def __repr__(self) -> str:
        return f"CountEvictor.of({self.max_count}, do_evict_after={self.do_evict_after})"


class TimeEvictor(_BeforeOrAfter):
    """Keeps elements newer than ``max_timestamp - interval``.

    Elements with ``timestamp <= max(timestamps) - interval`` go; if the first element
    has no timestamp nothing is evicted.

    >>> elements = [TimestampedValue(v, v * 1000) for v in range(5)]
    >>> TimeEvictor.of(2000).evict_before(elements, 5, None, None)
    >>> [e.value for e in elements]
    [3, 4]
    """

    def __init__(self, interval: TimeLike, do_evict_after: bool = False):
        super().__init__(do_evict_after)
        self.interval_ms = to_millis(interval, "interval")
        if self.interval_ms < 0:
            raise WindowSpecError(f"`interval` must be >= 0; got interval={self.interval_ms}ms")

    @classmethod
    def of(cls, interval: TimeLike, do_evict_after: bool = False) -> TimeEvictor:
        return cls(interval, do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        if not elements or elements[0].timestamp is None:
            return
        newest = max(e.timestamp for e in elements if e.timestamp is not None)
        cutoff = newest - self.interval_ms
        elements[:] = [e for e in elements if e.timestamp is None or e.timestamp > cutoff]

    def __repr__(self) -> str:
        return f"TimeEvictor.of({self.interval_ms}ms, do_evict_after={self.do_evict_after})"


class DeltaEvictor(_BeforeOrAfter):
    """Drops elements whose ``delta(element, last_element) >= threshold``.

    ``delta_function`` is a callable ``(a, b) -> float`` or has ``get_delta``.

    >>> elements = [TimestampedValue(v, 0) for v in (1, 5, 9, 10)]
    >>> DeltaEvictor.of(3, lambda a, b: abs(a - b)).evict_before(elements, 4, None, None)
    >>> [e.value for e in elements]
    [9, 10]
    """

    def __init__(self, threshold: float, delta_function: Any, do_evict_after: bool = False):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise WindowSpecError(f"`threshold` must be a number; got threshold={threshold!r}")
        super().__init__(do_evict_after)
        self.threshold = threshold
        self.delta: Callable[[Any, Any], float] = getattr(
            delta_function, "get_delta", delta_function
        )
        if not callable(self.delta):
            raise WindowSpecError(
                f"`delta_function` must be callable (a, b) -> float; got {delta_function!r}"
            )

    @classmethod
    def of(
        cls, threshold: float, delta_function: Any, do_evict_after: bool = False
    ) -> DeltaEvictor:
        return cls(threshold, delta_function, do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        if not elements:
            return
        last = elements[-1].value
        delta, threshold = self.delta, self.threshold
        elements[:] = [e for e in elements if delta(e.value, last) < threshold]

    def __repr__(self) -> str:
        return f"DeltaEvictor.of({self.threshold}, do_evict_after={self.do_evict_after})"
