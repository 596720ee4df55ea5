"""Timer services: the timers of one time domain across all keys, and its clock.

The window operator has one :class:`TimerService` per time domain, as Flink's
``InternalTimerServiceImpl``: event time, advanced by watermarks, and processing time,
advanced by the clock. Both register, delete, hold and fire timers through the same
code; only the callback they fire into is told the domain.

A timer is ``(time, key, window)``, registered at most once (the key's state maps each
live timer to its registration sequence number, in ``KeyState.event_timers`` or
``KeyState.processing_timers``). The :class:`TimerQueue` is a heap ordered by time, then
registration order; deleting a timer only removes it from the key's set, and popping
skips timers that are no longer live, so each registered timer fires exactly once.

A timer registered by a timer callback at or before the time being fired is *held*: it
waits outside the heap until the next advance of its clock releases it, so such a timer
cannot fire in the advance that registered it, and a trigger re-registering it every
time cannot loop (Flink fires it again at once, forever).

The fast paths ask the service in bulk: :meth:`TimerService.register_window` registers a
window's end and cleanup timers in one call, :meth:`TimerService.push` a timer while
elements are added (when no timer is firing, so none is held), and a service made
``in_bulk`` takes everything due up to a time without the bookkeeping a callback that
registers timers needs (a fast path whose firings register none).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from tidemark.time import LONG_MAX, TimeDomain
from tidemark.windows import Window

if TYPE_CHECKING:
    from tidemark._engine.keystate import KeyState

__all__ = ["TimerQueue", "TimerService", "OnTimer"]

OnTimer = Callable[[TimeDomain, Any, int, Window], None]
"""``on_timer(domain, key, time, window)``: what a timer service fires into."""


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

    def peek_time(self) -> int | None:
        """The earliest time in the heap (possibly of a deleted timer), or None; held
        timers are not in the heap."""
        return self._heap[0][0] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
        self._held.clear()

    def __len__(self) -> int:
        return len(self._heap)


class TimerService:
    """The timers of one time domain for every key of an operator, and its clock.

    Parameters
    ----------
    domain : TimeDomain
        Whose timers: the key states' ``event_timers`` or ``processing_timers``.
    keys : dict
        The operator's key -> :class:`~tidemark._engine.keystate.KeyState` (shared): a
        queued timer fires only while its key's state still lists it.
    on_timer : OnTimer
        Called as each timer fires, with the clock at the time being fired (Flink's
        trigger target).
    start : int
        The clock's first time.
    in_bulk : bool
        The callback never registers a timer of this domain (a fast path's firing):
        due timers are taken without holding any, and all at once, in one sort, when
        the clock reaches ``LONG_MAX`` (a BATCH key's end).

    Examples
    --------
    >>> from tidemark._engine.keystate import KeyState
    >>> from tidemark.windows import TimeWindow
    >>> keys, fired = {"a": KeyState()}, []
    >>> service = TimerService(
    ...     TimeDomain.EVENT_TIME, keys, lambda *timer: fired.append(timer[1:3]), -1)
    >>> service.register("a", keys["a"], 9, TimeWindow(0, 10))
    >>> service.register("a", keys["a"], 9, TimeWindow(0, 10))  # registered once
    >>> service.advance(8)
    >>> fired, service.count()
    ([], 1)
    >>> service.advance(20)
    >>> fired, service.count(), service.current_time
    ([('a', 9)], 0, 20)
    """

    __slots__ = (
        "domain",
        "current_time",
        "queue",
        "_keys",
        "_timers_of",
        "_on_timer",
        "_firing",
        "_in_bulk",
    )

    def __init__(
        self,
        domain: TimeDomain,
        keys: dict[Any, KeyState],
        on_timer: OnTimer,
        start: int,
        *,
        in_bulk: bool = False,
    ):
        self.domain = domain
        self.current_time = start
        self.queue = TimerQueue()
        self._keys = keys
        is_event_time = domain is TimeDomain.EVENT_TIME
        self._timers_of = attrgetter("event_timers" if is_event_time else "processing_timers")
        self._on_timer = on_timer
        # The time of the timer being fired (None: none is): a timer its callback
        # registers at or before it is held for the next advance.
        self._firing: int | None = None
        self._in_bulk = in_bulk

    def register(self, key: Any, ks: KeyState, time: int, window: Window) -> None:
        """Register a timer of ``key`` unless it is; held when a callback registers it
        at or before the time being fired."""
        timers = self._timers_of(ks)
        timer = (time, window)
        if timer not in timers:
            firing = self._firing
            if firing is not None and time <= firing:
                timers[timer] = self.queue.hold(time, key, window)
            else:
                timers[timer] = self.queue.push(time, key, window)

    def push(self, key: Any, ks: KeyState, time: int, window: Window) -> None:
        """:meth:`register` while elements are added: no timer is firing then, so none
        is held (a fast path's per-element registration, one call)."""
        timers = self._timers_of(ks)
        if (time, window) not in timers:
            queue = self.queue
            queue._seq += 1  # TimerQueue.push, inlined: one module
            timers[(time, window)] = seq = queue._seq
            heapq.heappush(queue._heap, (time, seq, key, window))

    def register_window(
        self, key: Any, ks: KeyState, window: Window, end: int | None, cleanup: int
    ) -> None:
        """A window's end-of-window timer at ``end`` (None: none) and then its cleanup
        timer at ``cleanup``, each unless registered, as elements are added (see
        :meth:`push`); the cleanup timer only where it is not the end timer and is ever
        due (before ``LONG_MAX``). This is the order the general operator registers
        them in: the trigger's ``on_element``, then the operator's cleanup timer."""
        timers, queue = self._timers_of(ks), self.queue  # TimerQueue.push, inlined
        if end is not None and (end, window) not in timers:
            queue._seq += 1
            timers[(end, window)] = seq = queue._seq
            heapq.heappush(queue._heap, (end, seq, key, window))
        if cleanup != end and cleanup < LONG_MAX and (cleanup, window) not in timers:
            queue._seq += 1
            timers[(cleanup, window)] = seq = queue._seq
            heapq.heappush(queue._heap, (cleanup, seq, key, window))

    def delete(self, ks: KeyState, time: int, window: Window) -> None:
        """Delete a timer (its queue entry goes stale); a timer not registered is ignored."""
        self._timers_of(ks).pop((time, window), None)

    def advance(self, time: int) -> None:
        """One advance of the clock to ``time``: :meth:`begin_advance`, then
        :meth:`fire_due`."""
        self.begin_advance(time)
        self.fire_due(time)

    def begin_advance(self, time: int) -> bool:
        """Start an advance to ``time``: when it moves the clock forward, the held timers
        are released (due from now on as any other). Leaves the clock alone; returns
        whether a queued timer is due at ``time`` (perhaps a deleted one)."""
        queue = self.queue  # (one module: its lists read directly)
        if time > self.current_time and queue._held:
            queue.release_held()
        heap = queue._heap
        return bool(heap) and heap[0][0] <= time

    def fire_due(self, time: int) -> None:
        """Set the clock to ``time`` and fire every due timer in (time, registration)
        order, those the callbacks register up to ``time`` included; held timers stay
        held."""
        self.current_time = time
        if self._in_bulk:
            self._fire_in_bulk(time)
            return
        queue, take = self.queue, self._take_if_live
        try:
            while True:
                due = queue.pop_due(time, take)
                if due is None:
                    return
                timer_time, key, window = due
                self._firing = timer_time
                self._on_timer(self.domain, key, timer_time, window)
        finally:
            self._firing = None

    def _fire_in_bulk(self, time: int) -> None:
        """:meth:`fire_due` for a callback that registers no timer: no timer is held, and
        at ``LONG_MAX``, when every queued timer is due, they are taken in one sort (the
        heap's own order: time, then registration)."""
        heap = self.queue._heap
        if not heap or heap[0][0] > time:
            return
        keys, timers_of, on_timer, domain = self._keys, self._timers_of, self._on_timer, self.domain
        if time == LONG_MAX:
            due = sorted(heap)
            heap.clear()
            for timer_time, _, key, window in due:
                ks = keys.get(key)
                if ks is not None and timers_of(ks).pop((timer_time, window), None) is not None:
                    on_timer(domain, key, timer_time, window)
            return
        while heap and heap[0][0] <= time:
            timer_time, _, key, window = heapq.heappop(heap)
            ks = keys.get(key)
            if ks is not None and timers_of(ks).pop((timer_time, window), None) is not None:
                on_timer(domain, key, timer_time, window)

    def _take_if_live(self, key: Any, time: int, window: Window) -> bool:
        ks = self._keys.get(key)
        return ks is not None and self._timers_of(ks).pop((time, window), None) is not None

    def reset(self, time: int) -> None:
        """Set the clock without firing anything; held timers wait no more."""
        self.queue.release_held()
        self.current_time = time

    def restore(self, key: Any, ks: KeyState) -> None:
        """Queue ``ks``'s timers (a restored key), each at its original place among timers
        of equal time; a timer that was held is queued as any other."""
        push = self.queue.push
        for (time, window), seq in self._timers_of(ks).items():
            push(time, key, window, seq)

    def clear(self) -> None:
        """Drop every queued and held timer (the keys' own sets are the caller's)."""
        self.queue.clear()

    def count(self) -> int:
        """The timers registered for all keys."""
        return sum(len(self._timers_of(ks)) for ks in self._keys.values())
