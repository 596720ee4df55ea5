"""Trigger drivers: how the window operator asks its trigger, chosen once per operator.

A driver answers the core (:class:`~tidemark._engine.contract.OperatorCore`) at the
moments a trigger is asked (as Beam's ``create_trigger_driver`` chooses a driver behind
one interface):

- :meth:`~TriggerDriver.accepts`: whether a window takes elements (a finished Dataflow
  trigger closes its window);
- :meth:`~TriggerDriver.element_added`: an element went into a window's contents;
- :meth:`~TriggerDriver.after_element`: every window of the element was served;
- :meth:`~TriggerDriver.on_timer`: a timer of a window fired (at its expiry, the core
  then clears all of the window's state);
- :meth:`~TriggerDriver.on_merge`: windows merged (before their contents are folded);
- :meth:`~TriggerDriver.clear`: a window's trigger state goes.

:class:`FlinkTriggers` asks Flink's :class:`~tidemark.triggers.Trigger` and applies each
``TriggerResult`` at once; :class:`EndOfWindowTrigger` is the same for a trigger that
promises :class:`~tidemark.triggers.EventTimeTrigger`'s behaviour, served by a fast path
that does not call it; :class:`~tidemark._engine.panes.PaneDriver` asks a Dataflow
trigger Beam's questions and fires panes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidemark._engine.contexts import TriggerCallContext
from tidemark._engine.keystate import KeyState
from tidemark._engine.timers import TimerService
from tidemark.time import TimeDomain
from tidemark.triggers import Trigger, TriggerResult
from tidemark.windows import Window

if TYPE_CHECKING:
    from tidemark._engine.contract import OperatorCore

__all__ = ["TriggerDriver", "FlinkTriggers", "EndOfWindowTrigger"]

EVENT_TIME = TimeDomain.EVENT_TIME


class TriggerDriver:
    """The interface the core asks its trigger through (see the module docstring).

    Parameters
    ----------
    op : OperatorCore
        The core it serves (its helpers fire, clear and register cleanup timers).
    """

    #: Whether a window that never expires (a global window) still gets an expiry timer,
    #: at ``LONG_MAX``: the end of input (a Dataflow trigger's last pane).
    expires_at_end_of_input = False

    def __init__(self, op: OperatorCore):
        self.op = op

    def expiry_timers(self) -> TimerService:
        """The timer service of the windows' cleanup timers: their own time domain's."""
        op = self.op
        return op.event_time_timers if op.is_event_time else op.processing_time_timers

    def accepts(self, ks: KeyState, window: Window) -> bool:
        """Whether ``window`` takes elements (it is neither late nor merged away)."""
        return True

    def element_added(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        """``value`` went into ``window``'s contents (``state_window`` holds them); the
        core registers the window's cleanup timer next."""
        raise NotImplementedError

    def after_element(self, key: Any, ks: KeyState) -> None:
        """Every window of the element was served (before the key may be forgotten)."""

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
        """A timer of ``window`` fired at ``time``; ``expires``: it is the window's
        cleanup timer, and the core clears all of the window's state next."""
        raise NotImplementedError

    def on_merge(self, key: Any, ks: KeyState, result: Window, merged: list[Window]) -> None:
        """``merged`` merged into ``result`` (checked; their contents are folded next):
        the trigger hears of it, the merged windows' timers and cleanup timers go."""
        raise NotImplementedError

    def clear(self, key: Any, ks: KeyState, window: Window) -> None:
        """``window``'s trigger state and timers go (its state is being cleared)."""
        raise NotImplementedError


class FlinkTriggers(TriggerDriver):
    """Flink's trigger calls, as Flink's window operator makes them; each
    :class:`~tidemark.triggers.TriggerResult` applied at once (FIRE evaluates the
    window function, PURGE drops the contents).

    Parameters
    ----------
    op : OperatorCore
    trigger : Trigger
        The window's trigger (the spec's, Flink's kind).
    """

    def __init__(self, op: OperatorCore, trigger: Trigger[Any]):
        super().__init__(op)
        self.trigger = trigger

    def element_added(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        ctx = TriggerCallContext(self.op, key, ks, window)
        try:
            result = self.trigger.on_element(value, timestamp, window, ctx)
        except Exception as exc:
            raise self.op.user_error("trigger.on_element", key, window, exc) from exc
        self._apply(key, ks, window, state_window, result)

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
        ctx = TriggerCallContext(self.op, key, ks, window)
        try:
            if domain is EVENT_TIME:
                result = self.trigger.on_event_time(time, window, ctx)
            else:
                result = self.trigger.on_processing_time(time, window, ctx)
        except Exception as exc:
            raise self.op.user_error("the trigger's timer callback", key, window, exc) from exc
        self._apply(key, ks, window, state_window, result)

    def on_merge(self, key: Any, ks: KeyState, result: Window, merged: list[Window]) -> None:
        op = self.op
        try:
            self.trigger.on_merge(result, TriggerCallContext(op, key, ks, result, merged))
        except Exception as exc:
            raise op.user_error("trigger.on_merge", key, result, exc) from exc
        for window in merged:
            self.clear(key, ks, window)
            op.delete_cleanup_timer(ks, window)

    def clear(self, key: Any, ks: KeyState, window: Window) -> None:
        try:
            self.trigger.clear(window, TriggerCallContext(self.op, key, ks, window))
        except Exception as exc:
            raise self.op.user_error("trigger.clear", key, window, exc) from exc
        if not ks.trigger_state.get(window, True):
            del ks.trigger_state[window]

    def _apply(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, result: Any
    ) -> None:
        op = self.op
        if not isinstance(result, TriggerResult):
            raise op.user_error(
                "the trigger", key, window, TypeError(f"returned {result!r}, not a TriggerResult")
            )
        if result.is_fire():
            op.fire(key, ks, window, state_window, op.event_time_timers.current_time)
        if result.is_purge():
            ks.contents.pop(state_window, None)


class EndOfWindowTrigger(FlinkTriggers):
    """:class:`FlinkTriggers` for a trigger that fires only at the window end
    (``Trigger.fires_only_at_window_end``: :class:`~tidemark.triggers.EventTimeTrigger`'s
    behaviour), under a fast path that serves it without calling it: its ``clear``
    deletes the end-of-window timer, as the promise says, without a call."""

    def clear(self, key: Any, ks: KeyState, window: Window) -> None:
        self.op.event_time_timers.delete(ks, window.max_timestamp(), window)
