"""Watermark strategies: how timestamps are read and watermarks generated.

Named as in Flink. The bounded-out-of-orderness generator's watermark is
``max_timestamp_seen - out_of_orderness - 1``; monotonous timestamps are the case
``out_of_orderness == 0``. A replay emits the generator's watermark after every element,
as a punctuated Flink source would.

A source read in partitions (Kafka's partitions, Flink's splits) has one generator per
partition and the minimum over them as its watermark, an idle partition left out
(:class:`PartitionWatermarks`, Flink's per-split watermarks).

The guide (watermarks, lateness, late data): ``docs/concepts/time.md``; per-partition
watermarks: ``docs/kafka.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from typing import Any

from tidemark.errors import InputDataError, WindowSpecError
from tidemark.time import LONG_MIN, TimeLike, to_millis

__all__ = [
    "TimestampAssigner",
    "WatermarkGenerator",
    "BoundedOutOfOrdernessWatermarks",
    "WatermarkStrategy",
    "PartitionWatermarks",
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
        """Mark an input idle after ``idle_timeout`` without records, as Flink's
        ``withIdleness``: an idle input is left out of a minimum over inputs (a source's
        partitions, :class:`PartitionWatermarks`); no watermark advances by itself, and
        when every input is idle the watermark stands still."""
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


class PartitionWatermarks:
    """The watermark of a source read in partitions, as Flink's Kafka source makes it.

    Each partition has its own generator of ``strategy`` (a partition's watermark is
    ``max_timestamp(p) - out_of_orderness - 1``, ``LONG_MIN`` before its first element)
    and the source's watermark is the minimum over the partitions, never going back. A
    partition that has no element yet holds it at ``LONG_MIN``. With
    ``strategy.with_idleness(t)``, a partition none of whose elements arrived in the last
    ``t`` ms of arrival (processing) time is idle and left out of the minimum (a
    partition with no element yet counts from the first arrival of the stream); when
    every partition is idle the watermark stands still, where it was just before the
    last of them went idle (the minimum over those). An element of an idle partition is
    judged by the watermark without it; its partition counts again after it.

    Idleness is judged at each arrival: :meth:`watermark_at` is the watermark in force
    for an element arriving at ``arrival_ms``. (Flink judges it on a periodic timer, by
    default every 200 ms of wall-clock time, so its watermark may jump between
    arrivals; an element sees the same watermark up to that timer's granularity.)

    Parameters
    ----------
    strategy : WatermarkStrategy
        With bounded out-of-orderness; its idleness, if any, applies per partition.
    partitions : iterable of hashable
        Every partition of the source (Kafka's partition numbers, 0 to n - 1).

    Examples
    --------
    Partition 1 lags partition 0 by 5 s; with a bound of 1 s the source's watermark
    follows the lagging partition, so none of its elements is late:

    >>> w = PartitionWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(1000), [0, 1])
    >>> w.on_event(0, 10_000); w.watermark_at() == LONG_MIN  # partition 1 has nothing yet
    True
    >>> w.on_event(1, 5_000); w.watermark_at()
    3999
    >>> w.on_event(0, 20_000); w.on_event(1, 6_000); w.watermark_at()
    4999

    With idleness, partition 1 idle for more than 60 s of arrival time is left out:

    >>> idle = WatermarkStrategy.for_bounded_out_of_orderness(1000).with_idleness(60_000)
    >>> w = PartitionWatermarks(idle, [0, 1])
    >>> w.on_event(0, 10_000, arrival_ms=0); w.on_event(1, 5_000, arrival_ms=0)
    >>> w.on_event(0, 20_000, arrival_ms=30_000); w.watermark_at(60_000)
    3999
    >>> w.watermark_at(60_001)
    18999
    """

    def __init__(self, strategy: WatermarkStrategy, partitions: Iterable[Hashable]):
        if strategy.out_of_orderness_ms is None:
            raise WindowSpecError(
                "per-partition watermarks need a WatermarkStrategy with bounded "
                "out-of-orderness; got WatermarkStrategy.no_watermarks()"
            )
        self.out_of_orderness_ms = strategy.out_of_orderness_ms
        self.idleness_ms = strategy.idleness_ms
        self._max: dict[Hashable, int | None] = dict.fromkeys(partitions)
        if not self._max:
            raise WindowSpecError("`partitions` must name at least one partition; got none")
        self._last_arrival: dict[Hashable, int | None] = dict.fromkeys(self._max)
        self._first_arrival: int | None = None
        self._watermark = LONG_MIN

    @property
    def partitions(self) -> list[Hashable]:
        return list(self._max)

    def on_event(
        self, partition: Hashable, timestamp: int | None, arrival_ms: int | None = None
    ) -> None:
        """An element of ``partition`` with ``timestamp`` arrived at ``arrival_ms`` (an
        element without a timestamp moves no watermark; whoever reads it refuses it)."""
        if partition not in self._max:
            raise InputDataError(
                f"an element of partition {partition!r} (timestamp={timestamp}ms) is not of "
                f"the source's partitions {self.partitions}: list every partition"
            )
        seen = self._max[partition]
        if timestamp is not None and (seen is None or timestamp > seen):
            self._max[partition] = timestamp
        if arrival_ms is not None:
            self._last_arrival[partition] = arrival_ms
            if self._first_arrival is None:
                self._first_arrival = arrival_ms

    def partition_watermark(self, partition: Hashable) -> int:
        """One partition's own watermark (``LONG_MIN`` before its first element)."""
        seen = self._max[partition]
        return LONG_MIN if seen is None else max(seen - self.out_of_orderness_ms - 1, LONG_MIN)

    def is_idle(self, partition: Hashable, arrival_ms: int | None) -> bool:
        """Whether ``partition`` is idle at ``arrival_ms`` (never without idleness)."""
        if self.idleness_ms is None:
            return False
        if arrival_ms is None:
            raise WindowSpecError(
                "per-partition idleness needs each element's arrival time: give the "
                "replay a `processing_time` column"
            )
        last = self._last_arrival[partition]
        since = last if last is not None else self._first_arrival
        return since is not None and arrival_ms - since > self.idleness_ms

    def watermark_at(self, arrival_ms: int | None = None) -> int:
        """The source's watermark in force for an element arriving at ``arrival_ms``."""
        if self._first_arrival is None and arrival_ms is not None:
            self._first_arrival = arrival_ms
        active = [p for p in self._max if not self.is_idle(p, arrival_ms)]
        if not active and self._max:
            # Every partition is idle: the watermark stands where it was just before the
            # last of them went idle, the minimum over those last active (Flink emits
            # it on its periodic timer in between, whether or not an element arrived).
            active = self._last_active()
        if active:
            lowest = min(self.partition_watermark(p) for p in active)
            self._watermark = max(self._watermark, lowest)
        return self._watermark

    def _last_active(self) -> list[Hashable]:
        """The partitions that went idle last: those whose last element (or, without
        one, the stream's first) arrived latest."""
        since = {
            p: a if a is not None else self._first_arrival for p, a in self._last_arrival.items()
        }
        if any(a is None for a in since.values()):
            return []
        latest = max(since.values())  # type: ignore[type-var]
        return [p for p, a in since.items() if a == latest]
