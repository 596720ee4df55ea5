"""The window operator under a Dataflow trigger: panes, accumulation modes, closing.

:class:`PaneDriver` is the window operator's trigger driver
(:mod:`tidemark._engine.triggering`) for a Dataflow trigger: Beam's trigger driver in
place of Flink's trigger calls; windows, lateness, merging and timers stay the core's
(:class:`~tidemark._engine.contract.OperatorCore`). Per element and window: skip a
closed window; add the element;
``on_element_added``; if ``should_fire`` (at the current watermark), fire a pane; then
fire the trigger's timers the watermark already passed. Per timer: ``should_fire`` at
the timer's time, and fire. A pane evaluates the window function on the contents (an
empty pane on empty contents), says what it is (:class:`~tidemark.panes.PaneInfo`,
computed as Beam's driver does), and then the contents go (DISCARDING, or the trigger
finished) or stay; a finished trigger closes the window. At the window's expiry
(``max_timestamp + allowed_lateness``; the end of input for a global window) elements
no pane emitted fire a last pane, then all state goes. The rules and where they differ
from Beam's SDKs: ``docs/panes.md``.

Everything a window needs between calls is one :class:`WindowPanes` in its trigger
state, so a key's state still pickles as a unit (Spark's state store keeps it).
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Any

from tidemark._engine.keystate import KeyState
from tidemark._engine.timers import TimerService
from tidemark._engine.triggering import TriggerDriver
from tidemark.panes import AccumulationMode, PanedResult, PaneInfo, PaneTiming
from tidemark.time import TimeDomain
from tidemark.triggers.dataflow import (
    COMBINERS,
    DataflowTrigger,
    PaneTriggerContext,
    StateTag,
    window_end,
)
from tidemark.windows import Window

if TYPE_CHECKING:
    from tidemark._engine.contract import OperatorCore

__all__ = ["PaneDriver", "WindowPanes", "PANES"]

EVENT_TIME = TimeDomain.EVENT_TIME
PANES = "panes"  # the name of a window's WindowPanes in its trigger state


class WindowPanes:
    """One window's pane record: its trigger's state and named timers, the pane
    counters, whether it is closed, and what RETRACTING mode must retract next.

    Attributes
    ----------
    state : dict
        ``name -> (combiner, value)`` of the trigger's :class:`StateTag` s.
    timers : dict
        ``(name, domain, origin) -> Beam time``: the trigger's named timers; ``origin``
        tells apart the timers merged windows brought (Beam keeps them per window id).
    origin : tuple
        This record's own origin (the window it was made for).
    index, non_speculative : int
        The next pane's index and non-speculative index.
    closed : bool
        The trigger finished: elements no longer go in.
    unemitted : int
        Elements added since the last pane (fire at expiry when > 0).
    retract : list
        RETRACTING: ``(window, value, pane)`` of the rows the next pane retracts first
        (this window's last pane, and those of windows merged into it).
    """

    __slots__ = (
        "state",
        "timers",
        "origin",
        "index",
        "non_speculative",
        "closed",
        "unemitted",
        "retract",
    )

    def __init__(self, origin: tuple[Any, ...]):
        self.state: dict[str, tuple[str, Any]] = {}
        self.timers: dict[tuple[str, TimeDomain, tuple[Any, ...]], int] = {}
        self.origin = origin
        self.index = 0
        self.non_speculative = 0
        self.closed = False
        self.unemitted = 0
        self.retract: list[tuple[Window, Any, PaneInfo]] = []

    def absorb(self, other: WindowPanes) -> None:
        """Fold a merged window's record into this one (Beam's merge of window state):
        state combines by its tags, timers stay, counts add, closed if either was;
        ``other``'s pane counters go (the merge result counts its own panes) and the
        rows it emitted last are retracted by this window's next pane."""
        for name, (combiner, value) in other.state.items():
            mine = self.state.get(name)
            merged = value if mine is None else COMBINERS[combiner](mine[1], value)
            self.state[name] = (combiner, merged)
        self.timers.update(other.timers)
        self.closed = self.closed or other.closed
        self.unemitted += other.unemitted
        self.retract.extend(other.retract)

    def next_pane(self, window: Window, finished: bool, watermark: int, on_time: bool) -> PaneInfo:
        """The pane firing now (Beam's driver's rules), counted.

        ``watermark`` is Beam's (tidemark's + 1) at the firing; ``on_time`` whether the
        watermark itself fired it (a timer, or the window's expiry at its end)."""
        index = self.index
        self.index += 1
        if watermark < window_end(window):
            timing, non_speculative = PaneTiming.EARLY, -1
        else:
            non_speculative = self.non_speculative
            self.non_speculative += 1
            on_time_now = on_time and non_speculative == 0
            timing = PaneTiming.ON_TIME if on_time_now else PaneTiming.LATE
        return PaneInfo(index == 0, finished, timing, index, non_speculative)

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)


def _origin(window: Window) -> tuple[Any, ...]:
    return (getattr(window, "start", None), window.max_timestamp())


def _engine_timers(panes: WindowPanes) -> set[tuple[TimeDomain, int]]:
    """``(domain, engine time)`` of the engine timers ``panes``' named timers need."""
    return {(t[1], _engine_time(t[1], time)) for t, time in panes.timers.items()}


def _take_timers(panes: WindowPanes, due: Any) -> list[tuple[TimeDomain, int]]:
    """Remove and return ``(domain, time)`` of the named timers ``due(domain, time)``
    selects, in the order they were set. As Beam's driver, the timers due at once are
    taken together: one cleared while an earlier one fires still fires."""
    taken = [(t, time) for t, time in panes.timers.items() if due(t[1], time)]
    for timer, _ in taken:
        del panes.timers[timer]
    return [(timer[1], time) for timer, time in taken]


def _engine_time(domain: TimeDomain, time: int) -> int:
    """The engine timer of a Beam timer time: event time one earlier (Beam's watermark
    ``W`` is tidemark's ``W - 1``)."""
    return time - 1 if domain is EVENT_TIME else time


class _PaneContext(PaneTriggerContext):
    """A Dataflow trigger's view of one key and window, under a name prefix."""

    __slots__ = ("_driver", "_key", "_ks", "_window", "_panes", "_prefix")

    def __init__(
        self,
        driver: PaneDriver,
        key: Any,
        ks: KeyState,
        window: Window,
        panes: WindowPanes,
        prefix: str = "",
    ):
        self._driver = driver
        self._key = key
        self._ks = ks
        self._window = window
        self._panes = panes
        self._prefix = prefix

    def nested(self, prefix: str) -> PaneTriggerContext:
        return _PaneContext(
            self._driver, self._key, self._ks, self._window, self._panes, self._prefix + prefix
        )

    def get_state(self, tag: StateTag) -> Any:
        stored = self._panes.state.get(self._prefix + tag.name)
        return tag.empty if stored is None else stored[1]

    def add_state(self, tag: StateTag, value: Any) -> None:
        name = self._prefix + tag.name
        stored = self._panes.state.get(name)
        if stored is not None:
            value = COMBINERS[tag.combine](stored[1], value)
        self._panes.state[name] = (tag.combine, value)

    def clear_state(self, tag: StateTag) -> None:
        self._panes.state.pop(self._prefix + tag.name, None)

    def set_timer(self, name: str, domain: TimeDomain, time: int) -> None:
        panes = self._panes
        panes.timers[(self._prefix + name, domain, panes.origin)] = time
        self._driver.timers_of(domain).register(
            self._key, self._ks, _engine_time(domain, time), self._window
        )

    def clear_timer(self, name: str, domain: TimeDomain) -> None:
        full_name, timers = self._prefix + name, self._panes.timers
        gone = [t for t in timers if t[0] == full_name and t[1] is domain]
        for timer in gone:
            time = timers.pop(timer)
            self._driver.release_engine_timer(self._ks, self._panes, self._window, domain, time)

    def get_current_processing_time(self) -> int:
        return self._driver.op.current_processing_time


class PaneDriver(TriggerDriver):
    """The trigger driver of a Dataflow trigger: panes and the accumulation mode.

    The core's windows, lateness, merging and timers; the trigger is asked Beam's
    questions instead of Flink's, and each firing is a pane. With ``spec.pane_results``
    each result in the core's ``output`` is a :class:`~tidemark.panes.PanedResult`;
    otherwise :attr:`output_panes` holds ``(pane, is_retraction)`` beside each result.
    A window expires on the watermark, a global window at the end of input.

    Parameters
    ----------
    op : OperatorCore
    trigger : DataflowTrigger
        The window's trigger (the spec's, the Dataflow model's kind).
    """

    expires_at_end_of_input = True

    def __init__(self, op: OperatorCore, trigger: DataflowTrigger):
        super().__init__(op)
        spec = op.spec
        self.root = trigger
        self.mode = spec.accumulation_mode  # the spec's (DISCARDING unless given)
        self.pane_results = spec.pane_results
        self.output_panes: list[tuple[PaneInfo, bool]] = []
        # The windows the element being processed went into, with the key state they
        # belong to: their passed timers fire once all are served (after_element).
        self._touched: list[tuple[Window, Window]] = []
        self._touched_of: KeyState | None = None

    def expiry_timers(self) -> TimerService:
        return self.op.event_time_timers

    def timers_of(self, domain: TimeDomain) -> TimerService:
        op = self.op
        return op.event_time_timers if domain is EVENT_TIME else op.processing_time_timers

    # ------------------------------------------------------------------ elements

    def accepts(self, ks: KeyState, window: Window) -> bool:
        """A closed window takes no element (its trigger finished); an element that
        reached only closed windows goes where late elements go."""
        panes = self._panes_of(ks, window)
        return panes is None or not panes.closed

    def element_added(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        if self._touched_of is not ks:  # a new element's (an error may have left some)
            self._touched.clear()
            self._touched_of = ks
        panes = self._panes_for(ks, window)
        panes.unemitted += 1
        ctx = _PaneContext(self, key, ks, window, panes)
        try:
            self.root.on_element_added(value, window, ctx)
            watermark = self.op.current_watermark + 1
            fire = self.root.should_fire(EVENT_TIME, watermark, window, ctx)
            finished = fire and self.root.on_fire(watermark, window, ctx)
        except Exception as exc:
            raise self.op.user_error("the Dataflow trigger", key, window, exc) from exc
        if fire:
            self._fire_pane(key, ks, window, state_window, panes, finished, watermark, False)
        self._touched.append((window, state_window))

    def after_element(self, key: Any, ks: KeyState) -> None:
        """The timers the watermark already passed fire (Beam's driver fires due timers
        after every bundle), for each window the element went into."""
        touched = self._touched
        if not touched:
            return
        self._touched, self._touched_of = [], None
        for window, state_window in touched:
            self._fire_passed_timers(key, ks, window, state_window)

    def _fire_passed_timers(
        self, key: Any, ks: KeyState, window: Window, state_window: Window
    ) -> None:
        """Fire ``window``'s event-time timers the watermark passed already."""
        watermark = self.op.current_watermark + 1
        while True:
            panes = self._panes_of(ks, window)
            if panes is None:
                return
            due = _take_timers(
                panes, lambda domain, time: domain is EVENT_TIME and time <= watermark
            )
            if not due:
                return
            for domain, time in due:
                self.release_engine_timer(ks, panes, window, domain, time)
            for domain, time in due:
                self._named_timer(key, ks, window, state_window, panes, domain, time)

    # ------------------------------------------------------------------ timers

    def on_timer(
        self,
        domain: TimeDomain,
        key: Any,
        ks: KeyState,
        time: int,
        window: Window,
        state_window: Window,
        expires: bool,
    ) -> None:
        """An engine timer: the trigger's named timers due at ``time``; at the window's
        expiry, elements no pane emitted fire a last pane (the core then clears its
        state)."""
        panes = self._panes_of(ks, window)
        if panes is not None:
            due = _take_timers(panes, lambda d, t: d is domain and _engine_time(d, t) == time)
            for _, beam_time in due:
                self._named_timer(key, ks, window, state_window, panes, domain, beam_time)
        if expires:
            panes = self._panes_of(ks, window)
            if panes is not None and not panes.closed and panes.unemitted > 0:
                on_time = time == window.max_timestamp()
                self._fire_pane(key, ks, window, state_window, panes, True, time + 1, on_time)

    def _named_timer(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        panes: WindowPanes,
        domain: TimeDomain,
        time: int,
    ) -> None:
        """One of the trigger's timers fires (Beam's ``process_timer``; taken from the
        record already, with the others due at once): asked at the timer's own time
        (event time) or the current watermark (processing time)."""
        if panes.closed:
            return
        watermark = time if domain is EVENT_TIME else self.op.current_watermark + 1
        ctx = _PaneContext(self, key, ks, window, panes)
        try:
            fire = self.root.should_fire(domain, watermark, window, ctx)
            finished = fire and self.root.on_fire(watermark, window, ctx)
        except Exception as exc:
            raise self.op.user_error("the Dataflow trigger's timer", key, window, exc) from exc
        if fire:
            on_time = domain is EVENT_TIME
            self._fire_pane(key, ks, window, state_window, panes, finished, watermark, on_time)

    def release_engine_timer(
        self, ks: KeyState, panes: WindowPanes, window: Window, domain: TimeDomain, time: int
    ) -> None:
        """Delete the engine timer of a named timer unless another still needs it."""
        if any(t[1] is domain and other == time for t, other in panes.timers.items()):
            return
        engine_time = _engine_time(domain, time)
        if domain is EVENT_TIME and engine_time == self.op.cleanup_time(window):
            return  # the window's expiry timer, the engine's own
        self.timers_of(domain).delete(ks, engine_time, window)

    # ------------------------------------------------------------------ panes

    def _fire_pane(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        panes: WindowPanes,
        finished: bool,
        watermark: int,
        on_time: bool,
    ) -> None:
        """Emit one pane of ``window``: retractions first (RETRACTING), then the
        function's results; then the contents go or stay, by the mode."""
        op = self.op
        pane = panes.next_pane(window, finished, watermark, on_time)
        contents = ks.contents.get(state_window)
        current = op.current_watermark
        results = op.evaluate(key, ks, window, state_window, contents, current, pane)
        for (old_window, old_pane), rows in groupby(panes.retract, lambda r: (r[0], r[2])):
            self._emit(key, old_window, current, [row[1] for row in rows], old_pane, True)
        self._emit(key, window, current, results, pane, False)
        panes.unemitted = 0
        if self.mode is AccumulationMode.RETRACTING:
            panes.retract = [(window, value, pane) for value in results]
        if finished:
            panes.closed = True
            panes.retract = []
        if finished or self.mode is AccumulationMode.DISCARDING:
            ks.contents.pop(state_window, None)

    def _emit(
        self,
        key: Any,
        window: Window,
        watermark: int,
        results: list[Any],
        pane: PaneInfo,
        retraction: bool,
    ) -> None:
        """Emit ``results`` of ``window`` as ``pane`` (or its retraction)."""
        op = self.op
        timestamp = window.max_timestamp()
        for value in results:
            if self.pane_results:
                value = PanedResult(value, pane, retraction)
            else:
                self.output_panes.append((pane, retraction))
            op.output.append((value, timestamp))
        if op.output_watermarks is not None:
            op.output_watermarks.extend([watermark] * len(results))
        if op.tracer is not None:
            op.tracer.fired(key, window, watermark, results, pane, retraction)

    # ------------------------------------------------------------------ merging

    def on_merge(self, key: Any, ks: KeyState, result: Window, merged: list[Window]) -> None:
        """Sessions merge: the merged windows' pane records fold into the result's
        (their timers now fire for it), the trigger hears of it; the result expires at
        its own time, also when closed (no element registers its cleanup timer)."""
        op = self.op
        sources = sorted(merged, key=_origin)
        panes = self._panes_of(ks, result)
        existed = panes is not None
        if panes is None:
            # Beam's first window id: the earliest merged window's that has a record
            held = [p for p in (self._panes_of(ks, w) for w in sources) if p is not None]
            panes = WindowPanes(held[0].origin if held else _origin(result))
            ks.trigger_state[result] = {PANES: panes}
        for window in sources:
            self._move_panes(key, ks, window, result, panes)
            op.delete_cleanup_timer(ks, window)
        ctx = _PaneContext(self, key, ks, result, panes)
        to_be_merged = sources + [result] if existed else sources
        try:
            self.root.on_windows_merged(to_be_merged, result, ctx)
        except Exception as exc:
            raise op.user_error("the Dataflow trigger's merge", key, result, exc) from exc
        op.register_cleanup_timer(key, ks, result)

    def _move_panes(
        self, key: Any, ks: KeyState, window: Window, result: Window, panes: WindowPanes
    ) -> None:
        source = ks.trigger_state.pop(window, {}).get(PANES)
        if source is None:
            return
        for domain, time in _engine_timers(source):
            self.timers_of(domain).delete(ks, time, window)
            self.timers_of(domain).register(key, ks, time, result)
        panes.absorb(source)

    # ------------------------------------------------------------------ state

    def _panes_of(self, ks: KeyState, window: Window) -> WindowPanes | None:
        store = ks.trigger_state.get(window)
        return None if store is None else store.get(PANES)

    def _panes_for(self, ks: KeyState, window: Window) -> WindowPanes:
        panes = self._panes_of(ks, window)
        if panes is None:
            panes = WindowPanes(_origin(window))
            ks.trigger_state[window] = {PANES: panes}
        return panes

    def clear(self, key: Any, ks: KeyState, window: Window) -> None:
        store = ks.trigger_state.pop(window, None)
        panes = None if store is None else store.get(PANES)
        if panes is None:
            return
        for domain, time in _engine_timers(panes):
            self.timers_of(domain).delete(ks, time, window)
