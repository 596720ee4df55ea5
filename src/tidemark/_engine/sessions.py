"""The session paths: the general path, but faster for event-time session windows under
a trigger that behaves as the default one, without an evictor.

**Per element** (:class:`SessionPath`, every mode): an element whose window
``[ts, ts + gap)`` ends after the watermark, of a key with no session in flight or with
sessions its window touches at most one of, is served without the merging window set,
trigger calls or contexts, taking exactly the general path's steps:

- inside that session (its window covered, not equal): the element is added to the
  session's state window; Flink's merging set reports no merge, so no merge function
  runs, and the session's timers are in place (its end is after the watermark);
- reaching past it: the two windows merge into their cover, which takes the session's
  state window and has nothing to fold (the new window holds no state): the trigger's
  on_merge registers the cover's end timer, the session's end and cleanup timers go,
  the element is added, then the cover's cleanup timer is registered;
- touching no session: a new one, mapped to itself, with its end and cleanup timers.

With several sessions in flight the one touched moves to the end of the merging set,
as Flink's set re-enters it. Every other element (its window's end at or before the
watermark: late, or firing at once; a window bridging sessions; one equal to the
session, Flink's self-mapping quirk; no timestamp) takes the general path with the
window it was assigned, so a dynamic gap's extractor is called once per element, as
there. Firing, timers and snapshots are the core's.

**Sorted runs** (:class:`SortedSessionPath`, BATCH): in BATCH each key's elements
reach the engine in timestamp order under no watermark
(:attr:`OperatorSpec.batch_mode <tidemark._engine.spec.OperatorSpec>`). An element's
window ``[ts, ts + gap)`` then starts at or after every in-flight session's start, so it
can only intersect (or touch: Flink's ``TimeWindow.intersects``) the latest one: the
in-flight sessions are disjoint and do not touch, so every earlier one ends before the
latest begins. A run is folded by a linear scan instead of a
:class:`~tidemark._engine.merging.MergingWindowSet` round per element:

- an element inside the latest session adds to its state window's contents;
- one that reaches past its end extends it: Flink's merge of the two windows keeps the
  session's state window and has nothing to fold (the new window has no state yet);
- one beyond its end closes it and opens the next session.

The session's state window, its entry in the key's merging set and its timers (the
trigger's end timer, then the cleanup timer, as the general operator registers them)
are written when the session closes or the run ends, not per element; the timers of the
windows it outgrew are deleted then. Nothing between can observe them: no timer fires
during a run, and the user's ``add`` does not see windows. Registering later changes
only registration sequence numbers, not the order of a key's timers: a session closes
before the next one opens, and a BATCH key's timers fire at its end, apart from other
keys'. A window whose start and end equal the latest session's keeps Flink's quirk: the
merging set maps the session to itself (``MergingWindowSet.addWindow`` with no merge),
so the element starts new contents in that namespace (possible only with a dynamic gap),
unless the assigner keeps all elements: then it adds to the session as any inside it.

Under BATCH a closed session fires at once, as the final watermark would fire it
(the function sees the watermark +inf; its state is cleared and its timers dropped), when
nothing of it can come later than the next session's firing: it is the key's only
in-flight session and its cleanup time (end plus allowed lateness) is at or before the
new window's end timer. Otherwise it keeps its timers and fires at the key's end.

The path serves a run this way when the run is in timestamp order with every
timestamp present, the watermark is at its start (``LONG_MIN``, BATCH) and no in-flight
session starts after the run's first element; any other run, and single elements, take
the per-element path. Results, side outputs, the watermark each firing sees and the state
left (at the key's end in BATCH, after every element otherwise) are the general
path's (``tests/engine/test_session_elements.py`` and ``tests/engine/test_sorted_sessions.py`` run
both and compare).
"""

from __future__ import annotations

from itertools import islice
from operator import le
from typing import Any

from tidemark._engine.contract import ElementPath, OperatorCore, RunPath
from tidemark._engine.functions import ReturnedNone
from tidemark._engine.keystate import KeyState
from tidemark._engine.merging import keeps_equal_windows
from tidemark._engine.paths import WindowPath
from tidemark._engine.spec import OperatorSpec
from tidemark._engine.status import ADDED
from tidemark.assigners import DynamicEventTimeSessionWindows, EventTimeSessionWindows
from tidemark.time import LONG_MAX, LONG_MIN
from tidemark.windows import TimeWindow

__all__ = [
    "SessionPath",
    "SortedSessionPath",
    "session_elements_serve",
    "sorted_sessions_serve",
]


def session_elements_serve(spec: OperatorSpec) -> bool:
    """Whether :class:`SessionPath` serves ``spec``: fast paths on, event-time
    sessions of a static or dynamic gap (the assigners themselves, not subclasses), a
    trigger that behaves as the default one, no evictor."""
    return (
        spec.fast_paths
        and spec.evictor is None
        and type(spec.assigner) in (EventTimeSessionWindows, DynamicEventTimeSessionWindows)
        and spec.window_trigger.fires_only_at_window_end()
    )


def sorted_sessions_serve(spec: OperatorSpec) -> bool:
    """Whether :class:`SortedSessionPath` serves ``spec``: BATCH, and
    :func:`session_elements_serve`."""
    return spec.batch_mode and session_elements_serve(spec)


class SessionPath(WindowPath):
    """:class:`~tidemark._engine.paths.WindowPath`, but faster per element for event-time
    sessions (see the module docstring)."""

    def bind(self, op: OperatorCore) -> tuple[ElementPath, RunPath]:
        self.op = op
        # A static gap is added here; a dynamic one is asked of the assigner per element.
        self._gap_ms: int | None = getattr(op.assigner, "gap_ms", None)
        self._lateness_ms = op.allowed_lateness_ms
        self._loses_equal = not keeps_equal_windows(op.assigner)  # Flink's quirk, below
        self._adders: tuple[Any, Any, Any] = op.logic.adders()
        self._push = op.event_time_timers.push
        # The per-element callable, specialised once (see _session_element_path).
        self._session_element = _session_element_path(self)
        return self._session_element, self.process_elements

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """A run of ``key``'s elements through the per-element path."""
        element = self._session_element
        for value, timestamp in zip(values, timestamps):
            element(key, value, timestamp)

    def _window_end(self, key: Any, value: Any, ts: int) -> int:
        """The end of ``value``'s window by the dynamic gap, asked of the assigner as the
        general path does (Flink calls the extractor per element)."""
        op = self.op
        try:
            windows: Any = op.assigner.assign_windows(value, ts, op.clock)
        except Exception as exc:
            raise op.user_error("the window assigner", key, None, exc) from exc
        end: int = windows[0][1]
        return end

    def _unusual(self, key: Any, ks: KeyState | None, value: Any, ts: int, end: int) -> int:
        """The general path for an element the per-element path does not serve, with the
        window ``[ts, end)`` the assigner gave it (not asked again)."""
        op = self.op
        if ks is None:
            ks = op.key_state(key)
        return op.add_assigned(key, ks, value, ts, [TimeWindow(ts, end)])

    def _among_sessions(self, key: Any, ks: KeyState, value: Any, ts: int, end: int) -> int:
        """An element of a key with no session or several in flight: a new session when
        its window touches none, a merge with the one it touches (re-entered last in the
        merging set, as Flink's set re-enters a merge result), else the general path."""
        merging: dict[Any, Any] = ks.merging
        touched = [window for window in merging if window[0] <= end and window[1] >= ts]
        if not touched:
            return self._open_session(key, ks, value, ts, end)
        if len(touched) > 1 or touched[0] == (ts, end):  # bridging, or Flink's quirk
            return self._unusual(key, ks, value, ts, end)
        window = touched[0]
        state_window = merging.pop(window)
        cover = TimeWindow(min(window[0], ts), max(window[1], end))
        merging[cover] = state_window
        if cover != window:
            self._merge_into_cover(key, ks, window, cover)
        self.op.add_contents(key, ks, cover, state_window, value, ts)
        if self._lateness_ms:  # the cleanup timer: none apart from the end timer without
            self.op.register_cleanup_timer(key, ks, cover)
        return ADDED

    def _open_session(self, key: Any, ks: KeyState, value: Any, ts: int, end: int) -> int:
        """A new session ``[ts, end)`` (its end after the watermark), mapped to itself:
        the element is added, the end timer and the cleanup timer registered."""
        op, window = self.op, TimeWindow(ts, end)
        ks.merging[window] = window
        op.add_contents(key, ks, window, window, value, ts)
        op.event_time_timers.register_window(key, ks, window, end - 1, op.cleanup_time(window))
        return ADDED

    def _merge_into_cover(self, key: Any, ks: KeyState, window: Any, cover: Any) -> None:
        """What merging ``window`` into ``cover`` (its end after the watermark, so no
        timer callback is running) does to the timers: the trigger's on_merge registers
        the cover's end timer, its clear deletes the window's, and the window's cleanup
        timer goes (the general path's merge, inlined)."""
        timers = ks.event_timers  # their deletions: TimerService.delete, inlined
        self._push(key, ks, cover[1] - 1, cover)
        timers.pop((window[1] - 1, window), None)
        cleanup = window[1] - 1 + self._lateness_ms
        if self._lateness_ms and cleanup < LONG_MAX:
            timers.pop((cleanup, window), None)


class SortedSessionPath(SessionPath):
    """:class:`SessionPath`, but faster for event-time sessions fed in time order."""

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """A run of ``key``'s elements, folded by a linear scan where the run qualifies
        (see the module docstring), else element by element."""
        op = self.op
        ks = op.keys.get(key)
        latest: TimeWindow | None = _latest_session(ks.merging) if ks is not None else None
        if not (
            timestamps
            and op.current_watermark == LONG_MIN
            and None not in timestamps
            and timestamps[0] > LONG_MIN
            and (latest is None or latest[0] <= timestamps[0])
            and all(map(le, timestamps, islice(timestamps, 1, None)))
        ):
            super().process_elements(key, values, timestamps)
            return
        self._sorted_run(key, op.key_state(key), latest, values, timestamps)

    def _sorted_run(
        self, key: Any, ks: KeyState, latest: TimeWindow | None, values: Any, timestamps: Any
    ) -> None:
        """Fold the run session by session. ``session`` is the latest session's entry in
        the merging set (None: a new one not entered yet), ``start``/``end`` its extent so
        far, ``state_window`` where its contents live, ``acc`` those contents."""
        gap, add = self._gap_ms, self.op.logic.add
        session, acc = latest, None
        state_window: Any = None
        start = end = LONG_MIN
        if latest is not None:
            start, end = latest
            state_window = ks.merging[latest]
            acc = ks.contents.get(state_window)
        for value, ts in zip(values, timestamps):
            new_end = ts + gap if gap is not None else self._window_end(key, value, ts)
            if ts > end:  # beyond the latest session (or none yet): a new one
                if state_window is not None:
                    self._close(key, ks, session, TimeWindow(start, end), state_window, acc)
                    self._after_close(key, ks, TimeWindow(start, end), new_end)
                session, start, end = None, ts, new_end
                state_window, acc = TimeWindow(ts, new_end), None
            elif new_end > end:  # extends it (a merge that folds nothing)
                end = new_end
            elif (
                ts == start
                and new_end == end
                and self._loses_equal
                and state_window != (start, end)
            ):
                # the window equals the session: mapped to itself (module docstring)
                self._close(key, ks, session, TimeWindow(start, end), state_window, acc)
                session = state_window = TimeWindow(start, end)
                acc = ks.contents.get(session)
            try:
                acc = add(acc, value)
            except Exception as exc:
                window = TimeWindow(start, end)
                self._close(key, ks, session, window, state_window, acc)  # as element by element
                raise self.op.fold_error(key, window, exc) from exc
        window = TimeWindow(start, end)
        self._close(key, ks, session, window, state_window, acc)
        self._register_timers(key, ks, window)

    def _close(
        self,
        key: Any,
        ks: KeyState,
        session: TimeWindow | None,
        window: TimeWindow,
        state_window: Any,
        acc: Any,
    ) -> None:
        """Write a session back into the key's state: ``window`` enters the merging set,
        mapped to ``state_window`` (which holds ``acc``), in place of ``session``, its
        entry so far, whose timers go if it was outgrown (a merge deletes them)."""
        merging = ks.merging
        if session is not None and session != window:
            merging.pop(session)
            self._delete_timers(ks, session)
        merging[window] = state_window
        ks.contents[state_window] = acc

    def _after_close(self, key: Any, ks: KeyState, window: TimeWindow, next_end: int) -> None:
        """Fire closed ``window`` at once where nothing of it can come after the next
        session's firing (module docstring), else give it its timers."""
        op = self.op
        cleanup = op.cleanup_time(window)
        if len(ks.merging) == 1 and cleanup != LONG_MAX and cleanup <= next_end - 1:
            state_window = ks.merging[window]
            op.fire(key, ks, window, state_window, LONG_MAX)
            op.clear_all_state(key, ks, window, state_window, LONG_MAX)
            self._delete_timers(ks, window)
        else:
            self._register_timers(key, ks, window)

    def _register_timers(self, key: Any, ks: KeyState, window: TimeWindow) -> None:
        """The trigger's end timer, then the cleanup timer, as the general path
        registers them for a window an element was added to (each once)."""
        op = self.op
        op.event_time_timers.register_window(
            key, ks, window, window[1] - 1, op.cleanup_time(window)
        )

    def _delete_timers(self, ks: KeyState, window: TimeWindow) -> None:
        """What a merge deletes for a merged window: its end timer (the trigger's clear)
        and its cleanup timer."""
        self.op.event_time_timers.delete(ks, window[1] - 1, window)
        self.op.delete_cleanup_timer(ks, window)


def _latest_session(merging: dict[Any, Any]) -> Any:
    """The in-flight session that starts last, or None."""
    if not merging:
        return None
    if len(merging) == 1:
        return next(iter(merging))
    return max(merging, key=_start_of)


def _start_of(window: TimeWindow) -> int:
    return window[0]


def _session_element_path(path: SessionPath) -> Any:
    """``process_element`` for sessions, with what it reads bound once.

    It serves an element of a key with one session in flight that its window, ending
    after the watermark, falls inside of or extends (module docstring); a key with none
    or several goes to :meth:`SessionPath._among_sessions`, every other element to
    :meth:`SessionPath._unusual` (or, without a timestamp, the general path, whose
    assigner raises).
    """
    op = path.op
    gap, lateness = path._gap_ms, op.allowed_lateness_ms
    keys, clock = op.keys, op.event_time_timers
    add, agg_add, _ = path._adders
    step = op.logic.reduce if op.logic.reduce is not None else add  # (contents, value)
    # TimeWindow(start, end) without its Python-level __new__: a TimeWindow is a tuple.
    make, time_window = tuple.__new__, TimeWindow
    general, fold_error = op.assign_and_add, op.fold_error
    window_end, unusual, among = path._window_end, path._unusual, path._among_sessions
    merge_into_cover = path._merge_into_cover

    def process_element(key: Any, value: Any, timestamp: int | None) -> int:
        if timestamp is None:
            return general(key, value, timestamp)
        ks = keys.get(key)
        if gap is not None:
            end = timestamp + gap
        else:
            if ks is None:  # made before the assigner is asked, as by the general path
                ks = keys[key] = KeyState()
            end = window_end(key, value, timestamp)
        if end <= clock.current_time + 1:  # its window ends at or before the watermark
            return unusual(key, ks, value, timestamp, end)
        if ks is None:
            ks = keys[key] = KeyState()
        merging: dict[Any, Any] = ks.merging
        if len(merging) != 1:
            return among(key, ks, value, timestamp, end)
        (window,) = merging
        start, session_end = window
        if timestamp > session_end or end < start:  # touches it not: a new session
            return among(key, ks, value, timestamp, end)
        state_window = merging[window]
        extends = timestamp < start or end > session_end
        if extends:  # Flink's merge of the two into their cover (nothing to fold)
            del merging[window]
            cover = make(time_window, (min(start, timestamp), max(session_end, end)))
            merging[cover] = state_window
            merge_into_cover(key, ks, window, cover)
            window = cover
        elif start == timestamp and session_end == end:
            return unusual(key, ks, value, timestamp, end)  # Flink's self-mapping quirk
        contents = ks.contents
        current = contents.get(state_window)
        try:  # WindowLogic.add, inlined: the user's own function, called directly
            if current is None:
                contents[state_window] = add(None, value)
            else:
                result = step(current, value) if agg_add is None else agg_add(value, current)
                if result is None:
                    raise ReturnedNone("returned None")
                contents[state_window] = result
        except Exception as exc:
            raise fold_error(key, window, exc) from exc
        if extends and lateness:
            op.register_cleanup_timer(key, ks, window)
        return ADDED

    return process_element
