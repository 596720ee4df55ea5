"""The trigger extension point: :class:`Trigger`, its contexts and :class:`TriggerResult`.

A trigger is consulted for every element added to a window (``on_element``) and for every
timer it registered (``on_event_time``, ``on_processing_time``); it answers with a
:class:`TriggerResult`. Its per-window state lives behind
``ctx.get_partitioned_state(descriptor)``, so one trigger object serves every key and
window. Subclass :class:`Trigger` for a trigger of your own; Flink's built-in triggers
(:mod:`tidemark.triggers.builtin`) are examples of every kind.

A custom trigger, written and tested in the harness: ``docs/testing.md``.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from tidemark.state import State, StateDescriptor
from tidemark.time import TimeDomain
from tidemark.windows import Window

__all__ = [
    "TimeDomain",
    "TriggerResult",
    "TriggerContext",
    "OnMergeContext",
    "Trigger",
]

W = TypeVar("W", bound=Window)
S = TypeVar("S", bound=State)


class TriggerResult(enum.Enum):
    """What a trigger tells the window operator to do.

    >>> TriggerResult.FIRE_AND_PURGE.is_fire(), TriggerResult.FIRE_AND_PURGE.is_purge()
    (True, True)
    """

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class TriggerContext(ABC):
    """What a trigger may do for the key and window it is called for.

    The engine makes one context per trigger call; it is bound to the call's key and
    window and must not be kept beyond the call.

    Supported
    ---------
    - reading both clocks;
    - registering and deleting event-time and processing-time timers for the window
      (a timer registered twice is one timer; deleting an absent timer does nothing);
    - partitioned state (:meth:`get_partitioned_state`) of the key and window.

    Not supported
    -------------
    - timers or state of other keys or windows;
    - registering a timer in a time domain the trigger did not declare in
      :meth:`Trigger.timer_domains` (a streaming query serves the declared domains).
    """

    @abstractmethod
    def get_current_processing_time(self) -> int:
        """The processing-time clock, in ms (set by the caller; never read from a wall
        clock by the engine itself)."""

    @abstractmethod
    def get_current_watermark(self) -> int:
        """The current watermark, in ms (``LONG_MIN`` before the first one)."""

    @abstractmethod
    def register_processing_time_timer(self, time: int) -> None:
        """Call :meth:`Trigger.on_processing_time` when the clock reaches ``time``."""

    @abstractmethod
    def register_event_time_timer(self, time: int) -> None:
        """Call :meth:`Trigger.on_event_time` when the watermark reaches ``time``."""

    @abstractmethod
    def delete_processing_time_timer(self, time: int) -> None:
        """Forget the processing-time timer at ``time`` of this key and window."""

    @abstractmethod
    def delete_event_time_timer(self, time: int) -> None:
        """Forget the event-time timer at ``time`` of this key and window."""

    @abstractmethod
    def get_partitioned_state(self, state_descriptor: StateDescriptor[S]) -> S:
        """State of ``state_descriptor`` for the current key and window, created on first
        use (its value starts as ``None``)."""


class OnMergeContext(TriggerContext):
    """The context of :meth:`Trigger.on_merge`: bound to the merge result window, it can
    also fold the merged windows' state into it."""

    @abstractmethod
    def merge_partitioned_state(self, state_descriptor: StateDescriptor[Any]) -> None:
        """Fold the merged windows' state of ``state_descriptor`` into the result window
        (with the descriptor's merge function) and remove it from the merged windows."""


_BOTH_DOMAINS = frozenset((TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME))
_EVENT_TIME = frozenset((TimeDomain.EVENT_TIME,))
_PROCESSING_TIME = frozenset((TimeDomain.PROCESSING_TIME,))
_NO_DOMAIN: frozenset[TimeDomain] = frozenset()


class Trigger(ABC, Generic[W]):
    """Decides when a window fires and when its contents are purged.

    Subclass it for a custom trigger, typed by the windows it serves
    (``Trigger[TimeWindow]``, ``Trigger[GlobalWindow]``, or ``Trigger[Window]`` for
    any). One trigger object serves every key and window: keep per-window facts in
    partitioned state (``ctx.get_partitioned_state``), never on ``self``.

    Call order, per key and window: :meth:`on_element` after each element was added;
    :meth:`on_event_time` / :meth:`on_processing_time` when a timer it registered (or the
    window's cleanup timer) is reached; :meth:`on_merge` when windows merged (merging
    assigners only); :meth:`clear` once, when the window's state is removed. A callback's
    :class:`TriggerResult` is applied at once: FIRE evaluates the window function on the
    contents, PURGE removes the contents.

    Declarations (:meth:`timer_domains`, :meth:`fires_only_at_window_end`,
    :meth:`can_merge`) tell the engine and the Spark modes what the trigger needs; they
    are asked once, when a pipeline is built.

    Supported
    ---------
    - timers in the declared time domains, and partitioned state, through the context;
    - results of any kind from any callback.

    Not supported
    -------------
    - state on the trigger object, shared between keys and windows;
    - reading state of other windows than the one the call is for.
    """

    @abstractmethod
    def on_element(
        self, element: Any, timestamp: int | None, window: W, ctx: TriggerContext
    ) -> TriggerResult:
        """Called for every element added to ``window``, after it was added.

        Parameters
        ----------
        element : Any
            The element (a ``pyspark.sql.Row`` on Spark).
        timestamp : int or None
            Its event timestamp in ms; ``None`` for elements without one (processing
            time).
        window : Window
            The window the element went into (for merging assigners, the merged window).
        ctx : TriggerContext
            Timers and state of this key and window.
        """

    @abstractmethod
    def on_processing_time(self, time: int, window: W, ctx: TriggerContext) -> TriggerResult:
        """Called when the processing-time clock reaches ``time``, a timer registered
        for ``window`` (by this trigger, or the window's cleanup timer of a
        processing-time assigner)."""

    @abstractmethod
    def on_event_time(self, time: int, window: W, ctx: TriggerContext) -> TriggerResult:
        """Called when the watermark reaches ``time``, a timer registered for ``window``
        (by this trigger, or the window's cleanup timer of an event-time assigner).
        Timers fire in time order; ``ctx.get_current_watermark()`` is the watermark that
        reached them."""

    def can_merge(self) -> bool:
        """Whether :meth:`on_merge` is implemented; merging assigners require it."""
        return False

    def on_merge(self, window: W, ctx: OnMergeContext) -> None:
        """Called when windows merged into ``window`` (merging assigners only).

        The merged windows' timers are gone (their :meth:`clear` was called): register
        the timers ``window`` needs here, and fold partitioned state with
        ``ctx.merge_partitioned_state``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not support merging")

    @abstractmethod
    def clear(self, window: W, ctx: TriggerContext) -> None:
        """Called once when ``window`` is removed: delete the timers and partitioned
        state this trigger holds for it (the window's cleanup timer is the engine's)."""

    def timer_domains(self) -> frozenset[TimeDomain]:
        """The time domains this trigger registers timers in.

        Spark's streaming mode serves these domains and the assigner's: with both, the
        query runs in Spark's ProcessingTime mode (a micro-batch at every trigger
        interval) with the watermark still followed; a BATCH run reads the wall clock
        only when processing time is among them.

        The default, both domains, is the safe answer for a trigger that does not say:
        BATCH reads the wall clock for it; a streaming query takes such a trigger on
        windows with a clock of their own (event-time or processing-time windows) to use
        that clock (:meth:`declares_timer_domains`), and on ``GlobalWindows`` serves it
        both. Override it to return exactly the domains used: ``frozenset()`` for a
        trigger without timers, ``frozenset({TimeDomain.EVENT_TIME})`` for one on the
        watermark, both for one that mixes them.
        """
        return _BOTH_DOMAINS

    def declares_timer_domains(self) -> bool:
        """Whether :meth:`timer_domains` is this trigger's own answer, not the default.

        A streaming query on windows with a clock of their own runs an undeclared
        trigger on the windows' clock (as a query of that one domain, which ends with
        ``availableNow``); a timer it registers on the other clock then fails the query
        with a message asking to declare it. Wrapping triggers delegate.
        """
        return type(self).timer_domains is not Trigger.timer_domains

    def fires_only_at_window_end(self) -> bool:
        """Whether this trigger behaves exactly as :class:`EventTimeTrigger`.

        That is: FIRE (without purging) when the watermark reaches
        ``window.max_timestamp()``, FIRE at once for an element added after that, no
        other timer, no state. The engine's aligned fast path and the SQL fast path serve
        such a trigger without calling it. The default is False.
        """
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# PyFlink nests the contexts in Trigger; keep those spellings working.
for _context in (TriggerContext, OnMergeContext):
    setattr(Trigger, _context.__name__, _context)
