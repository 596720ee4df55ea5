"""The Dataflow trigger's interface: :class:`DataflowTrigger` (Beam's ``TriggerFn``), the
context it is asked with (:class:`PaneTriggerContext`) and its per-window state
(:class:`StateTag`). The package's guide: :mod:`tidemark.triggers.dataflow`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.time import TimeDomain
from tidemark.windows import Window

__all__ = [
    "DataflowTrigger",
    "PaneTriggerContext",
    "StateTag",
    "COMBINERS",
    "window_end",
    "dataflow_trigger",
    "EVENT_TIME",
    "PROCESSING_TIME",
    "EVENT_TIME_ONLY",
]

EVENT_TIME = TimeDomain.EVENT_TIME
PROCESSING_TIME = TimeDomain.PROCESSING_TIME
EVENT_TIME_ONLY = frozenset((EVENT_TIME,))
_NO_DOMAIN: frozenset[TimeDomain] = frozenset()


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


class DataflowTrigger(ABC):
    """A trigger of the Dataflow model (Beam's ``TriggerFn``).

    Its own kind, beside Flink's :class:`~tidemark.triggers.Trigger`: a window takes
    either (``.trigger(...)``); the pane driver (:mod:`tidemark._engine.panes`) asks it
    Beam's five questions, never Flink's callbacks. Subclass it for a trigger of your
    own; keep per-window facts in the context's state (:class:`StateTag`), never on
    ``self``.

    Its declarations (:meth:`timer_domains`, :meth:`declares_timer_domains`,
    :meth:`fires_only_at_window_end`, :meth:`can_merge`) answer the questions the
    engine and the Spark modes ask of any window's trigger, once, when a pipeline is
    built.
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

    # ------------------------------------------------------------------ declarations

    def timer_domains(self) -> frozenset[TimeDomain]:
        """The domains of this trigger's timers and its children's, and event time: a
        window expires on the watermark (as :meth:`Trigger.timer_domains
        <tidemark.triggers.Trigger.timer_domains>`)."""
        domains = set(EVENT_TIME_ONLY) | set(self.own_timer_domains())
        for child in self.children():
            domains |= child.timer_domains()
        return frozenset(domains)

    def declares_timer_domains(self) -> bool:
        """True: :meth:`timer_domains` is always this trigger's own answer."""
        return True

    def fires_only_at_window_end(self) -> bool:
        """False: a Dataflow trigger fires panes, which no fast path for Flink's
        end-of-window trigger serves."""
        return False

    def can_merge(self) -> bool:
        """True: merged windows' pane records combine (:meth:`on_windows_merged`)."""
        return True

    def not_nestable(self) -> WindowSpecError:
        """The error for this trigger given where Flink's triggers nest one."""
        return WindowSpecError(
            f"{self!r} is a Dataflow trigger: it serves as a window's trigger "
            "(`.trigger(...)`) or inside another Dataflow trigger, not inside one of "
            "Flink's (PurgingTrigger); use AccumulationMode.DISCARDING to purge"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def dataflow_trigger(trigger: Any, parameter: str) -> DataflowTrigger:
    """``trigger``, refused unless it is a Dataflow trigger (``parameter`` names it)."""
    if not isinstance(trigger, DataflowTrigger):
        raise WindowSpecError(
            f"`{parameter}` must be a Dataflow trigger (AfterWatermark, AfterCount, "
            f"AfterProcessingTime, Repeatedly, AfterAny, AfterAll, AfterEach, OrFinally, "
            f"DefaultTrigger); got {trigger!r}"
        )
    return trigger
