"""The sorted-session operator: the general window operator, but faster for event-time
session windows fed in timestamp order (a BATCH key's elements).

In BATCH each key's elements reach the engine in timestamp order under no watermark
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
so the element starts new contents in that namespace (possible only with a dynamic gap).

Under BATCH a closed session fires at once, as the final watermark would fire it
(the function sees the watermark +inf; its state is cleared and its timers dropped), when
nothing of it can come later than the next session's firing: it is the key's only
in-flight session and its cleanup time (end plus allowed lateness) is at or before the
new window's end timer. Otherwise it keeps its timers and fires at the key's end.

The operator serves a run this way when the run is in timestamp order with every
timestamp present, the watermark is at its start (``LONG_MIN``, BATCH) and no in-flight
session starts after the run's first element; any other run, and single elements, take
the general path. Results, side outputs, the watermark each firing sees and the state
left at the key's end are the general operator's (the fast-path property tests run both
and compare).
"""

from __future__ import annotations

from itertools import islice
from operator import le
from typing import Any

from tidemark._engine.keystate import KeyState
from tidemark._engine.operator import WindowOperator
from tidemark._engine.spec import OperatorSpec
from tidemark.assigners import DynamicEventTimeSessionWindows, EventTimeSessionWindows
from tidemark.time import LONG_MAX, LONG_MIN
from tidemark.windows import TimeWindow

__all__ = ["SortedSessionOperator", "sorted_sessions_serve"]


def sorted_sessions_serve(spec: OperatorSpec) -> bool:
    """Whether :class:`SortedSessionOperator` serves ``spec``: BATCH, fast paths on,
    event-time sessions of a static or dynamic gap (the assigners themselves, not
    subclasses), a trigger that behaves as the default one, no evictor."""
    return (
        spec.fast_paths
        and spec.batch_mode
        and spec.evictor is None
        and type(spec.assigner) in (EventTimeSessionWindows, DynamicEventTimeSessionWindows)
        and spec.window_trigger.fires_only_at_window_end()
    )


class SortedSessionOperator(WindowOperator):
    """:class:`WindowOperator`, but faster for event-time sessions fed in time order.

    Parameters
    ----------
    spec : OperatorSpec
        A pipeline :func:`sorted_sessions_serve` accepts.
    tracer : object, optional
    """

    def __init__(self, spec: OperatorSpec, *, tracer: Any = None):
        super().__init__(spec, tracer=tracer)
        assigner = spec.assigner
        # A static gap is added here; a dynamic one is asked of the assigner per element.
        self._gap_ms: int | None = getattr(assigner, "gap_ms", None)
        self._adders: tuple[Any, Any, Any] = self.logic.adders()

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """:meth:`WindowOperator.process_elements`, folded by a linear scan where the
        run qualifies (see the module docstring), else element by element."""
        ks = self.keys.get(key)
        latest: TimeWindow | None = _latest_session(ks.merging) if ks is not None else None
        if not (
            timestamps
            and self.current_watermark == LONG_MIN
            and None not in timestamps
            and timestamps[0] > LONG_MIN
            and (latest is None or latest[0] <= timestamps[0])
            and all(map(le, timestamps, islice(timestamps, 1, None)))
        ):
            super().process_elements(key, values, timestamps)
            return
        if ks is None:
            ks = self.keys[key] = KeyState()
        self._sorted_run(key, ks, latest, values, timestamps)

    def _sorted_run(
        self, key: Any, ks: KeyState, latest: TimeWindow | None, values: Any, timestamps: Any
    ) -> None:
        """Fold the run session by session. ``session`` is the latest session's entry in
        the merging set (None: a new one not entered yet), ``start``/``end`` its extent so
        far, ``state_window`` where its contents live, ``acc`` those contents."""
        gap, (add, agg_add, create) = self._gap_ms, self._adders
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
            elif ts == start and new_end == end and state_window != (start, end):
                # the window equals the session: mapped to itself (module docstring)
                self._close(key, ks, session, TimeWindow(start, end), state_window, acc)
                session = state_window = TimeWindow(start, end)
                acc = ks.contents.get(session)
            try:
                if agg_add is None:
                    acc = add(acc, value)
                else:
                    acc = agg_add(value, create() if acc is None else acc)
            except Exception as exc:
                window = TimeWindow(start, end)
                self._close(key, ks, session, window, state_window, acc)  # as element by element
                raise self._user_error("the reduce/aggregate function", key, window, exc) from exc
        window = TimeWindow(start, end)
        self._close(key, ks, session, window, state_window, acc)
        self._register_timers(key, ks, window)

    def _window_end(self, key: Any, value: Any, ts: int) -> int:
        """The end of ``value``'s window by the dynamic gap, asked of the assigner as the
        general operator does (Flink calls the extractor per element)."""
        try:
            windows: Any = self.assigner.assign_windows(value, ts, self._clock)
        except Exception as exc:
            raise self._user_error("the window assigner", key, None, exc) from exc
        end: int = windows[0][1]
        return end

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
        cleanup = self.cleanup_time(window)
        if len(ks.merging) == 1 and cleanup != LONG_MAX and cleanup <= next_end - 1:
            state_window = ks.merging[window]
            self._fire(key, ks, window, state_window, LONG_MAX)
            self._clear_all_state(key, ks, window, state_window, LONG_MAX)
            self._delete_timers(ks, window)
        else:
            self._register_timers(key, ks, window)

    def _register_timers(self, key: Any, ks: KeyState, window: TimeWindow) -> None:
        """The trigger's end timer, then the cleanup timer, as the general operator
        registers them for a window an element was added to (each once)."""
        self.event_time_timers.register(key, ks, window[1] - 1, window)
        self.register_cleanup_timer(key, ks, window)

    def _delete_timers(self, ks: KeyState, window: TimeWindow) -> None:
        """What a merge deletes for a merged window: its end timer (the trigger's clear)
        and its cleanup timer."""
        self.event_time_timers.delete(ks, window[1] - 1, window)
        self.delete_cleanup_timer(ks, window)


def _latest_session(merging: dict[Any, Any]) -> Any:
    """The in-flight session that starts last, or None."""
    if not merging:
        return None
    if len(merging) == 1:
        return next(iter(merging))
    return max(merging, key=_start_of)


def _start_of(window: TimeWindow) -> int:
    return window[0]
