"""The window operator: Flink's ``WindowOperator`` and ``EvictingWindowOperator`` in one.

Per element: assign windows; for merging assigners add each to the key's merging window
set; skip windows that are late; add the element to each remaining window's contents;
ask the trigger; fire and/or purge; register the window's cleanup timer. An element that
went into no window and is itself late goes to the late-data side output, or is counted
as dropped. Timers fire in time order when the watermark (event time) or the clock
(processing time) reaches them; a window's cleanup timer removes all its state.

The operator is driven by its caller (the test harness, or a Spark runner): it never
reads a clock of its own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from functools import reduce
from heapq import heappop
from itertools import islice
from operator import le
from typing import Any

from tidemark._engine.contexts import ClockContext, ProcessCallContext, TriggerCallContext
from tidemark._engine.functions import ELEMENTS, WindowLogic
from tidemark._engine.keystate import KeyState
from tidemark._engine.merging import MergingWindowSet
from tidemark._engine.spec import aligned_event_time_windows, validate_window_spec
from tidemark._engine.timers import TimerQueue
from tidemark.assigners import (
    MergingWindowAssigner,
    WindowAssigner,
)
from tidemark.errors import UnsupportedMergeError, UserFunctionError
from tidemark.evictors import Evictor, TimestampedValue
from tidemark.outputs import OutputTag
from tidemark.time import LONG_MAX, LONG_MIN
from tidemark.triggers import Trigger, TriggerResult
from tidemark.windows import TimeWindow, Window

__all__ = [
    "WindowOperator",
    "ADDED",
    "ADDED_LATE",
    "SIDE_OUTPUT",
    "DROPPED",
    "SKIPPED",
    "validate_window_spec",
]

# What became of an element (returned by process_element, used by tracing).
ADDED, ADDED_LATE, SIDE_OUTPUT, DROPPED, SKIPPED = range(5)


def _join_lists(target: list[Any] | None, source: list[Any]) -> list[Any]:
    return source if target is None else target + source


class WindowOperator:
    """Keyed window state, timers and firing logic; fed elements, watermarks and time.

    Parameters
    ----------
    assigner : WindowAssigner
    logic : WindowLogic
        The window function with its state strategy.
    trigger : Trigger, optional
        Defaults to the assigner's default trigger.
    evictor : Evictor, optional
        When set, windows keep all elements and the evictor runs on each firing.
    allowed_lateness_ms : int
        How long after a window's end its state is kept for late firings (event time).
    late_data_tag : OutputTag, optional
        Where late elements go; without it they are counted in
        ``num_late_records_dropped``.
    tracer : object, optional
        Receives ``fired(key, window, watermark, results)`` for every firing.
    """

    def __init__(
        self,
        assigner: WindowAssigner,
        logic: WindowLogic,
        *,
        trigger: Trigger | None = None,
        evictor: Evictor | None = None,
        allowed_lateness_ms: int = 0,
        late_data_tag: OutputTag | None = None,
        tracer: Any = None,
    ):
        validate_window_spec(assigner, trigger, evictor, allowed_lateness_ms, late_data_tag)
        self.assigner = assigner
        self.logic = logic
        self.trigger = trigger if trigger is not None else assigner.get_default_trigger()
        self.evictor = evictor
        self.allowed_lateness_ms = allowed_lateness_ms
        self.late_data_tag = late_data_tag
        self.tracer = tracer
        self.is_event_time = assigner.is_event_time()
        self.is_merging = isinstance(assigner, MergingWindowAssigner)
        self.current_watermark = LONG_MIN
        self.current_processing_time = 0
        self.num_late_records_dropped = 0
        self.keys: dict[Any, KeyState] = {}
        self.output: list[tuple[Any, int]] = []
        self.side_outputs: dict[OutputTag, list[tuple[Any, int]]] = {}
        self._event_queue = TimerQueue()
        self._processing_queue = TimerQueue()
        self._clock = ClockContext(self)
        self._aligned = aligned_event_time_windows(assigner, self.trigger, evictor)
        self._window_cache: dict[int, TimeWindow] = {}
        # When a list, every emitted result's watermark at emission is appended here
        # (replays record it to place results in a chained stream).
        self.output_watermarks: list[int] | None = None
        # The caller's promise of Flink BATCH input: each key's elements come in timestamp
        # order and complete, under no watermark, and then the watermark jumps to +inf.
        # Tumbling windows that a key's later elements cannot reach then fire as soon
        # as they are complete, with the results, order and watermark (+inf) of firing
        # at the key's end, and without timers (see process_elements).
        self.batch_mode = False

    # ------------------------------------------------------------------ elements

    def process_element(self, key: Any, value: Any, timestamp: int | None) -> int:
        """Process one element of ``key``; return what became of it (ADDED, DROPPED, ...)."""
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        if self._aligned is not None and timestamp is not None:
            return self._aligned_run(key, ks, (value,), (timestamp,))
        try:
            windows = self.assigner.assign_windows(value, timestamp, self._clock)
        except Exception as exc:
            raise self._user_error("the window assigner", key, None, exc) from exc
        if self.is_merging:
            status = self._add_to_merging_windows(key, ks, value, timestamp, windows)
        else:
            status = self._add_to_windows(key, ks, value, timestamp, windows)
        if status == SKIPPED and self.is_element_late(timestamp):
            status = self._late_element(value, timestamp)
        if not ks.contents and ks.is_empty():
            del self.keys[key]
        return status

    def _add_to_windows(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        status = SKIPPED
        for window in windows:
            if self.is_window_late(window):
                continue
            status = self._added_status(status, window)
            self._add_and_trigger(key, ks, window, window, value, timestamp)
        return status

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """Process a run of elements of one key, in order, under the current watermark.

        The same as :meth:`process_element` for each element (outputs, side outputs and
        counters alike), with the per-element overhead paid once per run: a BATCH run
        hands the engine each key's elements this way. Under :attr:`batch_mode`, tumbling
        windows complete within the run fire at once (see there).
        """
        if self._aligned is None or None in timestamps:
            for value, timestamp in zip(values, timestamps):
                self.process_element(key, value, timestamp)
            return
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        size, slide, _ = self._aligned
        if (
            size == slide
            and len(values) > 1
            and (self.batch_mode or all(map(le, timestamps, islice(timestamps, 1, None))))
        ):
            self._tumbling_sorted_run(key, ks, values, timestamps)
        else:
            self._aligned_run(key, ks, values, timestamps)

    def _tumbling_sorted_run(self, key: Any, ks: KeyState, values: Any, timestamps: Any) -> None:
        """:meth:`_aligned_run` for tumbling windows and timestamps in order: the elements
        of one window are consecutive, so each window is looked up, checked and given its
        timers once, and its elements are folded in one call sequence. The user function
        sees exactly the calls, in the order, of the per-element path. A window that is
        late or due (its end at or before the watermark) goes element by element."""
        size, _, offset = self._aligned  # type: ignore[misc]
        lateness = self.allowed_lateness_ms
        watermark = self.current_watermark
        contents, timers = ks.contents, ks.event_timers
        push, cache = self._event_queue.push, self._window_cache
        aggregate = self.logic.aggregate
        reduce_fn = self.logic.reduce
        create: Any = aggregate.create_accumulator if aggregate is not None else None
        add: Any = aggregate.add if aggregate is not None else None
        complete_fires = self.batch_mode and watermark == LONG_MIN
        plain = self._emits_contents()
        if complete_fires and contents:
            # windows of earlier runs that this run's elements are past fire first, in order
            first = timestamps[0]
            open_windows: list[Any] = list(contents)  # TimeWindows: tumbling
            for done in sorted(w for w in open_windows if w[1] <= first):
                self._fire_complete(key, ks, done, done[1] - 1, plain)
        n, i = len(timestamps), 0
        while i < n:
            first = timestamps[i]
            start = first - (first - offset) % size
            end = start + size
            j = bisect_left(timestamps, end, i)
            max_ts = end - 1
            if max_ts <= watermark:
                self._aligned_run(key, ks, values[i:j], timestamps[i:j])
                i = j
                continue
            window = cache.get(start)
            if window is None:
                window = self._cached_window(start, end)
            current = contents.get(window) if contents else None
            try:
                if aggregate is not None:
                    folded = create() if current is None else current
                    for value in values[i:j]:
                        folded = add(value, folded)
                elif reduce_fn is None:  # a window function over all elements
                    if current is None:
                        folded = list(values[i:j])
                    else:
                        folded = current
                        folded.extend(values[i:j])
                elif current is None:
                    folded = reduce(reduce_fn, values[i:j])
                else:
                    folded = reduce(reduce_fn, values[i:j], current)
            except Exception as exc:
                raise self._user_error("the reduce/aggregate function", key, window, exc) from exc
            i = j
            if complete_fires and j < n:
                # BATCH: this key's later elements are at or after ``end``: complete.
                if plain and current is None:  # no state or timers to clear
                    self._emit_incremental(key, window, folded, max_ts)
                else:
                    contents[window] = folded
                    self._fire_complete(key, ks, window, max_ts, plain)
                continue
            contents[window] = folded
            if current is None:
                if (max_ts, window) not in timers:
                    timers[(max_ts, window)] = push(max_ts, key, window)
                cleanup = max_ts + lateness
                if cleanup != max_ts and cleanup < LONG_MAX and (cleanup, window) not in timers:
                    timers[(cleanup, window)] = push(cleanup, key, window)

    def _emits_contents(self) -> bool:
        """True when a firing emits the window's incremental result itself: no window
        function, tracer or evictor, and no watermark recorded per result."""
        return (
            self.logic.window_function is None
            and self.tracer is None
            and self.output_watermarks is None
            and self.evictor is None
            and self.logic.kind != ELEMENTS
        )

    def _fire_complete(self, key: Any, ks: KeyState, window: Any, max_ts: int, plain: bool) -> None:
        """Fire and clear a window no element can reach any more (BATCH), as the final
        watermark would: functions see that watermark, +inf; its timers are dropped."""
        if plain:
            self._emit_incremental(key, window, ks.contents.pop(window), max_ts)
        else:
            watermark, self.current_watermark = self.current_watermark, LONG_MAX
            try:
                self._fire(key, ks, window, window)
                self._clear_all_state(key, ks, window, window)
            finally:
                self.current_watermark = watermark
        timers = ks.event_timers
        if timers:
            timers.pop((max_ts, window), None)
            timers.pop((self.cleanup_time(window), window), None)

    def _emit_incremental(self, key: Any, window: Any, contents: Any, max_ts: int) -> None:
        """:meth:`_fire` where the firing emits the window's incremental result itself
        (see :meth:`_emits_contents`): a window without contents emits nothing."""
        if contents is None:
            return
        aggregate = self.logic.aggregate
        try:
            result = contents if aggregate is None else aggregate.get_result(contents)
        except Exception as exc:
            raise self._user_error("the window function", key, window, exc) from exc
        self.output.append((result, max_ts))

    def _aligned_run(self, key: Any, ks: KeyState, values: Any, timestamps: Any) -> int:
        """The per-element path of tumbling/sliding event-time windows with Flink's
        default trigger, inlined: the generic path's steps (skip late windows, add,
        EventTimeTrigger.on_element, cleanup timer, late element) without per-call
        indirection, since this is where a keyed tumbling reduce spends its time.
        Returns the last element's status."""
        size, slide, offset = self._aligned  # type: ignore[misc]
        lateness = self.allowed_lateness_ms
        contents, timers, cache = ks.contents, ks.event_timers, self._window_cache
        add, push = self.logic.add, self._event_queue.push
        aggregate = self.logic.aggregate
        # AggregateFunction.add is called directly below: the hottest call of all
        agg_add: Any = aggregate.add if aggregate is not None else None
        create: Any = aggregate.create_accumulator if aggregate is not None else None
        status = SKIPPED
        for value, timestamp in zip(values, timestamps):
            watermark = self.current_watermark
            status = SKIPPED
            start = timestamp - (timestamp - offset) % slide
            while start > timestamp - size:
                window = cache.get(start)
                if window is None:
                    window = self._cached_window(start, start + size)
                start -= slide
                max_ts = window[1] - 1
                cleanup = max_ts + lateness
                if cleanup <= watermark:
                    continue
                current = contents.get(window)
                try:
                    if agg_add is None:
                        contents[window] = add(current, value)
                    else:
                        contents[window] = agg_add(value, create() if current is None else current)
                except Exception as exc:
                    raise self._user_error("the reduce/aggregate function", key, window, exc) from exc
                if max_ts <= watermark:
                    status = ADDED_LATE
                    self._fire(key, ks, window, window)
                else:
                    status = ADDED if status == SKIPPED else status
                    # A window holding contents has both timers pending (neither can have
                    # fired while max_ts > watermark): only a new window registers them.
                    if current is None and (max_ts, window) not in timers:
                        timers[(max_ts, window)] = push(max_ts, key, window)
                if current is None and cleanup != max_ts and cleanup < LONG_MAX:
                    if (cleanup, window) not in timers:
                        timers[(cleanup, window)] = push(cleanup, key, window)
            if status == SKIPPED and timestamp + lateness <= watermark:
                status = self._late_element(value, timestamp)
        return status

    def _cached_window(self, start: int, end: int) -> TimeWindow:
        cache = self._window_cache
        if len(cache) > 4096:
            cache.clear()
        window = cache[start] = TimeWindow(start, end)
        return window

    def _add_to_merging_windows(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        status = SKIPPED
        merging = MergingWindowSet(self.assigner, ks.merging)
        for window in windows:
            actual = merging.add_window(
                window,
                lambda result, merged, state_result, merged_states: self._merge(
                    key, ks, result, merged, state_result, merged_states
                ),
            )
            if self.is_window_late(actual):
                merging.retire_window(actual)
                continue
            state_window = merging.get_state_window(actual)
            if state_window is None:
                raise RuntimeError(f"window {actual!r} has no state window (key={key!r})")
            status = self._added_status(status, actual)
            self._add_and_trigger(key, ks, actual, state_window, value, timestamp)
        return status

    def _added_status(self, status: int, window: Window) -> int:
        if status != ADDED_LATE and window.max_timestamp() <= self.current_watermark:
            return ADDED_LATE if self.is_event_time else ADDED
        return ADDED if status == SKIPPED else status

    def _add_and_trigger(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        contents = ks.contents
        if self.evictor is not None:
            contents.setdefault(state_window, []).append((value, timestamp))
        else:
            try:
                contents[state_window] = self.logic.add(contents.get(state_window), value)
            except Exception as exc:
                raise self._user_error("the reduce/aggregate function", key, window, exc) from exc
        ctx = TriggerCallContext(self, key, ks, window)
        try:
            result = self.trigger.on_element(value, timestamp, window, ctx)
        except Exception as exc:
            raise self._user_error("trigger.on_element", key, window, exc) from exc
        self._apply(key, ks, window, state_window, result)
        self.register_cleanup_timer(key, ks, window)

    def _apply(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, result: Any
    ) -> None:
        if not isinstance(result, TriggerResult):
            raise self._user_error(
                "the trigger", key, window, TypeError(f"returned {result!r}, not a TriggerResult")
            )
        if result.is_fire():
            self._fire(key, ks, window, state_window)
        if result.is_purge():
            ks.contents.pop(state_window, None)

    def _late_element(self, value: Any, timestamp: int | None) -> int:
        if self.late_data_tag is not None:
            assert timestamp is not None
            self.side_outputs.setdefault(self.late_data_tag, []).append((value, timestamp))
            return SIDE_OUTPUT
        self.num_late_records_dropped += 1
        return DROPPED

    # ------------------------------------------------------------------ merging

    def _merge(
        self,
        key: Any,
        ks: KeyState,
        result: Window,
        merged: list[Window],
        state_result: Window,
        merged_states: list[Window],
    ) -> None:
        if self.is_event_time and result.max_timestamp() + self.allowed_lateness_ms <= (
            self.current_watermark
        ):
            raise UnsupportedMergeError(
                "The end timestamp of an event-time window cannot become earlier than the "
                f"current watermark by merging; watermark={self.current_watermark}, "
                f"window={result!r}, key={key!r}"
            )
        if not self.is_event_time and result.max_timestamp() <= self.current_processing_time:
            raise UnsupportedMergeError(
                "The end timestamp of a processing-time window cannot become earlier than the "
                f"current processing time by merging; processing time="
                f"{self.current_processing_time}, window={result!r}, key={key!r}"
            )
        try:
            self.trigger.on_merge(result, TriggerCallContext(self, key, ks, result, merged))
        except Exception as exc:
            raise self._user_error("trigger.on_merge", key, result, exc) from exc
        for window in merged:
            self._clear_trigger(key, ks, window)
            self.delete_cleanup_timer(ks, window)
        contents = ks.contents
        # With an evictor, windows hold element lists whatever the function is.
        merge = _join_lists if self.evictor is not None else self.logic.merge
        for state_window in merged_states:
            source = contents.pop(state_window, None)
            if source is not None:
                try:
                    contents[state_result] = merge(contents.get(state_result), source)
                except Exception as exc:
                    raise self._user_error("the merge function", key, result, exc) from exc

    # ------------------------------------------------------------------ firing

    def _fire(self, key: Any, ks: KeyState, window: Window, state_window: Window) -> None:
        contents = ks.contents.get(state_window)
        if contents is None:
            return
        ctx = ProcessCallContext(self, ks, window) if self.logic.window_function else None
        try:
            if self.evictor is None:
                results = self.logic.evaluate(key, window, ctx, self.logic.inputs(contents))
            else:
                results = self._evict_and_evaluate(key, ks, window, state_window, contents, ctx)
        except UserFunctionError:
            raise
        except Exception as exc:
            raise self._user_error("the window function", key, window, exc) from exc
        timestamp = window.max_timestamp()
        self.output.extend([(result, timestamp) for result in results])
        if self.output_watermarks is not None:
            self.output_watermarks.extend([self.current_watermark] * len(results))
        if self.tracer is not None:
            self.tracer.fired(key, window, self.current_watermark, results)

    def _evict_and_evaluate(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        contents: list[tuple[Any, int | None]],
        ctx: ProcessCallContext | None,
    ) -> list[Any]:
        assert self.evictor is not None
        elements = [TimestampedValue(value, ts) for value, ts in contents]
        self.evictor.evict_before(elements, len(elements), window, self._clock)
        results = self.logic.evaluate(
            key, window, ctx, self.logic.fold([e.value for e in elements])
        )
        self.evictor.evict_after(elements, len(elements), window, self._clock)
        if elements:
            ks.contents[state_window] = [(e.value, e.timestamp) for e in elements]
        else:
            ks.contents.pop(state_window, None)
        return results

    def emit_side_output(self, tag: OutputTag, value: Any, timestamp: int) -> None:
        """Record ``value`` on the side output ``tag`` (from a process window function)."""
        self.side_outputs.setdefault(tag, []).append((value, timestamp))

    # ------------------------------------------------------------------ time

    def process_watermark(self, watermark: int) -> None:
        """Advance event time to ``watermark`` and fire every event-time timer it reaches."""
        self.current_watermark = watermark
        if self._aligned is not None:
            self._fire_aligned_timers(watermark)
            return
        while True:
            due = self._event_queue.pop_due(watermark, self._take_event_timer)
            if due is None:
                return
            time, key, window = due
            self._on_timer(key, time, window, event_time=True)

    def _fire_aligned_timers(self, watermark: int) -> None:
        """:meth:`process_watermark`'s timer loop for tumbling/sliding windows with the
        default trigger, inlined (the steps of :meth:`_on_timer`): every event-time timer
        is a window's end, which fires it, or its cleanup time, which clears it, and
        firing registers no new timer. So when all timers are due (a BATCH key's end) they
        are taken in one sort, in the heap's (time, registration) order."""
        heap = self._event_queue.heap
        keys, lateness = self.keys, self.allowed_lateness_ms
        if watermark == LONG_MAX:
            due: Any = sorted(heap)
            heap.clear()
        else:
            due = iter(lambda: heappop(heap) if heap and heap[0][0] <= watermark else None, None)
        # Without a window function, tracer or evictor a firing emits the window's
        # incremental result itself (as _fire does), and clearing needs no callback.
        plain = self._emits_contents()
        for time, _, key, window in due:
            ks = keys.get(key)
            if ks is None or ks.event_timers.pop((time, window), None) is None:
                continue
            max_ts = window[1] - 1
            cleanup = max_ts + lateness
            cleans = time == (cleanup if cleanup < LONG_MAX else LONG_MAX)
            if not plain:
                if time == max_ts:
                    self._fire(key, ks, window, window)
                if cleans:
                    self._clear_all_state(key, ks, window, window)
            else:
                if time == max_ts:
                    self._emit_incremental(key, window, ks.contents.get(window), max_ts)
                if cleans:
                    ks.contents.pop(window, None)
                    ks.event_timers.pop((max_ts, window), None)
            if not ks.contents and not ks.event_timers and ks.is_empty():
                del keys[key]

    def advance_watermark_stepwise(self, watermark: int, resolve: Callable[[int], int]) -> None:
        """Advance to ``watermark`` through the watermarks a recorded stream really had.

        ``resolve(t)`` is the first watermark of the stream that is ``>= t``; every due
        timer fires at the watermark that first reached it, as it did in the stream.
        """
        while True:
            time = self._event_queue.peek_time()
            if time is None or time > watermark:
                break
            step = min(max(resolve(time), time), watermark)
            self.process_watermark(max(step, self.current_watermark))
        self.process_watermark(max(watermark, self.current_watermark))

    def advance_processing_time_stepwise(self, time: int) -> None:
        """Advance the clock to ``time``, firing each due timer at its own time."""
        while True:
            due = self._processing_queue.peek_time()
            if due is None or due > time:
                break
            self.advance_processing_time(max(due, self.current_processing_time))
        self.advance_processing_time(max(time, self.current_processing_time))

    def reset_clocks(self, watermark: int = LONG_MIN, processing_time: int = 0) -> None:
        """Set both clocks without firing anything (a new key in a BATCH run)."""
        self.current_watermark = watermark
        self.current_processing_time = processing_time

    def advance_processing_time(self, time: int) -> None:
        """Set the processing-time clock and fire every processing-time timer it reaches."""
        self.current_processing_time = time
        while True:
            due = self._processing_queue.pop_due(time, self._take_processing_timer)
            if due is None:
                return
            timer_time, key, window = due
            self._on_timer(key, timer_time, window, event_time=False)

    def _take_event_timer(self, key: Any, time: int, window: Window) -> bool:
        ks = self.keys.get(key)
        if ks is None or ks.event_timers.pop((time, window), None) is None:
            return False
        return True

    def _take_processing_timer(self, key: Any, time: int, window: Window) -> bool:
        ks = self.keys.get(key)
        if ks is None or ks.processing_timers.pop((time, window), None) is None:
            return False
        return True

    def _on_timer(self, key: Any, time: int, window: Window, *, event_time: bool) -> None:
        ks = self.keys[key]
        state_window: Window | None = window
        if self.is_merging:
            state_window = ks.merging.get(window)
            if state_window is None:
                self._forget_if_empty(key, ks)
                return
        assert state_window is not None
        if self._aligned is not None and event_time:
            # EventTimeTrigger.on_event_time, inlined: FIRE at the window's end.
            if time == window.max_timestamp():
                self._fire(key, ks, window, state_window)
        else:
            ctx = TriggerCallContext(self, key, ks, window)
            try:
                if event_time:
                    result = self.trigger.on_event_time(time, window, ctx)
                else:
                    result = self.trigger.on_processing_time(time, window, ctx)
            except Exception as exc:
                raise self._user_error("the trigger's timer callback", key, window, exc) from exc
            self._apply(key, ks, window, state_window, result)
        if self.is_event_time == event_time and time == self.cleanup_time(window):
            self._clear_all_state(key, ks, window, state_window)
        self._forget_if_empty(key, ks)

    def _clear_all_state(self, key: Any, ks: KeyState, window: Window, state_window: Window) -> None:
        ks.contents.pop(state_window, None)
        if self._aligned is not None:  # EventTimeTrigger.clear, inlined
            ks.event_timers.pop((window.max_timestamp(), window), None)
        else:
            self._clear_trigger(key, ks, window)
        if self.logic.has_clear:
            try:
                self.logic.clear(ProcessCallContext(self, ks, window))
            except Exception as exc:
                raise self._user_error("the window function's clear", key, window, exc) from exc
        ks.window_state.pop(window, None)
        if self.is_merging:
            ks.merging.pop(window, None)

    def _clear_trigger(self, key: Any, ks: KeyState, window: Window) -> None:
        try:
            self.trigger.clear(window, TriggerCallContext(self, key, ks, window))
        except Exception as exc:
            raise self._user_error("trigger.clear", key, window, exc) from exc
        if not ks.trigger_state.get(window, True):
            del ks.trigger_state[window]

    def _forget_if_empty(self, key: Any, ks: KeyState) -> None:
        if ks.is_empty():
            del self.keys[key]

    # ------------------------------------------------------------------ helpers

    def cleanup_time(self, window: Window) -> int:
        """When ``window``'s state goes: its end plus the allowed lateness (event time)."""
        if self.is_event_time:
            time = window.max_timestamp() + self.allowed_lateness_ms
            return time if time <= LONG_MAX else LONG_MAX
        return window.max_timestamp()

    def is_window_late(self, window: Window) -> bool:
        return self.is_event_time and self.cleanup_time(window) <= self.current_watermark

    def is_element_late(self, timestamp: int | None) -> bool:
        return (
            self.is_event_time
            and timestamp is not None
            and timestamp + self.allowed_lateness_ms <= self.current_watermark
        )

    def register_cleanup_timer(self, key: Any, ks: KeyState, window: Window) -> None:
        time = self.cleanup_time(window)
        if time == LONG_MAX:
            return
        if self.is_event_time:
            self.register_event_time_timer(key, ks, time, window)
        else:
            self.register_processing_time_timer(key, ks, time, window)

    def delete_cleanup_timer(self, ks: KeyState, window: Window) -> None:
        time = self.cleanup_time(window)
        if time == LONG_MAX:
            return
        timers = ks.event_timers if self.is_event_time else ks.processing_timers
        timers.pop((time, window), None)

    def register_event_time_timer(self, key: Any, ks: KeyState, time: int, window: Window) -> None:
        timer = (time, window)
        if timer not in ks.event_timers:
            ks.event_timers[timer] = self._event_queue.push(time, key, window)

    def register_processing_time_timer(
        self, key: Any, ks: KeyState, time: int, window: Window
    ) -> None:
        timer = (time, window)
        if timer not in ks.processing_timers:
            ks.processing_timers[timer] = self._processing_queue.push(time, key, window)

    def _user_error(self, what: str, key: Any, window: Any, exc: Exception) -> UserFunctionError:
        return UserFunctionError(what, key, window, self.current_watermark, exc)

    # ------------------------------------------------------------------ inspection

    def num_keyed_state_entries(self) -> int:
        """Window contents, trigger state, merging sets and function state left."""
        return sum(ks.num_state_entries() for ks in self.keys.values())

    def num_event_time_timers(self) -> int:
        return sum(len(ks.event_timers) for ks in self.keys.values())

    def num_processing_time_timers(self) -> int:
        return sum(len(ks.processing_timers) for ks in self.keys.values())

    # ------------------------------------------------------------------ snapshots

    def snapshot_key(self, key: Any) -> KeyState | None:
        """The state of ``key`` (None when it has none), e.g. to store it elsewhere."""
        return self.keys.get(key)

    def restore_key(self, key: Any, ks: KeyState) -> None:
        """Install ``ks`` as the state of ``key`` and queue its timers (in the order
        they were first registered, so equal-time timers fire as they would have)."""
        self.keys[key] = ks
        for (time, window), seq in ks.event_timers.items():
            self._event_queue.push(time, key, window, seq)
        for (time, window), seq in ks.processing_timers.items():
            self._processing_queue.push(time, key, window, seq)

    def forget_all_keys(self) -> None:
        """Drop every key's state and every queued timer (before a restore)."""
        self.keys.clear()
        self._event_queue.clear()
        self._processing_queue.clear()

    def evict_key(self, key: Any) -> KeyState | None:
        """Remove ``key``'s state from memory and return it (its queued timers go stale)."""
        return self.keys.pop(key, None)
