"""The aligned path: the general path, but faster for tumbling and sliding event-time
windows whose trigger fires only at the window end, without an evictor.

Such a trigger promises :class:`~tidemark.triggers.EventTimeTrigger`'s behaviour
(``Trigger.fires_only_at_window_end``): register a timer at the window's end, FIRE there,
FIRE at once for an element added after it, no state. This path does exactly that
without calling the trigger (its driver,
:class:`~tidemark._engine.triggering.EndOfWindowTrigger`, clears without a call),
computes windows from the assigner's :class:`~tidemark.windows.AlignedLayout` instead of
calling it, and takes due timers in bulk; where a pipeline is this shape, a keyed
tumbling reduce spends its time here. For tumbling windows the per-element callable is
specialised once per operator (a closure with what it reads bound), and serves elements
whose window is neither late nor due. The results, side outputs, counts, watermarks seen
and state left are the general path's (the property tests run both and compare).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import islice
from operator import le
from typing import Any

from tidemark._engine.contract import ElementPath, OperatorCore, RunPath
from tidemark._engine.functions import ReturnedNone
from tidemark._engine.keystate import KeyState
from tidemark._engine.paths import WindowPath
from tidemark._engine.status import ADDED, ADDED_LATE, SKIPPED
from tidemark._engine.triggering import EndOfWindowTrigger
from tidemark.time import LONG_MAX, LONG_MIN
from tidemark.windows import AlignedLayout, TimeWindow

__all__ = ["AlignedPath"]

_CACHED_WINDOWS = 4096
# Runs at least this long, in timestamp order, are folded a window at a time.
_FOLDED_RUN = 16


def _in_order(timestamps: list[Any]) -> bool:
    return all(map(le, timestamps, islice(timestamps, 1, None)))


class AlignedPath(WindowPath):
    """:class:`~tidemark._engine.paths.WindowPath`, but faster for aligned event-time
    windows.

    Parameters
    ----------
    layout : AlignedLayout
        Where the windows are (the pipeline's ``aligned_layout()``).
    """

    trigger_driver = EndOfWindowTrigger

    def __init__(self, layout: AlignedLayout):
        self._layout = layout
        # start -> (window, cleanup time): each window object and its cleanup time are
        # made once, not once per element.
        self._window_cache: dict[int, tuple[TimeWindow, int]] = {}
        # Every event-time timer is a window's end or cleanup time: taken here, in bulk.
        self.on_event_timer = self._on_due_timer

    def bind(self, op: OperatorCore) -> tuple[ElementPath, RunPath]:
        self.op = op
        self._batch_mode = op.spec.batch_mode
        self._keys = op.keys
        # A firing emits the window's incremental result itself: no window function,
        # tracer, evictor or recorded watermark, and the window keeps an accumulator.
        self._plain = (
            op.logic.window_function is None
            and op.tracer is None
            and op.output_watermarks is None
            and not op.logic.keeps_elements
        )
        # The logic's add, and AggregateFunction's own add and create_accumulator (called
        # directly, per element and window: the hottest calls of all), bound once.
        self._adders: tuple[Any, Any, Any] = op.logic.adders()
        # Tumbling windows: the per-element callable, specialised once.
        self._tumbling_element: Any = None
        if self._layout.size_ms == self._layout.slide_ms:
            self._tumbling_element = _tumbling_element_path(self)
            return self._tumbling_element, self.process_elements
        return self.process_element, self.process_elements

    # ------------------------------------------------------------------ elements

    def process_element(self, key: Any, value: Any, timestamp: int | None) -> int:
        """One element through :meth:`_aligned_run` (the general path without a
        timestamp; for tumbling windows the specialised callable serves first, and
        hands this what it does not serve)."""
        if timestamp is None:
            return self.op.assign_and_add(key, value, timestamp)
        ks = self._keys.get(key)
        if ks is None:
            ks = self._keys[key] = KeyState()
        status = self._aligned_run(key, ks, (value,), (timestamp,))
        if not ks.contents and ks.is_empty():  # nothing kept: as the general path
            del self._keys[key]
        return status

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """A run of ``key``'s elements, with the per-element overhead paid once per run.
        Tumbling windows of a run in timestamp order are folded a window at a time
        (under ``spec.batch_mode`` those complete within the run fire at once); outside
        BATCH, a short run or one out of order takes the tumbling element path element
        by element, which costs less than a run's set-up."""
        tumbling_element = self._tumbling_element
        if tumbling_element is not None and not self._batch_mode:
            if len(values) < _FOLDED_RUN or None in timestamps:
                for value, timestamp in zip(values, timestamps):
                    tumbling_element(key, value, timestamp)
                return
            if not _in_order(timestamps):
                self._tumbling_stretches(key, tumbling_element, values, timestamps)
                return
        op = self.op
        if None in timestamps:
            op.run_element_by_element(key, values, timestamps)
            return
        ks = op.key_state(key)
        if (
            tumbling_element is not None
            and len(values) > 1
            and (self._batch_mode or _in_order(timestamps))
        ):
            self._tumbling_sorted_run(key, ks, values, timestamps)
        else:
            self._aligned_run(key, ks, values, timestamps)
        if not ks.contents and ks.is_empty():
            del self._keys[key]

    def _window(self, start: int) -> tuple[TimeWindow, int]:
        """The window starting at ``start`` and its cleanup time, cached."""
        entry = self._window_cache.get(start)
        if entry is None:
            cache = self._window_cache
            if len(cache) > _CACHED_WINDOWS:
                cache.clear()
            window = TimeWindow(start, start + self._layout.size_ms)
            entry = cache[start] = (window, self.op.cleanup_time(window))
        return entry

    def _aligned_run(self, key: Any, ks: KeyState, values: Any, timestamps: Any) -> int:
        """The general per-element path (skip late windows, add, the trigger's
        on_element, cleanup timer, late element) without per-call indirection. Returns
        the last element's status."""
        op = self.op
        size, slide, offset = self._layout
        contents, cache = ks.contents, self._window_cache
        add, agg_add, create = self._adders
        register_window = op.event_time_timers.register_window
        # No element moves the watermark: read once per run.
        watermark = op.event_time_timers.current_time
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
                try:  # WindowLogic.add, inlined: the user's own function, called directly
                    if agg_add is None:
                        contents[window] = add(current, value)
                    elif (acc := agg_add(value, create() if current is None else current)) is None:
                        raise ReturnedNone("returned None")
                    else:
                        contents[window] = acc
                except Exception as exc:
                    raise op.fold_error(key, window, exc) from exc
                max_ts = window[1] - 1
                if max_ts <= watermark:  # on_element: FIRE at once
                    status = ADDED_LATE
                    self.fire(key, ks, window, watermark)
                    if current is None:  # its cleanup timer (after the watermark)
                        register_window(key, ks, window, None, cleanup)
                else:
                    status = ADDED if status == SKIPPED else status
                    # A window holding contents has both timers pending (neither can have
                    # fired while max_ts > watermark): only a new window registers them.
                    if current is None:
                        register_window(key, ks, window, max_ts, cleanup)
            if status == SKIPPED and op.is_element_late(timestamp):
                status = op.late_element(value, timestamp)
        return status

    def _tumbling_sorted_run(self, key: Any, ks: KeyState, values: Any, timestamps: Any) -> None:
        """:meth:`_aligned_run` for tumbling windows and timestamps in order: the elements
        of one window are consecutive, so each window is looked up, checked and given its
        timers once, and its elements are folded in one call sequence. The user function
        sees exactly the calls, in the order, of the per-element path. A window that is
        late or due (its end at or before the watermark) goes element by element."""
        op = self.op
        watermark = op.current_watermark
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
            folded = op.fold(key, window, current, values[i:j])
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
                op.event_time_timers.register_window(key, ks, window, max_ts, cleanup)

    def _tumbling_stretches(
        self, key: Any, element: Any, values: list[Any], timestamps: list[Any]
    ) -> None:
        """A run out of timestamp order outside BATCH, tumbling windows (a stream's
        micro-batch: bounded disorder, so long stretches of consecutive elements fall
        in one window): each stretch is looked up, checked and folded once, stretch
        after stretch in the run's order, so the user's function sees exactly the
        per-element path's calls. A window late or due goes element by element (the
        general path), and so does a run whose windows alternate too often to pay."""
        size, _, offset = self._layout
        ends, start = [], None
        for at, timestamp in enumerate(timestamps):
            first = timestamp - (timestamp - offset) % size
            if first != start:
                ends.append(at)
                start = first
        if len(ends) * _FOLDED_RUN > len(timestamps):
            for value, timestamp in zip(values, timestamps):
                element(key, value, timestamp)
            return
        op = self.op
        ks = op.key_state(key)
        watermark, contents = op.current_watermark, ks.contents
        ends.append(len(timestamps))
        for i, j in zip(ends, islice(ends, 1, None)):
            window, cleanup = self._window(timestamps[i] - (timestamps[i] - offset) % size)
            if window[1] - 1 <= watermark:
                self._aligned_run(key, ks, values[i:j], timestamps[i:j])
                continue
            current = contents.get(window)
            contents[window] = op.fold(key, window, current, values[i:j])
            if current is None:
                op.event_time_timers.register_window(key, ks, window, window[1] - 1, cleanup)
        if not ks.contents and ks.is_empty():
            del self._keys[key]

    def _open_window(
        self, key: Any, ks: KeyState, window: TimeWindow, cleanup: int, value: Any
    ) -> int:
        """Add ``value`` to ``window``, new to ``key``, whose end is after the watermark,
        and register the window's timers; ADDED."""
        op = self.op
        ks.contents[window] = op.fold(key, window, None, (value,))
        op.event_time_timers.register_window(key, ks, window, window[1] - 1, cleanup)
        return ADDED

    # ------------------------------------------------------------------ firing

    def fire(self, key: Any, ks: KeyState, window: Any, watermark: int) -> None:
        """FIRE ``window`` (its contents stored under it) seen at ``watermark``."""
        self.op.fire(key, ks, window, window, watermark)

    def _fire_complete(self, key: Any, ks: KeyState, window: Any) -> None:
        """Fire and clear a window no element can reach any more (BATCH), as the final
        watermark would: functions see that watermark, +inf; its timers are dropped."""
        op = self.op
        if self._plain:
            self._emit_incremental(key, window, ks.contents.pop(window), window[1] - 1)
        else:
            op.fire(key, ks, window, window, LONG_MAX)
            op.clear_all_state(key, ks, window, window, LONG_MAX)
        if ks.event_timers:
            service = op.event_time_timers
            service.delete(ks, window.max_timestamp(), window)
            service.delete(ks, op.cleanup_time(window), window)

    def _emit_incremental(self, key: Any, window: Any, contents: Any, max_ts: int) -> None:
        """A firing that emits the window's incremental result itself (``_plain``): a
        window without contents emits nothing."""
        if contents is None:
            return
        op = self.op
        aggregate = op.logic.aggregate
        try:
            result = contents if aggregate is None else aggregate.get_result(contents)
        except Exception as exc:
            raise op.user_error("the window function", key, window, exc) from exc
        op.output.append((result, max_ts))

    # ------------------------------------------------------------------ time

    def _on_due_timer(self, domain: Any, key: Any, time: int, window: Any) -> None:
        """A due timer ``(time, key, window)`` (live: the service took it): at the
        window's end FIRE (the trigger's on_event_time), at its cleanup time clear it."""
        op = self.op
        ks = self._keys[key]
        watermark = op.event_time_timers.current_time
        timers, contents = ks.event_timers, ks.contents
        max_ts = window[1] - 1
        entry = self._window_cache.get(window[0])
        cleans = time == (entry[1] if entry is not None else op.cleanup_time(window))
        if not self._plain:
            if time == max_ts:
                self.fire(key, ks, window, watermark)
            if cleans:
                op.clear_all_state(key, ks, window, window, watermark)
        elif time == max_ts:  # emit; at the cleanup time too, the contents go
            result = contents.pop(window, None) if cleans else contents.get(window)
            if result is not None and op.logic.aggregate is None:
                op.output.append((result, max_ts))
            elif result is not None:
                self._emit_incremental(key, window, result, max_ts)
        elif cleans:  # nothing but the contents and the end timer to clear
            contents.pop(window, None)
            timers.pop((max_ts, window), None)
        if not contents and not timers and ks.is_empty():
            del self._keys[key]


def _tumbling_element_path(path: AlignedPath) -> Any:
    """``process_element`` for tumbling windows, with what it reads bound once.

    It serves an element whose window is neither late nor due (its end after the
    watermark; its cleanup time, at or after its end, too): the element is added and,
    for a window new to the key, the window's end timer (the trigger's on_element) and
    cleanup timer are registered; a window that already holds contents has both (no
    timer of a window whose end is after the watermark has fired). The result is
    ADDED, as the general path's. Every other element (late, due, no timestamp) goes
    to :meth:`AlignedPath.process_element`.
    """
    op = path.op
    size, _, offset = path._layout
    last_ms = size - 1  # a window's max timestamp, from its start
    keys, cache, clock, window_of = op.keys, path._window_cache, op.event_time_timers, path._window
    add, agg_add, _ = path._adders
    step = op.logic.reduce if op.logic.reduce is not None else add  # (contents, value)
    new_window, general, fold_error = path._open_window, path.process_element, op.fold_error

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
                try:  # WindowLogic.add, inlined: the user's own function, called directly
                    result = step(current, value) if agg_add is None else agg_add(value, current)
                    if result is None:
                        raise ReturnedNone("returned None")
                    contents[window] = result
                except Exception as exc:
                    raise fold_error(key, window, exc) from exc
                return ADDED
        else:
            ks = keys[key] = KeyState()
        return new_window(key, ks, window, entry[1], value)

    return process_element
