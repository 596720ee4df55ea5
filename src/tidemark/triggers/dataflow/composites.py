"""The Dataflow triggers made of others: :class:`Repeatedly`, :class:`AfterWatermark`
(early and late triggers), :class:`AfterAny`, :class:`AfterAll`, :class:`OrFinally`,
:class:`AfterEach`. The package's guide: :mod:`tidemark.triggers.dataflow`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.time import TimeDomain
from tidemark.triggers.dataflow.base import (
    EVENT_TIME,
    EVENT_TIME_ONLY,
    DataflowTrigger,
    PaneTriggerContext,
    StateTag,
    dataflow_trigger,
    window_end,
)
from tidemark.windows import Window

__all__ = ["Repeatedly", "AfterWatermark", "AfterAny", "AfterAll", "OrFinally", "AfterEach"]


class Repeatedly(DataflowTrigger):
    """Fires whenever ``trigger`` would, starting it again after each time it
    finishes; never finishes itself."""

    def __init__(self, trigger: DataflowTrigger):
        self.underlying = dataflow_trigger(trigger, "trigger")

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        self.underlying.on_element_added(element, window, ctx)

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        self.underlying.on_windows_merged(to_be_merged, merge_result, ctx)

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        return self.underlying.should_fire(domain, watermark, window, ctx)

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        if self.underlying.on_fire(watermark, window, ctx):
            self.underlying.reset(window, ctx)
        return False

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        self.underlying.reset(window, ctx)

    def has_on_time_pane(self) -> bool:
        return self.underlying.has_on_time_pane()

    def children(self) -> tuple[DataflowTrigger, ...]:
        return (self.underlying,)

    def __repr__(self) -> str:
        return f"Repeatedly({self.underlying!r})"


def _repeating(trigger: Any, parameter: str) -> DataflowTrigger | None:
    """``trigger`` wrapped in :class:`Repeatedly` unless it is one (Beam does this for
    AfterWatermark's early and late triggers)."""
    if trigger is None:
        return None
    trigger = dataflow_trigger(trigger, parameter)
    return trigger if isinstance(trigger, Repeatedly) else Repeatedly(trigger)


class AfterWatermark(DataflowTrigger):
    """Fires an on-time pane when the watermark passes the window's end; before that
    whenever ``early`` fires, after it whenever ``late`` fires.

    Without ``late`` the on-time pane finishes the trigger (later elements reach a
    closed window). ``early`` and ``late`` repeat (they are wrapped in
    :class:`Repeatedly`, as Beam does). The on-time pane fires even when early panes
    took every element (an empty pane).
    """

    LATE = StateTag("is_late", "any")

    def __init__(self, early: DataflowTrigger | None = None, late: DataflowTrigger | None = None):
        self.early = _repeating(early, "early")
        self.late = _repeating(late, "late")

    def _is_late(self, ctx: PaneTriggerContext) -> bool:
        return self.late is not None and bool(ctx.get_state(self.LATE))

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        if self._is_late(ctx):
            assert self.late is not None
            self.late.on_element_added(element, window, ctx.nested("late/"))
            return
        ctx.set_timer("", EVENT_TIME, window_end(window))
        if self.early is not None:
            self.early.on_element_added(element, window, ctx.nested("early/"))

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        if self._is_late(ctx):
            assert self.late is not None
            self.late.on_windows_merged(to_be_merged, merge_result, ctx.nested("late/"))
            return
        for window in to_be_merged:
            if window_end(window) != window_end(merge_result):
                ctx.clear_timer("", EVENT_TIME)
        if self.early is not None:
            self.early.on_windows_merged(to_be_merged, merge_result, ctx.nested("early/"))

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        if self._is_late(ctx):
            assert self.late is not None
            return self.late.should_fire(domain, watermark, window, ctx.nested("late/"))
        if watermark >= window_end(window):
            ctx.clear_timer("", EVENT_TIME)
            return True
        if self.early is not None:
            return self.early.should_fire(domain, watermark, window, ctx.nested("early/"))
        return False

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        if self._is_late(ctx):
            assert self.late is not None
            return self.late.on_fire(watermark, window, ctx.nested("late/"))
        if watermark >= window_end(window):
            ctx.add_state(self.LATE, True)
            return self.late is None
        if self.early is not None:
            self.early.on_fire(watermark, window, ctx.nested("early/"))
        return False

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        if self.late is not None:
            ctx.clear_state(self.LATE)
        if self.early is not None:
            self.early.reset(window, ctx.nested("early/"))
        if self.late is not None:
            self.late.reset(window, ctx.nested("late/"))

    def has_on_time_pane(self) -> bool:
        return True

    def children(self) -> tuple[DataflowTrigger, ...]:
        return tuple(t for t in (self.early, self.late) if t is not None)

    def own_timer_domains(self) -> frozenset[TimeDomain]:
        return EVENT_TIME_ONLY

    def __repr__(self) -> str:
        parts = [
            f"{name}={trigger.underlying!r}"
            for name, trigger in (("early", self.early), ("late", self.late))
            if isinstance(trigger, Repeatedly)
        ]
        return f"AfterWatermark({', '.join(parts)})"


class _Parallel(DataflowTrigger):
    """Children that all see every element; :meth:`_combine` says when the parent
    fires and finishes (any or all of them)."""

    def __init__(self, *triggers: DataflowTrigger):
        if not triggers:
            raise WindowSpecError(f"{type(self).__name__} needs at least one trigger; got none")
        self.triggers = tuple(dataflow_trigger(t, "triggers") for t in triggers)

    @staticmethod
    @abstractmethod
    def _combine(results: list[bool]) -> bool: ...

    @abstractmethod
    def _decides_early(self, fired: bool) -> bool:
        """Whether one child's answer ``fired`` settles :meth:`should_fire` (the others
        are not asked then, as Python's ``any`` / ``all`` stop)."""

    def _child(self, ctx: PaneTriggerContext, index: int) -> PaneTriggerContext:
        return ctx.nested(f"{index}/")

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        for index, trigger in enumerate(self.triggers):
            trigger.on_element_added(element, window, self._child(ctx, index))

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        for index, trigger in enumerate(self.triggers):
            trigger.on_windows_merged(to_be_merged, merge_result, self._child(ctx, index))

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        answers = []
        for index, trigger in enumerate(self.triggers):
            fired = bool(trigger.should_fire(domain, watermark, window, self._child(ctx, index)))
            answers.append(fired)
            if self._decides_early(fired):
                break
        return self._combine(answers)

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        finished = []
        for index, trigger in enumerate(self.triggers):
            child = self._child(ctx, index)
            if trigger.should_fire(EVENT_TIME, watermark, window, child):
                finished.append(trigger.on_fire(watermark, window, child))
        return self._combine(finished)

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        for index, trigger in enumerate(self.triggers):
            trigger.reset(window, self._child(ctx, index))

    def has_on_time_pane(self) -> bool:
        return any(t.has_on_time_pane() for t in self.triggers)

    def children(self) -> tuple[DataflowTrigger, ...]:
        return self.triggers

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(t) for t in self.triggers)})"


class AfterAny(_Parallel):
    """Fires when any of its triggers fires; finishes when one of them finishes."""

    @staticmethod
    def _combine(results: list[bool]) -> bool:
        return any(results)

    def _decides_early(self, fired: bool) -> bool:
        return fired


class AfterAll(_Parallel):
    """Fires when all of its triggers would fire; finishes when all that fired then
    finished."""

    @staticmethod
    def _combine(results: list[bool]) -> bool:
        return all(results)

    def _decides_early(self, fired: bool) -> bool:
        return not fired


class OrFinally(AfterAny):
    """``trigger`` until ``until`` fires: fires as either does, and finishes when
    either finishes (Beam's ``OrFinally``, an ``AfterAny`` of the two)."""

    def __init__(self, trigger: DataflowTrigger, until: DataflowTrigger):
        super().__init__(trigger, until)

    def __repr__(self) -> str:
        return f"OrFinally({self.triggers[0]!r}, {self.triggers[1]!r})"


class AfterEach(DataflowTrigger):
    """Its triggers one after the other: each serves until it finishes, then the next
    sees the elements that arrive after that; finishes with the last."""

    INDEX = StateTag("index", "max")

    def __init__(self, *triggers: DataflowTrigger):
        if not triggers:
            raise WindowSpecError("AfterEach needs at least one trigger; got none")
        self.triggers = tuple(dataflow_trigger(t, "triggers") for t in triggers)

    def _current(self, ctx: PaneTriggerContext) -> tuple[int, PaneTriggerContext] | None:
        index = ctx.get_state(self.INDEX)
        if index >= len(self.triggers):
            return None
        return index, ctx.nested(f"{index}/")

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        current = self._current(ctx)
        if current is not None:
            self.triggers[current[0]].on_element_added(element, window, current[1])

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        current = self._current(ctx)
        if current is not None:
            self.triggers[current[0]].on_windows_merged(to_be_merged, merge_result, current[1])

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        current = self._current(ctx)
        if current is None:
            return False
        return bool(self.triggers[current[0]].should_fire(domain, watermark, window, current[1]))

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        current = self._current(ctx)
        if current is None:
            return False
        index, child = current
        if self.triggers[index].on_fire(watermark, window, child):
            index += 1
            ctx.add_state(self.INDEX, index)
        return index == len(self.triggers)

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.clear_state(self.INDEX)
        for index, trigger in enumerate(self.triggers):
            trigger.reset(window, ctx.nested(f"{index}/"))

    def has_on_time_pane(self) -> bool:
        return any(t.has_on_time_pane() for t in self.triggers)

    def children(self) -> tuple[DataflowTrigger, ...]:
        return self.triggers

    def __repr__(self) -> str:
        return f"AfterEach({', '.join(repr(t) for t in self.triggers)})"
