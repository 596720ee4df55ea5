"""The aligned operator: the general window operator, but faster for tumbling and sliding
event-time windows whose trigger fires only at the window end, without an evictor.

Such a trigger promises :class:`~tidemark.triggers.EventTimeTrigger`'s behaviour
(``Trigger.fires_only_at_window_end``): register a timer at the window's end, FIRE there,
FIRE at once for an element added after it, no state. This operator does exactly that
without calling the trigger, computes windows from the assigner's
:class:`~tidemark.windows.AlignedLayout` instead of calling it, and takes due timers in
bulk; where a pipeline is this shape, a keyed tumbling reduce spends its time here. For
tumbling windows the per-element method is specialised once per operator (a closure
with what it reads bound), and serves elements whose window is neither late nor due.
The results, side outputs, counts, watermarks seen and state left are the general
operator's (the property tests run both and compare).
"""

from __future__ import annotations

from bisect import bisect_left
from functools import reduce
from itertools import islice
from operator import le
from types import MethodType
from typing import Any

from tidemark._engine.contexts import ClockContext
from tidemark._engine.keystate import KeyState
from tidemark._engine.operator import ADDED, ADDED_LATE, SKIPPED, WindowOperator
from tidemark._engine.spec import OperatorSpec
from tidemark._engine.timers import TimerService
from tidemark.time import LONG_MAX, LONG_MIN, TimeDomain
from tidemark.windows import AlignedLayout, TimeWindow, Window

__all__ = ["AlignedWindowOperator"]

EVENT_TIME = TimeDomain.EVENT_TIME

_CACHED_WINDOWS = 4096
# Runs at least this long, in timestamp order, are folded a window at a time.
_FOLDED_RUN = 16


def _in_order(timestamps: list[Any]) -> bool:
    return all(map(le, timestamps, islice(timestamps, 1, None)))


class AlignedWindowOperator(WindowOperator):
    """:class:`WindowOperator`, but faster for aligned event-time windows.

    Parameters
    ----------
    spec : OperatorSpec
        A pipeline whose ``aligned_layout()`` is ``layout``.
    layout : AlignedLayout
        Where the windows are.
    tracer : object, optional
    """

    def __init__(self, spec: OperatorSpec, layout: AlignedLayout, *, tracer: Any = None):
        super().__init__(spec, tracer=tracer)
        self._layout = layout
        self._batch_mode = spec.batch_mode
        # start -> (window, cleanup time): each window object and its cleanup time are
        # made once, not once per element.
        self._window_cache: dict[int, tuple[TimeWindow, int]] = {}
        # Every event-time timer is the aligned windows' own: taken in bulk.
        self.event_time_timers = TimerService(
            EVENT_TIME, self.keys, self._on_due_timer, LONG_MIN, in_bulk=True
        )
        self._window_timers = self.event_time_timers
        self._clock = ClockContext(self.event_time_timers, self.processing_time_timers)
        # A firing emits the window's incremental result itself: no window function,
        # tracer, evictor or recorded watermark, and the window keeps an accumulator.
        self._plain = (
            self.logic.window_function is None
            and tracer is None
            and self.output_watermarks is None
            and not self.logic.keeps_elements
        )
        # The logic's add, and AggregateFunction's own add and create_accumulator (called
        # directly: the hottest calls of all), bound once.
        self._adders: tuple[Any, Any, Any] = self.logic.adders()
        # Tumbling windows: the per-element method, specialised once (see
        # _tumbling_element_path); an instance attribute, found before the class's.
        self._tumbling_element: Any = None
        if layout.size_ms == layout.slide_ms:
            self._tumbling_element = _tumbling_element_path(self)
            self.process_element = self._tumbling_element  # type: ignore[method-assign]

    # ------------------------------------------------------------------ elements

    def process_element(self, key: Any, value: Any, timestamp: int | None) -> int:
        """:meth:`WindowOperator.process_element` (for tumbling windows, an instance's
        own specialised method serves first, and hands this what it does not serve)."""
        if timestamp is None:
            return super().process_element(key, value, timestamp)
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        status = self._aligned_run(key, ks, (value,), (timestamp,))
        if not ks.contents and ks.is_empty():  # nothing kept: as the general operator
            del self.keys[key]
        return status

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """:meth:`WindowOperator.process_elements`, with the per-element overhead paid
        once per run. Tumbling windows of a run in timestamp order are folded a window at
        a time (under ``spec.batch_mode`` those complete within the run fire at once);
        outside BATCH, a short run or one out of order takes the tumbling element path
        element by element, which costs less than a run's set-up."""
        tumbling_element = self._tumbling_element
        if tumbling_element is not None and not self._batch_mode:
            if len(values) < _FOLDED_RUN or None in timestamps or not _in_order(timestamps):
                for value, timestamp in zip(values, timestamps):
                    tumbling_element(key, value, timestamp)
                return
        if None in timestamps:
            super().process_elements(key, values, timestamps)
            return
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        if (
            tumbling_element is not None
            and len(values) > 1
            and (self._batch_mode or _in_order(timestamps))
        ):
            self._tumbling_sorted_run(key, ks, values, timestamps)
        else:
            self._aligned_run(key, ks, values, timestamps)
        if not ks.contents and ks.is_empty():
            del self.keys[key]

    def _window(self, start: int) -> tuple[TimeWindow, int]:
        """The window starting at ``start`` and its cleanup time, cached."""
        entry = self._window_cache.get(start)
        if entry is None:
            cache = self._window_cache
            if len(cache) > _CACHED_WINDOWS:
                cache.clear()
            window = TimeWindow(start, start + self._layout.size_ms)
            entry = cache[start] = (window, self.cleanup_time(window))
        return entry

    def _aligned_run(self, key: Any, ks: KeyState, values: Any, timestamps: Any) -> int:
        """The general per-element path (skip late windows, add, the trigger's
        on_element, cleanup timer, late element) without per-call indirection. Returns
        the last element's status."""
        size, slide, offset = self._layout
        contents, cache = ks.contents, self._window_cache
        add, agg_add, create = self._adders
        register_window = self.event_time_timers.register_window
        # No element moves the watermark: read once per run.
        watermark = self.event_time_timers.current_time
        status = SKIPPED
        for value, timestamp in zip(values, timestamps):
            status = SKIPPED
            # The layout's last_start(timestamp), inlined: the hottest line of all.
            start = timestamp - (timestamp - offset) % slide
            while start > timestamp - size:
                entry = cache.get(start)
                window, cleanup = entry if entry is not None else self._window(start)
                start -= slide
                if cleanup <= watermark:  # is_window_late
                    continue
                current = contents.get(window)
                try:
                    if agg_add is None:
                        contents[window] = add(current, value)
                    else:
                        contents[window] = agg_add(value, create() if current is None else current)
                except Exception as exc:
                    raise self._user_error(
                        "the reduce/aggregate function", key, window, exc
                    ) from exc
                max_ts = window[1] - 1
                if max_ts <= watermark:  # on_element: FIRE at once
                    status = ADDED_LATE
                    self._fire(key, ks, window, window, watermark)
                    if current is None:  # its cleanup timer (after the watermark)
                        register_window(key, ks, window, None, cleanup)
                else:
                    status = ADDED if status == SKIPPED else status
                    # A window holding contents has both timers pending (neither can have
                    # fired while max_ts > watermark): only a new window registers them.
                    if current is None:
                        register_window(key, ks, window, max_ts, cleanup)
            if status == SKIPPED and self.is_element_late(timestamp):
                status = self._late_element(value, timestamp)
        return status

    def _tumbling_sorted_run(self, key: Any, ks: KeyState, values: Any, timestamps: Any) -> None:
        """:meth:`_aligned_run` for tumbling windows and timestamps in order: the elements
        of one window are consecutive, so each window is looked up, checked and given its
        timers once, and its elements are folded in one call sequence. The user function
        sees exactly the calls, in the order, of the per-element path. A window that is
        late or due (its end at or before the watermark) goes element by element."""
        watermark = self.current_watermark
        contents = ks.contents
        complete_fires = self._batch_mode and watermark == LONG_MIN
        if complete_fires and contents:
            # windows of earlier runs that this run's elements are past fire first, in order
            first = timestamps[0]
            open_windows: list[Any] = list(contents)  # TimeWindows: tumbling
            for done in sorted(w for w in open_windows if w[1] <= first):
                self._fire_complete(key, ks, done)
        n, i = len(timestamps), 0
        while i < n:
            window, cleanup = self._window(self._layout.last_start(timestamps[i]))
            j = bisect_left(timestamps, window[1], i)
            max_ts = window[1] - 1
            if max_ts <= watermark:
                self._aligned_run(key, ks, values[i:j], timestamps[i:j])
                i = j
                continue
            current = contents.get(window) if contents else None
            folded = self._fold(key, window, current, values[i:j])
            i = j
            if complete_fires and j < n:
                # BATCH: this key's later elements are at or after the window's end.
                if self._plain and current is None:  # no state or timers to clear
                    self._emit_incremental(key, window, folded, max_ts)
                else:
                    contents[window] = folded
                    self._fire_complete(key, ks, window)
                continue
            contents[window] = folded
            if current is None:
                self._register_timers(key, ks, window, max_ts, cleanup)

    def _fold(self, key: Any, window: Window, current: Any, values: list[Any]) -> Any:
        """``current`` contents (None for a new window) with ``values`` added, in order."""
        logic = self.logic
        aggregate = logic.aggregate
        try:
            if aggregate is not None:
                add = aggregate.add
                folded = aggregate.create_accumulator() if current is None else current
                for value in values:
                    folded = add(value, folded)
                return folded
            if logic.reduce is None:  # a window function over all elements
                if current is None:
                    return list(values)
                current.extend(values)
                return current
            if current is None:
                return reduce(logic.reduce, values)
            return reduce(logic.reduce, values, current)
        except Exception as exc:
            raise self._user_error("the reduce/aggregate function", key, window, exc) from exc

    def _open_window(
        self, key: Any, ks: KeyState, window: TimeWindow, cleanup: int, value: Any
    ) -> int:
        """Add ``value`` to ``window``, new to ``key``, whose end is after the watermark,
        and register the window's timers; ADDED."""
        try:
            ks.contents[window] = self.logic.add(None, value)
        except Exception as exc:
            raise self._user_error("the reduce/aggregate function", key, window, exc) from exc
        self._register_timers(key, ks, window, window[1] - 1, cleanup)
        return ADDED

    def _register_timers(
        self, key: Any, ks: KeyState, window: Window, max_ts: int, cleanup: int
    ) -> None:
        """A new window's end-of-window timer (the trigger's) and cleanup timer, unless
        that is the end timer or never due."""
        self.event_time_timers.register_window(key, ks, window, max_ts, cleanup)

    def _fire_complete(self, key: Any, ks: KeyState, window: Any) -> None:
        """Fire and clear a window no element can reach any more (BATCH), as the final
        watermark would: functions see that watermark, +inf; its timers are dropped."""
        if self._plain:
            self._emit_incremental(key, window, ks.contents.pop(window), window[1] - 1)
        else:
            self._fire(key, ks, window, window, LONG_MAX)
            self._clear_all_state(key, ks, window, window, LONG_MAX)
        timers = ks.event_timers
        if timers:
            timers.pop((window.max_timestamp(), window), None)
            timers.pop((self.cleanup_time(window), window), None)

    def _emit_incremental(self, key: Any, window: Any, contents: Any, max_ts: int) -> None:
        """:meth:`_fire` where the firing emits the window's incremental result itself
        (``self._plain``): a window without contents emits nothing."""
        if contents is None:
            return
        aggregate = self.logic.aggregate
        try:
            result = contents if aggregate is None else aggregate.get_result(contents)
        except Exception as exc:
            raise self._user_error("the window function", key, window, exc) from exc
        self.output.append((result, max_ts))

    # ------------------------------------------------------------------ time

    def process_watermark(self, watermark: int) -> None:
        """:meth:`WindowOperator.process_watermark`: every event-time timer is a window's
        end, which fires it, or its cleanup time, which clears it, and firing registers
        no new timer, so the event-time service takes due timers in bulk (``in_bulk``);
        when none is due, a look at the queue's top is all it costs."""
        service = self.event_time_timers
        if service.begin_advance(watermark):
            service.fire_due(watermark)
        else:
            service.current_time = watermark

    def _on_due_timer(self, domain: Any, key: Any, time: int, window: Any) -> None:
        """A due timer ``(time, key, window)`` (live: the service took it): at the
        window's end FIRE (the trigger's on_event_time), at its cleanup time clear it."""
        ks = self.keys[key]
        watermark = self.event_time_timers.current_time
        timers, contents = ks.event_timers, ks.contents
        max_ts = window[1] - 1
        entry = self._window_cache.get(window[0])
        cleans = time == (entry[1] if entry is not None else self.cleanup_time(window))
        if not self._plain:
            if time == max_ts:
                self._fire(key, ks, window, window, watermark)
            if cleans:
                self._clear_all_state(key, ks, window, window, watermark)
        elif time == max_ts:  # emit; at the cleanup time too, the contents go
            result = contents.pop(window, None) if cleans else contents.get(window)
            if result is not None and self.logic.aggregate is None:
                self.output.append((result, max_ts))
            elif result is not None:
                self._emit_incremental(key, window, result, max_ts)
        elif cleans:  # nothing but the contents and the end timer to clear
            contents.pop(window, None)
            timers.pop((max_ts, window), None)
        if not contents and not timers and ks.is_empty():
            del self.keys[key]

    def _clear_trigger(self, key: Any, ks: KeyState, window: Window) -> None:
        # The trigger's clear, as fires_only_at_window_end promises it: its end timer goes.
        ks.event_timers.pop((window.max_timestamp(), window), None)


def _tumbling_element_path(op: AlignedWindowOperator) -> Any:
    """``op.process_element`` for tumbling windows, with what it reads bound once.

    It serves an element whose window is neither late nor due (its end after the
    watermark; its cleanup time, at or after its end, too): the element is added and,
    for a window new to the key, the window's end timer (the trigger's on_element) and
    cleanup timer are registered; a window that already holds contents has both (no
    timer of a window whose end is after the watermark has fired). The result is
    ADDED, as the general path's. Every other element (late, due, no timestamp) goes
    to :meth:`AlignedWindowOperator.process_element`.
    """
    size, _, offset = op._layout
    last_ms = size - 1  # a window's max timestamp, from its start
    keys, cache, clock, window_of = op.keys, op._window_cache, op.event_time_timers, op._window
    logic = op.logic
    aggregate = logic.aggregate
    agg_add = aggregate.add if aggregate is not None else None
    step = logic.reduce if logic.reduce is not None else logic.add  # (contents, value)
    new_window = op._open_window
    general = MethodType(AlignedWindowOperator.process_element, op)

    def process_element(key: Any, value: Any, timestamp: int | None) -> int:
        if timestamp is None:
            return general(key, value, timestamp)
        start = timestamp - (timestamp - offset) % size
        if start + last_ms <= clock.current_time:  # late or due: the general path
            return general(key, value, timestamp)
        entry = cache.get(start)
        if entry is None:
            entry = window_of(start)
        window = entry[0]
        ks = keys.get(key)
        if ks is not None:
            contents = ks.contents
            current = contents.get(window)
            if current is not None:
                try:
                    if agg_add is None:
                        contents[window] = step(current, value)
                    else:
                        contents[window] = agg_add(value, current)
                except Exception as exc:
                    raise op._user_error("the reduce/aggregate function", key, window, exc) from exc
                return ADDED
        else:
            ks = keys[key] = KeyState()
        return new_window(key, ks, window, entry[1], value)

    return process_element
