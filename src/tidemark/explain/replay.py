"""The replay an explanation is read from: one key's events through an observed operator.

:func:`replay` feeds the events to a fresh general operator
(:class:`~tidemark._engine.operator.WindowOperator`, the one every fast path agrees
with) built from the spec, subclassed here to report what it does: the window each
element went into (``add_contents``), each merge of sessions (``merge_contents``), each
timer that fires (``on_timer``), each evaluation with the elements it saw (``evaluate``;
the evictor wrapped to see what it removed, before or after the function), each
window's cleanup (``clear_all_state``); firings arrive through the tracer hook every
operator has (``fired``). The normal engine is untouched: only this replay's operator
is observed, so an explanation costs a run nothing.

The :class:`Recorder` keeps which elements each window's contents hold, in the order
the contents keep them (an evictor's list): a firing's elements are the contents'
elements, less those the evictor removed before the function. What the recorder keeps
is raw; :mod:`tidemark.explain.build` turns it into facts.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tidemark._engine.keystate import KeyState
from tidemark._engine.operator import WindowOperator
from tidemark._engine.spec import OperatorSpec
from tidemark._engine.status import DROPPED, SIDE_OUTPUT
from tidemark._engine.trace import Tracer
from tidemark.errors import InputDataError
from tidemark.evictors import Evictor, EvictorContext, TimestampedValue
from tidemark.explain.events import (
    Element,
    EndOfInput,
    Event,
    MicroBatch,
    ProcessingTime,
    Watermark,
)
from tidemark.panes import PaneInfo
from tidemark.ranges import out_of_range_error
from tidemark.time import LONG_MAX, TimeDomain
from tidemark.windows import Window

__all__ = ["InitialState", "Recorder", "ElementRecord", "FiringRecord", "replay"]

BEFORE_RETAINED = -1
"""The element index of contents a restored state held before the retained events."""


@dataclass(frozen=True)
class InitialState:
    """Where a replay starts: a key's state and the clocks (a streaming checkpoint's
    state at a retained micro-batch), instead of an empty key at the start of time."""

    key_state: KeyState
    watermark: int
    processing_time: int = 0


@dataclass
class ElementRecord:
    """One element as the replay saw it (see :class:`~tidemark.explain.facts.ElementFact`)."""

    index: int
    timestamp: int | None
    label: str
    batch: int | None
    watermark: int
    processing_time: int
    code: int = -1
    windows: list[Window] = field(default_factory=list)
    late_windows: list[Window] = field(default_factory=list)
    evicted: tuple[str, str] | None = None  # (evictor, "before" | "after")


@dataclass
class FiringRecord:
    """One firing as the replay saw it (see :class:`~tidemark.explain.facts.FiringFact`)."""

    window: Window
    watermark: int
    processing_time: int
    step: tuple[Any, ...]
    timer: tuple[TimeDomain, int] | None
    elements_seen: int
    batch: int | None
    pane: PaneInfo | None
    retraction: bool
    elements: list[int]
    values: list[Any]


class WatchedEvictor(Evictor):
    """The pipeline's evictor, reporting which elements it removed to the recorder."""

    def __init__(self, evictor: Evictor, recorder: Recorder):
        self.evictor = evictor
        self.recorder = recorder

    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext
    ) -> None:
        before = list(elements)
        self.evictor.evict_before(elements, size, window, ctx)
        self.recorder.evicted(before, elements, repr(self.evictor), "before")

    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Window, ctx: EvictorContext
    ) -> None:
        before = list(elements)
        self.evictor.evict_after(elements, size, window, ctx)
        self.recorder.evicted(before, elements, repr(self.evictor), "after")


class ObservedOperator(WindowOperator):
    """The general window operator, reporting each step to a :class:`Recorder` (the
    replay's own operator: the engine's are never observed), through the hooks the core
    documents for observing its steps (it extends those and nothing else)."""

    def __init__(self, spec: OperatorSpec, recorder: Recorder):
        super().__init__(spec, tracer=recorder)
        self.recorder = recorder
        if spec.evictor is not None:
            self.evictor = WatchedEvictor(spec.evictor, recorder)

    def add_contents(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        self.recorder.members_of(ks, state_window)  # contents that went: members go too
        super().add_contents(key, ks, window, state_window, value, timestamp)
        self.recorder.added(window, state_window)

    def evaluate(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        contents: Any,
        watermark: int,
        pane: PaneInfo = PaneInfo.UNKNOWN,
    ) -> list[Any]:
        recorder = self.recorder
        recorder.begin_evaluate(ks, state_window, contents)
        results = super().evaluate(key, ks, window, state_window, contents, watermark, pane)
        recorder.end_evaluate(state_window)
        return results

    def merge_contents(
        self,
        key: Any,
        ks: KeyState,
        result: Window,
        merged: list[Window],
        state_result: Window,
        merged_states: list[Window],
    ) -> None:
        self.recorder.merged(ks, result, merged, state_result, merged_states)
        super().merge_contents(key, ks, result, merged, state_result, merged_states)

    def on_timer(self, domain: TimeDomain, key: Any, time: int, window: Window) -> None:
        self.recorder.timer = (domain, time)
        try:
            super().on_timer(domain, key, time, window)
        finally:
            self.recorder.timer = None

    def clear_all_state(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, watermark: int
    ) -> None:
        self.recorder.cleared[window] = self.current_watermark
        super().clear_all_state(key, ks, window, state_window, watermark)


class Recorder:
    """What the observed operator reported, kept raw (see the module docstring)."""

    def __init__(self, key: Any, spec: OperatorSpec, tracer: Tracer | None):
        self.key = key
        self.spec = spec
        self.tracer = tracer
        self.op = ObservedOperator(spec, self)
        self.elements: list[ElementRecord] = []
        self.firings: list[FiringRecord] = []
        self.windows: dict[Window, list[int]] = {}  # window -> elements added to it
        self.merged_into: dict[Window, Window] = {}
        self.cleared: dict[Window, int] = {}  # window -> the watermark it was cleared at
        self.restored: set[Window] = set()  # windows of the initial state
        self.restored_watermark: int | None = None
        self.restored_timers: set[tuple[int, Window]] = set()
        self.membership: dict[Window, list[int]] = {}  # state window -> its elements
        self.timer: tuple[TimeDomain, int] | None = None
        self.step: tuple[Any, ...] = ("start",)
        self.batch: int | None = None
        self.ended = False
        self._evaluating: list[int] | None = None
        self._included: list[int] = []

    # ------------------------------------------------------------------ the operator's reports

    def members_of(self, ks: KeyState, state_window: Window) -> list[int]:
        """The elements ``state_window``'s contents hold (none once its contents went)."""
        if state_window not in ks.contents:
            self.membership[state_window] = []
        return self.membership.setdefault(state_window, [])

    def added(self, window: Window, state_window: Window) -> None:
        index = self.step[1]
        self.membership[state_window].append(index)
        self.windows.setdefault(window, []).append(index)
        self.elements[index].windows.append(window)

    def merged(
        self,
        ks: KeyState,
        result: Window,
        merged: list[Window],
        state_result: Window,
        merged_states: list[Window],
    ) -> None:
        target = self.members_of(ks, state_result)
        for state_window in merged_states:
            if state_window != state_result:
                target.extend(self.members_of(ks, state_window))
                self.membership.pop(state_window, None)
        self.windows.setdefault(result, [])
        for window in merged:
            if window != result:
                self.merged_into[window] = result

    def begin_evaluate(self, ks: KeyState, state_window: Window, contents: Any) -> None:
        members = [] if contents is None else list(self.members_of(ks, state_window))
        if self.spec.evictor is not None and len(members) != len(contents or ()):
            raise RuntimeError(
                f"explain lost track of window {state_window!r}'s contents: it holds "
                f"{len(contents or ())} elements, the replay recorded {len(members)}"
            )
        self._evaluating = members
        self._included = members

    def evicted(self, before: list[Any], after: list[Any], evictor: str, when: str) -> None:
        members = self._evaluating
        assert members is not None
        kept = {id(e) for e in after}
        remaining = []
        for element, index in zip(before, members):
            if id(element) in kept:
                remaining.append(index)
            elif index != BEFORE_RETAINED and self.elements[index].evicted is None:
                self.elements[index].evicted = (evictor, when)
        self._evaluating = remaining
        if when == "before":
            self._included = remaining

    def end_evaluate(self, state_window: Window) -> None:
        if self.spec.evictor is not None and self._evaluating is not None:
            self.membership[state_window] = self._evaluating
        self._evaluating = None

    def fired(
        self,
        key: Any,
        window: Window,
        watermark: int,
        results: Iterable[Any],
        pane: PaneInfo | None = None,
        retraction: bool = False,
    ) -> None:
        """The tracer hook: every firing, with what it emitted."""
        values = list(results)
        self.firings.append(
            FiringRecord(
                window=window,
                watermark=watermark,
                processing_time=self.op.current_processing_time,
                step=self.step,
                timer=self.timer,
                elements_seen=len(self.elements),
                batch=self.batch,
                pane=pane,
                retraction=retraction,
                elements=[] if retraction else [i for i in self._included if i >= 0],
                values=values,
            )
        )
        if self.tracer is not None:
            self.tracer.fired(key, window, watermark, values, pane, retraction)

    # ------------------------------------------------------------------ driving the replay

    def restore(self, state: InitialState) -> None:
        """Start from ``state`` (its contents' elements are of before the events)."""
        ks = copy.deepcopy(state.key_state)
        op = self.op
        op.reset_clocks(state.watermark, state.processing_time)
        op.restore_key(self.key, ks)
        for state_window, contents in ks.contents.items():
            count = len(contents) if self.spec.evictor is not None else 0
            self.membership[state_window] = [BEFORE_RETAINED] * count
        for window in ks.merging or ks.contents:
            self.windows.setdefault(window, [])
            self.restored.add(window)
        self.restored_watermark = state.watermark
        self.restored_timers = set(ks.event_timers)

    def feed(self, events: Iterable[Event]) -> None:
        for number, event in enumerate(events):
            if isinstance(event, Element):
                self._element(number, event)
            elif isinstance(event, Watermark) and event.timestamp >= LONG_MAX:
                self._end()
            elif isinstance(event, Watermark):
                self._clock(("watermark", event.timestamp), self.op.process_watermark)
            elif isinstance(event, ProcessingTime):
                self._clock(("processing_time", event.timestamp), self.op.advance_processing_time)
            elif isinstance(event, MicroBatch):
                self.batch = event.batch_id
            elif isinstance(event, EndOfInput):
                self._end()
            else:
                raise InputDataError(
                    f"`events` must hold Element, Watermark, ProcessingTime, MicroBatch or "
                    f"EndOfInput values; got {event!r} at position {number}"
                )
        self.step = ("done",)

    def _element(self, number: int, event: Element) -> None:
        op = self.op
        if self.ended:
            raise InputDataError(
                f"`events`: an Element after EndOfInput (position {number}, {event!r}): "
                "a bounded input ends once"
            )
        timestamp = event.timestamp
        if op.is_event_time and (isinstance(timestamp, bool) or not isinstance(timestamp, int)):
            raise InputDataError(
                f"`events`: Element at position {number} must have an int ms timestamp: "
                f"the pipeline's windows ({op.assigner!r}) are in event time; got "
                f"timestamp={timestamp!r}"
            )
        bounds = op.assigner.timestamp_range()
        if timestamp is not None and not bounds[0] <= timestamp <= bounds[1]:
            raise out_of_range_error(op.assigner, timestamp, bounds, event.value)
        index = len(self.elements)
        label = event.label if event.label is not None else str(event.value)
        record = ElementRecord(
            index,
            timestamp,
            label,
            self.batch,
            op.current_watermark,
            op.current_processing_time,
        )
        self.elements.append(record)
        tracer = self.tracer
        if tracer is not None:
            tracer.begin_element(self.key, timestamp, label)  # type: ignore[arg-type]
        self.step = ("element", index)
        record.code = op.process_element(self.key, event.value, timestamp)
        if record.code in (SIDE_OUTPUT, DROPPED):
            record.late_windows = list(op.assigner.assign_windows(event.value, timestamp, op.clock))
        if tracer is not None:
            self._trace_held()
            tracer.element_status(index, record.code)
        self.step = ("after", index)

    def _trace_held(self) -> None:
        assert self.tracer is not None
        ks = self.op.keys.get(self.key)
        if ks is not None:
            held = ks.merging if self.op.is_merging else ks.contents
            self.tracer.held_state(self.key, list(held), merging=self.op.is_merging)

    def _clock(self, step: tuple[str, int], advance: Any) -> None:
        self.step = step
        if step[0] == "watermark":
            if step[1] <= self.op.current_watermark:
                return
            if self.tracer is not None:
                self.tracer.watermark(step[1])
        elif step[1] <= self.op.current_processing_time:
            return
        advance(step[1])

    def _end(self) -> None:
        self.ended = True
        self.step = ("end_of_input",)
        if self.tracer is not None:
            self.tracer.end_of_input()
            self.tracer.watermark(LONG_MAX)
        self.op.process_watermark(LONG_MAX)


def replay(
    spec: OperatorSpec,
    key: Any,
    events: Iterable[Event],
    *,
    initial_state: InitialState | None = None,
    tracer: Tracer | None = None,
) -> Recorder:
    """Replay ``key``'s ``events`` through an observed general operator of ``spec``."""
    general = spec.with_run_options(
        batch_mode=False,
        record_output_watermarks=False,
        fast_paths=False,
        slice_incremental=False,
    )
    recorder = Recorder(key, general, tracer)
    if initial_state is not None:
        recorder.restore(initial_state)
    recorder.feed(events)
    return recorder
