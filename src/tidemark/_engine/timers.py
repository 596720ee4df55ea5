"""Timer queues: event-time and processing-time timers across all keys.

A timer is ``(time, key, window)``, registered at most once (the key's state maps each
live timer to its registration sequence number). The queue is a heap ordered by time, then registration order;
deleting a timer only removes it from the key's set, and popping skips timers that are
no longer live, so each registered timer fires exactly once.

A timer registered by a timer callback at or before the time being fired is *held*: it
waits outside the heap until the operator releases it at the next advance of its clock
(see ``WindowOperator.process_watermark``), so such a timer cannot fire in the advance
that registered it, and a trigger re-registering it every time cannot loop.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from tidemark.windows import Window

__all__ = ["TimerQueue"]


class TimerQueue:
    """A min-heap of timers with lazy deletion."""

    __slots__ = ("_heap", "_held", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any, Window]] = []
        self._held: list[tuple[int, int, Any, Window]] = []
        self._seq = 0

    def push(self, time: int, key: Any, window: Window, seq: int | None = None) -> int:
        """Queue a timer; return its registration sequence number.

        ``seq`` re-queues a restored timer at its original place among equal times.
        """
        if seq is None:
            self._seq += 1
            seq = self._seq
        elif seq > self._seq:
            self._seq = seq
        heapq.heappush(self._heap, (time, seq, key, window))
        return seq

    def hold(self, time: int, key: Any, window: Window) -> int:
        """Register a timer that must not fire before :meth:`release_held`; return its
        registration sequence number (its place among equal times once released)."""
        self._seq += 1
        self._held.append((time, self._seq, key, window))
        return self._seq

    def has_held(self) -> bool:
        return bool(self._held)

    def release_held(self) -> None:
        """Queue the held timers: from now on they are due as any other."""
        for entry in self._held:
            heapq.heappush(self._heap, entry)
        self._held.clear()

    def pop_due(
        self, limit: int, take_if_live: Callable[[Any, int, Window], bool]
    ) -> tuple[int, Any, Window] | None:
        """Pop the earliest live timer with ``time <= limit``, or None.

        ``take_if_live(key, time, window)`` says whether the timer is still registered and
        unregisters it; timers it rejects are dropped from the heap.
        """
        heap = self._heap
        while heap and heap[0][0] <= limit:
            time, _, key, window = heapq.heappop(heap)
            if take_if_live(key, time, window):
                return time, key, window
        return None

    @property
    def heap(self) -> list[tuple[int, int, Any, Window]]:
        """The heap itself, ``(time, seq, key, window)`` entries, for loops that pop in
        bulk (see ``WindowOperator._fire_aligned_timers``)."""
        return self._heap

    def peek_time(self) -> int | None:
        """The earliest time in the heap (possibly of a deleted timer), or None; held
        timers are not in the heap."""
        return self._heap[0][0] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
        self._held.clear()

    def __len__(self) -> int:
        return len(self._heap)
