"""The Dataflow model's triggers, with Apache Beam Python's names and meaning.

A Dataflow trigger decides when a window emits a *pane* and when the window is done;
how a pane relates to the ones before is the window's
:class:`~tidemark.panes.AccumulationMode`, and each pane says what it is
(:class:`~tidemark.panes.PaneInfo`). The guide, with the choices made where Beam's
SDKs differ: ``docs/panes.md``.

Each trigger answers Beam's ``TriggerFn`` questions, asked by the engine's pane
operator (:mod:`tidemark._engine.panes`) for one key and window:
``on_element_added`` after an element went into the window, ``should_fire`` after it
and at every timer the trigger set, ``on_fire`` when the window fires (True: the
trigger finished, the window closes), ``on_windows_merged`` when session windows
merged, ``reset`` when a repeating parent starts it again. Times follow Beam: the
watermark handed in is Beam's (``tidemark watermark + 1``, "no element before it"),
and a window's ``end`` is exclusive (``max_timestamp() + 1``).

A Dataflow trigger is a :class:`~tidemark.triggers.Trigger`, so it goes wherever a
trigger goes; it serves as a window's trigger or inside another Dataflow trigger, not
inside one of Flink's (``PurgingTrigger``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.time import TimeDomain, TimeLike, to_millis
from tidemark.triggers.base import _EVENT_TIME, _NO_DOMAIN, OnMergeContext, Trigger, TriggerContext
from tidemark.triggers.base import TriggerResult as _TriggerResult
from tidemark.windows import Window

__all__ = [
    "DataflowTrigger",
    "PaneTriggerContext",
    "StateTag",
    "AfterWatermark",
    "AfterCount",
    "AfterProcessingTime",
    "Repeatedly",
    "AfterAny",
    "AfterAll",
    "AfterEach",
    "OrFinally",
    "DefaultTrigger",
    "window_end",
]

EVENT_TIME = TimeDomain.EVENT_TIME
PROCESSING_TIME = TimeDomain.PROCESSING_TIME


def window_end(window: Window) -> int:
    """The window's exclusive end in Beam's terms: ``max_timestamp() + 1``."""
    return window.max_timestamp() + 1


# ------------------------------------------------------------------------------ state


def _add(a: Any, b: Any) -> Any:
    return a + b


def _either(a: Any, b: Any) -> Any:
    return a or b


@dataclass(frozen=True)
class StateTag:
    """A named piece of a trigger's per-window state and how two windows' values of it
    combine when they merge (sessions), as Beam's combining state tags."""

    name: str
    combine: str  # "sum", "any", "max" or "min"

    @property
    def empty(self) -> Any:
        return {"sum": 0, "any": False, "max": 0, "min": None}[self.combine]


COMBINERS: dict[str, Callable[[Any, Any], Any]] = {
    "sum": _add,
    "any": _either,
    "max": max,
    "min": min,
}


class PaneTriggerContext(ABC):
    """What a Dataflow trigger may use for one key and window: its state, named timers
    and the processing-time clock. :meth:`nested` gives a child trigger its own names."""

    @abstractmethod
    def nested(self, prefix: str) -> PaneTriggerContext:
        """The context of a child trigger: the same window, names under ``prefix``."""

    @abstractmethod
    def get_state(self, tag: StateTag) -> Any:
        """The tag's value (its ``empty`` value when never added)."""

    @abstractmethod
    def add_state(self, tag: StateTag, value: Any) -> None:
        """Combine ``value`` into the tag's value."""

    @abstractmethod
    def clear_state(self, tag: StateTag) -> None:
        """Forget the tag's value."""

    @abstractmethod
    def set_timer(self, name: str, domain: TimeDomain, time: int) -> None:
        """Set the timer ``name``: at Beam time ``time`` (event time: the watermark
        ``time - 1`` reaches it) ``should_fire`` is asked again."""

    @abstractmethod
    def clear_timer(self, name: str, domain: TimeDomain) -> None:
        """Forget the timer ``name`` (also the ones merged windows had set)."""

    @abstractmethod
    def get_current_processing_time(self) -> int:
        """The processing-time clock, in ms."""


# ------------------------------------------------------------------------------ base


class DataflowTrigger(Trigger[Window]):
    """A trigger of the Dataflow model (Beam's ``TriggerFn``).

    Subclass it for a trigger of your own with Beam's five questions; keep per-window
    facts in the context's state (:class:`StateTag`), never on ``self``.
    """

    @abstractmethod
    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        """An element went into ``window`` (its contents already hold it)."""

    @abstractmethod
    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        """``to_be_merged`` merged into ``merge_result``; their state is combined
        already (``ctx`` is the result's)."""

    @abstractmethod
    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        """Whether ``window`` fires now; ``watermark`` is Beam's (a timer's own time
        when a timer asks)."""

    @abstractmethod
    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        """``window`` fires; return True when this trigger is finished."""

    @abstractmethod
    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        """Start again: forget this trigger's state (a repeating parent asks)."""

    def has_on_time_pane(self) -> bool:
        """Whether the trigger fires when the watermark passes the window's end."""
        return False

    def children(self) -> tuple[DataflowTrigger, ...]:
        """The triggers this one is made of."""
        return ()

    def own_timer_domains(self) -> frozenset[TimeDomain]:
        """The domains of the timers this trigger itself sets."""
        return _NO_DOMAIN

    # The Trigger interface: the pane operator asks the questions above instead.

    def timer_domains(self) -> frozenset[TimeDomain]:
        """The domains of this trigger's timers and its children's, and event time: a
        window expires on the watermark."""
        domains = set(_EVENT_TIME) | set(self.own_timer_domains())
        for child in self.children():
            domains |= child.timer_domains()
        return frozenset(domains)

    def can_merge(self) -> bool:
        return True

    def not_nestable(self) -> WindowSpecError:
        return WindowSpecError(
            f"{self!r} is a Dataflow trigger: it serves as a window's trigger "
            "(`.trigger(...)`) or inside another Dataflow trigger, not inside one of "
            "Flink's (PurgingTrigger); use AccumulationMode.DISCARDING to purge"
        )

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> _TriggerResult:
        raise self.not_nestable()

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> _TriggerResult:
        raise self.not_nestable()

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> _TriggerResult:
        raise self.not_nestable()

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        raise self.not_nestable()

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        raise self.not_nestable()


def _dataflow(trigger: Any, parameter: str) -> DataflowTrigger:
    if not isinstance(trigger, DataflowTrigger):
        raise WindowSpecError(
            f"`{parameter}` must be a Dataflow trigger (AfterWatermark, AfterCount, "
            f"AfterProcessingTime, Repeatedly, AfterAny, AfterAll, AfterEach, OrFinally, "
            f"DefaultTrigger); got {trigger!r}"
        )
    return trigger


# ------------------------------------------------------------------------------ leaves


class DefaultTrigger(DataflowTrigger):
    """Fires when the watermark passes the window's end, and again for every late
    element; never finishes (Beam's default; ``Repeatedly(AfterWatermark())``)."""

    def _timer(self, window: Window) -> str:
        return repr(window)

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.set_timer(self._timer(window), EVENT_TIME, window_end(window))

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        for window in to_be_merged:
            ctx.clear_timer(self._timer(window), EVENT_TIME)

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        passed = watermark >= window_end(window)
        if passed:
            ctx.clear_timer(self._timer(window), EVENT_TIME)
        return passed

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        return False

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.clear_timer(self._timer(window), EVENT_TIME)

    def has_on_time_pane(self) -> bool:
        return True

    def own_timer_domains(self) -> frozenset[TimeDomain]:
        return _EVENT_TIME


class AfterCount(DataflowTrigger):
    """Fires once the window's pane holds ``count`` elements, and finishes.

    >>> AfterCount(0)
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `count` must be an int >= 1; got count=0
    """

    COUNT = StateTag("count", "sum")

    def __init__(self, count: int):
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise WindowSpecError(f"`count` must be an int >= 1; got count={count!r}")
        self.count = count

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.add_state(self.COUNT, 1)

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        pass  # the merged windows' counts add up

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        return bool(ctx.get_state(self.COUNT) >= self.count)

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        return True

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.clear_state(self.COUNT)

    def __repr__(self) -> str:
        return f"AfterCount({self.count})"


class AfterProcessingTime(DataflowTrigger):
    """Fires ``delay`` after the pane's first element, on the processing-time clock,
    and finishes.

    ``delay`` is a duration (int ms, ``Duration`` or ``timedelta``; Beam Python counts
    seconds). As Beam Java: the trigger fires once the clock reaches the time, whether
    its own timer or another asks (Beam's Python driver fires it on any
    processing-time timer), and merged windows keep the earliest time.
    """

    FIRE_AT = StateTag("fire_at", "min")

    def __init__(self, delay: TimeLike = 0):
        self.delay_ms = to_millis(delay, "delay")
        if self.delay_ms < 0:
            raise WindowSpecError(f"`delay` must be >= 0; got delay={self.delay_ms}ms")

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        if ctx.get_state(self.FIRE_AT) is None:
            fire_at = ctx.get_current_processing_time() + self.delay_ms
            ctx.add_state(self.FIRE_AT, fire_at)
            ctx.set_timer("", PROCESSING_TIME, fire_at)

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        fire_at = ctx.get_state(self.FIRE_AT)
        if fire_at is not None:
            ctx.set_timer("", PROCESSING_TIME, fire_at)

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        fire_at = ctx.get_state(self.FIRE_AT)
        return fire_at is not None and ctx.get_current_processing_time() >= fire_at

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        return True

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.clear_state(self.FIRE_AT)
        ctx.clear_timer("", PROCESSING_TIME)

    def own_timer_domains(self) -> frozenset[TimeDomain]:
        return frozenset((PROCESSING_TIME,))

    def __repr__(self) -> str:
        return f"AfterProcessingTime({self.delay_ms})"


# ------------------------------------------------------------------------------ composites


class Repeatedly(DataflowTrigger):
    """Fires whenever ``trigger`` would, starting it again after each time it
    finishes; never finishes itself."""

    def __init__(self, trigger: DataflowTrigger):
        self.underlying = _dataflow(trigger, "trigger")

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
    trigger = _dataflow(trigger, parameter)
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
        return _EVENT_TIME

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
        self.triggers = tuple(_dataflow(t, "triggers") for t in triggers)

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
        self.triggers = tuple(_dataflow(t, "triggers") for t in triggers)

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
