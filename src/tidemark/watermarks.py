"""Watermark strategies: how timestamps are read and watermarks generated.

Named as in Flink. The bounded-out-of-orderness generator's watermark is
``max_timestamp_seen - out_of_orderness - 1``; monotonous timestamps are the case
``out_of_orderness == 0``. A replay emits the generator's watermark after every element,
as a punctuated Flink source would.

The guide (watermarks, lateness, late data): ``docs/concepts/time.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.time import LONG_MIN, TimeLike, to_millis

__all__ = [
    "TimestampAssigner",
    "WatermarkGenerator",
    "BoundedOutOfOrdernessWatermarks",
    "WatermarkStrategy",
]


class TimestampAssigner(ABC):
    """Reads an element's event timestamp (int ms)."""

    @abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int: ...


class WatermarkGenerator(ABC):
    """Sees every element and says what the watermark is."""

    @abstractmethod
    def on_event(self, event: Any, event_timestamp: int) -> None: ...

    @abstractmethod
    def current_watermark(self) -> int:
        """The watermark after the events seen so far (``LONG_MIN`` before any)."""


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """``W = max_timestamp - out_of_orderness - 1``.

    >>> g = BoundedOutOfOrdernessWatermarks(2000)
    >>> g.current_watermark() == LONG_MIN
    True
    >>> g.on_event(None, 10_000); g.on_event(None, 9_000); g.current_watermark()
    7999
    """

    __slots__ = ("out_of_orderness_ms", "max_timestamp")

    def __init__(self, out_of_orderness_ms: int):
        self.out_of_orderness_ms = out_of_orderness_ms
        self.max_timestamp = LONG_MIN + out_of_orderness_ms + 1

    def on_event(self, event: Any, event_timestamp: int) -> None:
        if event_timestamp > self.max_timestamp:
            self.max_timestamp = event_timestamp

    def current_watermark(self) -> int:
        return self.max_timestamp - self.out_of_orderness_ms - 1


class _NoWatermarks(WatermarkGenerator):
    def on_event(self, event: Any, event_timestamp: int) -> None:
        pass

    def current_watermark(self) -> int:
        return LONG_MIN


class WatermarkStrategy:
    """How a stream's timestamps and watermarks are made.

    Examples
    --------
    >>> s = WatermarkStrategy.for_bounded_out_of_orderness(2000).with_idleness(60_000)
    >>> s.out_of_orderness_ms, s.idleness_ms
    (2000, 60000)
    >>> WatermarkStrategy.for_bounded_out_of_orderness(-1)
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `max_out_of_orderness` must be >= 0; got max_out_of_orderness=-1ms
    """

    def __init__(
        self,
        out_of_orderness_ms: int | None,
        timestamp_assigner: Any = None,
        idleness_ms: int | None = None,
    ):
        self.out_of_orderness_ms = out_of_orderness_ms
        self.timestamp_assigner = timestamp_assigner
        self.idleness_ms = idleness_ms

    @classmethod
    def for_bounded_out_of_orderness(cls, max_out_of_orderness: TimeLike) -> WatermarkStrategy:
        millis = to_millis(max_out_of_orderness, "max_out_of_orderness")
        if millis < 0:
            raise WindowSpecError(
                f"`max_out_of_orderness` must be >= 0; got max_out_of_orderness={millis}ms"
            )
        return cls(millis)

    @classmethod
    def for_monotonous_timestamps(cls) -> WatermarkStrategy:
        return cls(0)

    @classmethod
    def no_watermarks(cls) -> WatermarkStrategy:
        return cls(None)

    def with_timestamp_assigner(self, timestamp_assigner: Any) -> WatermarkStrategy:
        """Read timestamps with ``timestamp_assigner``: a :class:`TimestampAssigner` or a
        callable ``(value, record_timestamp) -> int``."""
        extract = getattr(timestamp_assigner, "extract_timestamp", timestamp_assigner)
        if not callable(extract):
            raise WindowSpecError(
                "`timestamp_assigner` must be a TimestampAssigner or callable "
                f"(value, record_timestamp) -> int; got {timestamp_assigner!r}"
            )
        return WatermarkStrategy(self.out_of_orderness_ms, extract, self.idleness_ms)

    def with_idleness(self, idle_timeout: TimeLike) -> WatermarkStrategy:
        """Let the watermark advance when input stays idle for ``idle_timeout``."""
        millis = to_millis(idle_timeout, "idle_timeout")
        if millis <= 0:
            raise WindowSpecError(f"`idle_timeout` must be > 0; got idle_timeout={millis}ms")
        return WatermarkStrategy(self.out_of_orderness_ms, self.timestamp_assigner, millis)

    def create_watermark_generator(self) -> WatermarkGenerator:
        if self.out_of_orderness_ms is None:
            return _NoWatermarks()
        return BoundedOutOfOrdernessWatermarks(self.out_of_orderness_ms)

    def __repr__(self) -> str:
        return (
            f"WatermarkStrategy(out_of_orderness={self.out_of_orderness_ms}ms, "
            f"idleness={self.idleness_ms}ms)"
        )
