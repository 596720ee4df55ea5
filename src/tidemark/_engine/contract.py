"""The engine's two contracts, as protocols: what a path, a trigger driver or a context
may call on the core (:class:`OperatorCore`), and what a caller driving an operator may
use (:class:`OperatorHandle`). The core (:mod:`~tidemark._engine.operator`) implements
both; only it and the chooser (:mod:`~tidemark._engine.create`) name its class.
Everything else names a contract, so a module below the core (a path, a driver) or
beside it (the Spark paths, the harness, ``explain``) depends on the members it may
use, not on the whole class (``tests/layout/test_engine_layout.py`` holds this).

:class:`OperatorCore` is Flink's window operator as its collaborators see it: the
pipeline's parts, the keys' state, the two timer services and the helpers that are
written once in the core (lateness, cleanup, folding, firing, clearing, the user's
errors). A path places elements and takes due windows with these; a trigger driver
fires, clears and registers cleanup timers with them.

:class:`OperatorHandle` is the operator as its caller sees it: elements, watermarks and
processing time in; results, side outputs and drop counts out; a key's state taken out
and put back (a streaming worker stores it between micro-batches); :meth:`release` when
done with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tidemark._engine.contexts import ClockContext
    from tidemark._engine.functions import WindowLogic
    from tidemark._engine.keystate import KeyState
    from tidemark._engine.spec import OperatorSpec
    from tidemark._engine.timers import TimerService
    from tidemark._engine.triggering import TriggerDriver
    from tidemark.errors import UserFunctionError
    from tidemark.outputs import OutputTag
    from tidemark.panes import PaneInfo
    from tidemark.windows import Window

__all__ = ["ElementPath", "RunPath", "OperatorCore", "OperatorHandle"]

ElementPath = Callable[[Any, Any, "int | None"], int]
"""``process_element(key, value, timestamp) -> status``."""
RunPath = Callable[[Any, list[Any], list[Any]], None]
"""``process_elements(key, values, timestamps)``."""


class OperatorCore(Protocol):
    """What a path, a trigger driver or a context may call on the core.

    The pipeline's parts (read on every element: attributes, not a lookup through
    ``spec``), the keys' state, the clocks, and the helpers each written once in the
    core. The meaning of each helper is its docstring on the core
    (:mod:`~tidemark._engine.operator`).
    """

    # The pipeline, read only.
    spec: OperatorSpec
    assigner: Any
    logic: WindowLogic
    is_event_time: bool
    is_merging: bool
    allowed_lateness_ms: int
    late_data_tag: OutputTag | None
    tracer: Any
    # State, results and clocks.
    keys: dict[Any, KeyState]
    output: list[tuple[Any, int]]
    output_watermarks: list[int] | None
    event_time_timers: TimerService
    processing_time_timers: TimerService
    clock: ClockContext

    @property
    def current_watermark(self) -> int: ...

    @property
    def current_processing_time(self) -> int: ...

    # Elements.
    def key_state(self, key: Any) -> KeyState: ...

    def assign_and_add(self, key: Any, value: Any, timestamp: int | None) -> int: ...

    def add_assigned(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int: ...

    def add_contents(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None: ...

    def run_element_by_element(
        self, key: Any, values: list[Any], timestamps: list[Any]
    ) -> None: ...

    def fold(self, key: Any, window: Any, current: Any, values: Any) -> Any: ...

    def late_element(self, value: Any, timestamp: int | None, known_late: bool = True) -> int: ...

    def is_element_late(self, timestamp: int | None) -> bool: ...

    # Windows: lateness, cleanup, firing.
    def cleanup_time(self, window: Window) -> int: ...

    def register_cleanup_timer(self, key: Any, ks: KeyState, window: Window) -> None: ...

    def delete_cleanup_timer(self, ks: KeyState, window: Window) -> None: ...

    def fire(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, watermark: int
    ) -> None: ...

    def fire_contents(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        contents: Any,
        watermark: int,
    ) -> None: ...

    def evaluate(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        contents: Any,
        watermark: int,
        pane: PaneInfo = ...,
    ) -> list[Any]: ...

    def clear_all_state(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, watermark: int
    ) -> None: ...

    def emit_side_output(self, tag: OutputTag, value: Any, timestamp: int) -> None: ...

    # The user's errors, naming the key, the window and the watermark.
    def fold_error(self, key: Any, window: Any, exc: Exception) -> UserFunctionError: ...

    def merge_error(self, key: Any, window: Any, exc: Exception) -> UserFunctionError: ...

    def user_error(
        self, what: str, key: Any, window: Any, exc: Exception, watermark: int | None = None
    ) -> UserFunctionError: ...


class OperatorHandle(Protocol):
    """What a caller driving an operator may use (the Spark paths, the harness, a
    tracer, ``explain``): feed it, read what it emitted, move a key's state in and out.

    The caller drives it with :attr:`process_element` (or :attr:`process_elements`),
    :meth:`process_watermark` and :meth:`advance_processing_time`; it may set the
    clocks directly to restore a stored key's without firing anything.
    """

    spec: OperatorSpec
    assigner: Any
    late_data_tag: OutputTag | None
    is_merging: bool
    driver: TriggerDriver
    serves_runs_at_one_processing_time: bool
    # Fed.
    process_element: ElementPath
    process_elements: RunPath
    current_watermark: int
    current_processing_time: int

    def process_watermark(self, watermark: int) -> None: ...

    def advance_processing_time(self, time: int) -> None: ...

    def reset_clocks(self, watermark: int = ..., processing_time: int = ...) -> None: ...

    # Emitted.
    output: list[tuple[Any, int]]
    output_watermarks: list[int] | None
    side_outputs: dict[OutputTag, list[tuple[Any, int]]]
    num_late_records_dropped: int

    # Keys' state.
    keys: dict[Any, KeyState]

    def snapshot_key(self, key: Any) -> KeyState | None: ...

    def restore_key(self, key: Any, ks: KeyState) -> None: ...

    def evict_key(self, key: Any) -> KeyState | None: ...

    def forget_all_keys(self) -> None: ...

    def release(self) -> None: ...

    # Inspection (the harness's figures).
    def num_keyed_state_entries(self) -> int: ...

    def num_event_time_timers(self) -> int: ...

    def num_processing_time_timers(self) -> int: ...

    def window_contents(self, key: Any) -> dict[Window, Any]: ...

    def num_stored_contents(self) -> int: ...
