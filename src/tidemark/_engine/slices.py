"""The sliced path: the aligned path, but for sliding windows each element is stored
once, in its slice, instead of once per window (as Flink SQL slices windows): the same
placement and due windows, another way of storing a window's contents.

A sliding layout of ``size`` every ``slide`` cuts event time into slices of
``gcd(size, slide)`` aligned to the offset; every window is the union of the
``size / gcd`` slices it covers, and each element lies in exactly one slice. A key's
slices live in its :class:`~tidemark._engine.keystate.KeyState` next to the windows,
``contents[slice_start] = runs`` (an int key, where windows are
:class:`~tidemark.windows.TimeWindow` keys), so they pickle with it.

A slice holds *runs*, ``[seq_1, contents_1, seq_2, contents_2, ...]``: the elements of a
run arrived one after another for the key (no element of another slice in between), and
``contents_i`` is what the window logic keeps for them (a reduced value, an accumulator,
or the elements). A window's contents are its slices' runs merged in arrival order
(``seq``), so a process function sees the elements in the order they arrived, and a
reduce / aggregate result combines partial results in that order: the same as Flink
DataStream's, given the law every merge already obeys (``merge(fold(A), fold(B)) ==
fold(A + B)``; floating-point sums may differ in the last bits). In-order data makes one
run per slice.

Everything else is the aligned path's: each window keeps its end and cleanup timers
(registered when its first element arrives, in the same order), fires when they are
due, and at cleanup clears its trigger and function state; a slice goes when the last
window holding it is cleaned up. Observables are the general operator's (the fast-path
property tests compare them); ``num_keyed_state_entries`` counts windows as Flink's
harness does, one per window holding contents, not slices.

A window's slices are merged when it fires, so a sliding window calls the user's
``AggregateFunction.merge`` (or the reduce on two partial results) where the unsliced
operators never did; an aggregate function without ``merge`` is not sliced.

A key restored from state written by the unsliced operators (window contents under
window keys) is served per window until those windows are gone; state written here
restores on the unsliced operators (fast paths turned off), which turn its slices into
window contents (:func:`unslice`).
"""

from __future__ import annotations

from math import gcd
from typing import Any, cast

from tidemark._engine.aligned import AlignedPath
from tidemark._engine.contract import ElementPath, OperatorCore, RunPath
from tidemark._engine.functions import AggregateLogic, ElementsLogic, ReduceLogic, WindowLogic
from tidemark._engine.keystate import KeyState
from tidemark._engine.slice_runs import in_arrival_order, merge_runs
from tidemark._engine.spec import OperatorSpec
from tidemark._engine.status import ADDED, ADDED_LATE, SKIPPED
from tidemark.errors import UserFunctionError
from tidemark.functions import AggregateFunction
from tidemark.time import LONG_MAX
from tidemark.windows import AlignedLayout, TimeWindow

__all__ = ["SlicedPath", "slices_serve", "merge_runs"]

# Slice places looked up one by one at most (else picked from a key's entries).
_PROBES = 16


def slices_serve(spec: OperatorSpec, layout: AlignedLayout, tracer: Any = None) -> bool:
    """Whether :class:`SlicedPath` serves a pipeline the aligned path serves with
    ``layout``: sliding windows (not tumbling), no tracer (a trace draws each window's
    contents), and a window logic whose contents merge: elements (exact), or, where
    ``spec.slice_incremental`` allows it, a reduce or an aggregate function with
    ``merge`` (called where Flink does not: floating-point sums may differ in their
    last bits)."""
    if layout.size_ms == layout.slide_ms or tracer is not None:
        return False
    logic = spec.logic
    if isinstance(logic, ElementsLogic):
        return True
    return spec.slice_incremental and _merges(logic)


def _merges(logic: WindowLogic) -> bool:
    if isinstance(logic, ReduceLogic):
        return True
    if not isinstance(logic, AggregateLogic):
        return False
    merge = getattr(type(logic.aggregate), "merge", None)
    return merge is not None and merge is not AggregateFunction.merge


class SlicedPath(AlignedPath):
    """:class:`~tidemark._engine.aligned.AlignedPath`, but each element of a sliding
    window is stored once, in its slice (see the module's docstring).

    Parameters
    ----------
    layout : AlignedLayout
        Where the windows are (a pipeline :func:`slices_serve` accepts).
    """

    def __init__(self, layout: AlignedLayout):
        super().__init__(layout)
        self._slice_ms = gcd(layout.size_ms, layout.slide_ms)
        # The last arrival number given to a run (any key's: only a key's own runs are
        # compared); a restored key's runs move it past theirs.
        self._arrival = 0
        # key -> the slice its last element went to: that slice's last run continues.
        # Forgotten whenever a key's state is replaced or leaves memory.
        self._last_slice: dict[Any, int] = {}
        # Keys restored with window contents of the unsliced paths.
        self._per_window: set[Any] = set()

    def bind(self, op: OperatorCore) -> tuple[ElementPath, RunPath]:
        bound = super().bind(op)
        self._lateness_ms = op.allowed_lateness_ms
        return bound

    # ------------------------------------------------------------------ elements

    def _aligned_run(self, key: Any, ks: KeyState, values: Any, timestamps: Any) -> int:
        """Each element into its slice, then the windows a new slice opens (their timers)
        and the windows due (a late firing) as the aligned path handles them."""
        if self._per_window and key in self._per_window and self._holds_windows(key, ks):
            return super()._aligned_run(key, ks, values, timestamps)
        size, slide, offset = self._layout
        width, contents, last_slice = self._slice_ms, ks.contents, self._last_slice
        add = self.op.logic.add
        op = self.op
        watermark = op.event_time_timers.current_time
        # the latest window start whose cleanup time is at or before the watermark: an
        # element whose latest window starts there is in no window that is not late
        late_to = LONG_MAX if watermark == LONG_MAX else watermark - size + 1 - self._lateness_ms
        status, last = SKIPPED, 0
        try:
            for value, timestamp in zip(values, timestamps):
                last = timestamp - (timestamp - offset) % slide
                if last <= late_to:
                    late = op.is_element_late(timestamp)
                    status = op.late_element(value, timestamp) if late else SKIPPED
                    continue
                start = last if width == slide else timestamp - (timestamp - offset) % width
                runs = contents.get(start)
                previous = last_slice.get(key)
                if runs is not None and previous == start:  # the run goes on
                    runs[-1] = add(runs[-1], value)
                    if timestamp > watermark:  # in no window that is due
                        status = ADDED
                        continue
                else:
                    self._arrival += 1
                    added = add(None, value)
                    if runs is None:
                        contents[start] = [self._arrival, added]
                    else:
                        runs += (self._arrival, added)
                    last_slice[key] = start
                status = self._added(key, ks, timestamp, last, runs is None, previous, watermark)
        except UserFunctionError:
            raise
        except Exception as exc:
            raise op.fold_error(key, self._window(last)[0], exc) from exc
        return status

    def _added(
        self,
        key: Any,
        ks: KeyState,
        timestamp: int,
        last: int,
        new_slice: bool,
        previous: int | None,
        watermark: int,
    ) -> int:
        """After an element at ``timestamp`` went into its slice: FIRE the windows due,
        register the timers of the windows a new slice opens. Returns the status."""
        size, slide, offset = self._layout
        first = last - (last - timestamp + size - 1) // slide * slide
        if first + size - 1 <= watermark:  # a window is due
            return self._windows_of_element(key, ks, last, first, watermark)
        if new_slice:  # the windows it shares with the previous slice are not new
            if previous is not None and first <= previous < timestamp and previous in ks.contents:
                first = previous - (previous - offset) % slide + slide
            self._windows_of_element(key, ks, last, first, watermark)
        return ADDED

    def _windows_of_element(
        self, key: Any, ks: KeyState, last: int, first: int, watermark: int
    ) -> int:
        """The trigger's on_element and the cleanup timer for the windows starting from
        ``last`` down to ``first`` (an element just went into their slice): skip late
        windows, FIRE those due, register the timers of new ones. Returns the status."""
        register_window = self.op.event_time_timers.register_window
        slide, status, cache = self._layout.slide_ms, SKIPPED, self._window_cache
        start = last
        while start >= first:
            entry = cache.get(start)
            window, cleanup = entry if entry is not None else self._window(start)
            start -= slide
            if cleanup <= watermark:  # is_window_late
                continue
            max_ts = window[1] - 1
            if max_ts <= watermark:
                status = ADDED_LATE
                self.fire(key, ks, window, watermark)
                register_window(key, ks, window, None, cleanup)
            else:
                status = ADDED if status == SKIPPED else status
                register_window(key, ks, window, max_ts, cleanup)
        return status

    def _holds_windows(self, key: Any, ks: KeyState) -> bool:
        """Whether a restored key still keeps window contents (else it is sliced now)."""
        if any(isinstance(state, TimeWindow) for state in ks.contents):
            return True
        self._per_window.discard(key)
        return False

    # ------------------------------------------------------------------ windows

    def _slices_in(self, ks: KeyState, begin: int, end: int) -> list[Any]:
        """The slices (their runs) of ``ks`` within ``[begin, end)``, in time order:
        looked up one by one, or, where there are many more slice places than entries
        (a slide far below the size), picked from the entries."""
        contents: dict[Any, Any] = ks.contents
        width = self._slice_ms
        if (end - begin) // width <= _PROBES or (end - begin) // width <= len(contents):
            get = contents.get
            return [runs for runs in map(get, range(begin, end, width)) if runs is not None]
        starts = sorted(s for s in contents if not isinstance(s, TimeWindow) and begin <= s < end)
        return [contents[start] for start in starts]

    def _window_contents(self, key: Any, ks: KeyState, window: Any) -> Any:
        """What ``window`` holds: its own contents (a restored key's), else its slices'
        runs merged in arrival order; None when it holds nothing."""
        contents: dict[Any, Any] = ks.contents
        if self._per_window and key in self._per_window:
            own = contents.get(window)
            if own is not None:
                return own
        begin, end = window
        if (end - begin) // self._slice_ms > max(_PROBES, len(contents)):
            parts = in_arrival_order(self._slices_in(ks, begin, end))
        else:
            # one run per slice, in time order, is arrival order (in-order data)
            get, parts, seq = contents.get, [], 0
            for start in range(begin, end, self._slice_ms):
                runs = get(start)
                if runs is not None:
                    if len(runs) != 2 or runs[0] < seq:
                        parts = in_arrival_order(self._slices_in(ks, begin, end))
                        break
                    seq = runs[0]
                    parts.append(runs[1])
        if len(parts) < 2:
            if not parts:
                return None
            return list(parts[0]) if self.op.logic.keeps_elements else parts[0]
        try:
            return merge_runs(self.op.logic, parts)
        except Exception as exc:
            raise self.op.merge_error(key, window, exc) from exc

    def fire(self, key: Any, ks: KeyState, window: Any, watermark: int) -> None:
        """:meth:`AlignedPath.fire` on the window's merged slices."""
        contents = self._window_contents(key, ks, window)
        if contents is None:
            return
        if self._plain:
            self._emit_incremental(key, window, contents, window[1] - 1)
            return
        self.op.fire_contents(key, ks, window, window, contents, watermark)

    def _drop_slices(self, ks: KeyState, window: Any) -> None:
        """Remove the slices whose last window is ``window`` (it is being cleaned up):
        those in its first ``slide``."""
        contents: dict[Any, Any] = ks.contents
        begin, width = window[0], self._slice_ms
        end = begin + self._layout.slide_ms
        if (end - begin) // width <= _PROBES or (end - begin) // width <= len(contents):
            pop = contents.pop
            for start in range(begin, end, width):
                pop(start, None)
            return
        for start in [s for s in contents if not isinstance(s, TimeWindow) and begin <= s < end]:
            del contents[start]

    # ------------------------------------------------------------------ time

    def _on_due_timer(self, domain: Any, key: Any, time: int, window: Any) -> None:
        """:meth:`AlignedPath._on_due_timer`: a window's end fires its merged slices,
        its cleanup time clears the window and the slices no later window holds."""
        op = self.op
        ks = self._keys[key]
        watermark = op.event_time_timers.current_time
        max_ts = window[1] - 1
        if time == max_ts:  # the trigger's on_event_time (fires_at_end): FIRE
            if self._plain:
                contents = self._window_contents(key, ks, window)
                if contents is not None:
                    self._emit_incremental(key, window, contents, max_ts)
            else:
                self.fire(key, ks, window, watermark)
        entry = self._window_cache.get(window[0])
        if time == (entry[1] if entry is not None else op.cleanup_time(window)):
            if self._plain:  # nothing but the contents and the end timer to clear
                ks.contents.pop(window, None)
                ks.event_timers.pop((max_ts, window), None)
            else:
                op.clear_all_state(key, ks, window, window, watermark)
            # a slice per slide: the slice a window's cleanup drops starts where it starts
            if self._layout.slide_ms == self._slice_ms:
                ks.contents.pop(window[0], None)
            else:
                self._drop_slices(ks, window)
        if not ks.contents and not ks.event_timers and ks.is_empty():
            del self._keys[key]

    # ------------------------------------------------------------------ state

    def restored(self, key: Any, ks: KeyState) -> None:
        """``ks`` is restored as ``key``'s state, as stored: the key's last run (the one
        made last: its last element went there) goes on, and later runs are numbered
        after it; window contents of the unsliced paths are served per window."""
        self._last_slice.pop(key, None)
        newest, contents = 0, cast("dict[Any, Any]", ks.contents)
        for state, runs in contents.items():
            if isinstance(state, TimeWindow):
                self._per_window.add(key)
            elif runs and runs[-2] > newest:
                newest = runs[-2]
                self._last_slice[key] = state
        self._arrival = max(self._arrival, newest)

    def evicted(self, key: Any) -> None:
        self._last_slice.pop(key, None)
        self._per_window.discard(key)

    def forgot_all(self) -> None:
        self._last_slice.clear()
        self._per_window.clear()

    def window_contents(self, key: Any, ks: KeyState) -> dict[Any, Any]:
        """What each live window of ``key`` holds, as the general path keeps it (a
        window holds contents from its first element until its cleanup)."""
        return {w: self._window_contents(key, ks, w) for w in self._live_windows(ks)}

    def _live_windows(self, ks: KeyState) -> list[Any]:
        """The windows of ``ks`` holding contents: its own, and every window not yet
        cleaned up that covers a slice."""
        size, slide, _ = self._layout
        watermark, width = self.op.current_watermark, self._slice_ms
        contents: dict[Any, Any] = ks.contents
        live = {state for state in contents if isinstance(state, TimeWindow)}
        for start in (s for s in contents if not isinstance(s, TimeWindow)):
            window_start = self._layout.last_start(start)
            while window_start + size >= start + width:
                window, cleanup = self._window(window_start)
                if cleanup > watermark or cleanup == LONG_MAX:  # not cleaned up yet
                    live.add(window)
                window_start -= slide
        return sorted(live)

    def num_state_entries(self, ks: KeyState) -> int:
        """As the general path counts them: one entry per window holding contents (not
        per slice), then trigger, merging and function state."""
        return ks.num_state_entries() - len(ks.contents) + len(self._live_windows(ks))
