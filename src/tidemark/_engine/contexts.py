"""The contexts the operator hands to triggers, window functions, assigners and evictors.

Each context is made for one call with the key, key state and window it concerns; none
is re-pointed between calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from tidemark.assigners import WindowAssignerContext
from tidemark.evictors import EvictorContext
from tidemark.functions import ProcessWindowContext
from tidemark.outputs import OutputTag
from tidemark.panes import PaneInfo
from tidemark.state import KeyedStateStore, State, StateDescriptor
from tidemark.triggers import OnMergeContext
from tidemark.windows import Window

if TYPE_CHECKING:
    from tidemark._engine.contract import OperatorCore
    from tidemark._engine.keystate import KeyState
    from tidemark._engine.timers import TimerService

__all__ = ["TriggerCallContext", "ProcessCallContext", "ClockContext"]

S = TypeVar("S", bound=State)


class ClockContext(WindowAssignerContext, EvictorContext):
    """The operator's clocks, for assigners and evictors (they need nothing else)."""

    __slots__ = ("_event_time", "_processing_time")

    def __init__(self, event_time: TimerService, processing_time: TimerService):
        self._event_time = event_time
        self._processing_time = processing_time

    def get_current_processing_time(self) -> int:
        return self._processing_time.current_time

    def get_current_watermark(self) -> int:
        return self._event_time.current_time


class TriggerCallContext(OnMergeContext):
    """Timers and partitioned state of one key and window, for one trigger call."""

    __slots__ = ("_op", "_key", "_ks", "_window", "_merged")

    def __init__(
        self,
        op: OperatorCore,
        key: Any,
        ks: KeyState,
        window: Window,
        merged: list[Window] | None = None,
    ):
        self._op = op
        self._key = key
        self._ks = ks
        self._window = window
        self._merged = merged

    def get_current_processing_time(self) -> int:
        return self._op.processing_time_timers.current_time

    def get_current_watermark(self) -> int:
        return self._op.event_time_timers.current_time

    def register_event_time_timer(self, time: int) -> None:
        self._op.event_time_timers.register(self._key, self._ks, time, self._window)

    def register_processing_time_timer(self, time: int) -> None:
        self._op.processing_time_timers.register(self._key, self._ks, time, self._window)

    def delete_event_time_timer(self, time: int) -> None:
        self._op.event_time_timers.delete(self._ks, time, self._window)

    def delete_processing_time_timer(self, time: int) -> None:
        self._op.processing_time_timers.delete(self._ks, time, self._window)

    def get_partitioned_state(self, state_descriptor: StateDescriptor[S]) -> S:
        store = self._ks.trigger_state.get(self._window)
        if store is None:
            store = self._ks.trigger_state[self._window] = {}
        return state_descriptor.create(store)

    def merge_partitioned_state(self, state_descriptor: StateDescriptor[Any]) -> None:
        if not self._merged:
            return
        name = state_descriptor.name
        trigger_state = self._ks.trigger_state
        for source_window in self._merged:
            source = trigger_state.get(source_window)
            if not source or name not in source:
                continue
            value = source.pop(name)
            if not source:
                del trigger_state[source_window]
            target = trigger_state.setdefault(self._window, {})
            target[name] = (
                state_descriptor.merge_values(target[name], value) if name in target else value
            )


class ProcessCallContext(ProcessWindowContext):
    """What a process window function sees during one evaluation (or ``clear``), under
    the watermark of that firing."""

    __slots__ = ("_op", "_ks", "_window", "_watermark", "_pane")

    def __init__(
        self,
        op: OperatorCore,
        ks: KeyState,
        window: Window,
        watermark: int,
        pane: PaneInfo = PaneInfo.UNKNOWN,
    ):
        self._op = op
        self._ks = ks
        self._window = window
        self._watermark = watermark
        self._pane = pane

    def pane(self) -> PaneInfo:
        return self._pane

    def window(self) -> Window:
        return self._window

    def current_processing_time(self) -> int:
        return self._op.processing_time_timers.current_time

    def current_watermark(self) -> int:
        return self._watermark

    def window_state(self) -> KeyedStateStore:
        if self._op.is_merging:
            raise RuntimeError(
                "Per-window state is not allowed when using merging windows (as in Flink): "
                f"window {self._window!r} may merge; use global_state() instead"
            )
        store = self._ks.window_state.get(self._window)
        if store is None:
            store = self._ks.window_state[self._window] = {}
        return KeyedStateStore(store)

    def global_state(self) -> KeyedStateStore:
        return KeyedStateStore(self._ks.global_state)

    def output(self, output_tag: OutputTag, value: Any) -> None:
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"`output_tag` must be an OutputTag; got {output_tag!r}")
        if output_tag == self._op.late_data_tag:
            raise ValueError(
                f"`output_tag` {output_tag.tag_id!r} is the late-data tag of "
                "side_output_late_data: its side output holds the late elements, in the "
                "input's schema; give the function's side output a tag id of its own"
            )
        self._op.emit_side_output(output_tag, value, self._window.max_timestamp())
