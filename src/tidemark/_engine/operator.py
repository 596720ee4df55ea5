"""The window operator: Flink's ``WindowOperator`` and ``EvictingWindowOperator`` in one
core, holding two parts chosen once (:func:`~tidemark._engine.create.create_window_operator`):
its **path** (:mod:`~tidemark._engine.paths`: how elements are placed, due windows taken
and contents stored; the general one, or a fast path the same but faster) and its
**trigger driver** (:mod:`~tidemark._engine.triggering`: Flink's trigger calls, or a
Dataflow trigger's panes, :mod:`~tidemark._engine.panes`).

Per element (the general path): assign windows; for merging assigners add each to the
key's merging window set; skip windows that are late (or that the driver closed); add the
element to each remaining window's contents; ask the trigger; fire and/or purge; register
the window's cleanup timer. An element in no window goes, when late (or in closed windows
only), to the late-data side output or the dropped count; when not (a gap of sampling
windows, which Flink loses uncounted), to the dropped count. Timers fire in time order
when the watermark (event time) or the clock (processing time) reaches them; a window's
cleanup timer removes all its state. Lateness, cleanup, merging, firing, side outputs and
timers are written here once; the paths and drivers call these helpers (the public methods
without a leading underscore), as :class:`~tidemark._engine.contract.OperatorCore` lists
them. The caller drives the operator (:class:`~tidemark._engine.contract.OperatorHandle`);
it never reads a clock of its own. The guide: ``docs/internals.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tidemark._engine.contexts import ClockContext, ProcessCallContext
from tidemark._engine.contract import ElementPath, RunPath
from tidemark._engine.functions import ReturnedNone, returned_none
from tidemark._engine.keystate import KeyState
from tidemark._engine.merging import MergingWindowSet
from tidemark._engine.panes import PaneDriver
from tidemark._engine.paths import WindowPath
from tidemark._engine.spec import OperatorSpec
from tidemark._engine.status import ADDED, ADDED_LATE, DROPPED, REFUSED, SIDE_OUTPUT, SKIPPED
from tidemark._engine.timers import TimerService
from tidemark._engine.triggering import TriggerDriver
from tidemark.errors import UnsupportedMergeError, UserFunctionError
from tidemark.evictors import TimestampedValue
from tidemark.outputs import OutputTag
from tidemark.panes import PaneInfo
from tidemark.time import LONG_MAX, LONG_MIN, TimeDomain
from tidemark.triggers.dataflow import DataflowTrigger
from tidemark.windows import Window

__all__ = ["WindowOperator"]

EVENT_TIME = TimeDomain.EVENT_TIME


def _join_lists(target: list[Any] | None, source: list[Any]) -> list[Any]:
    return source if target is None else target + source


class WindowOperator:
    """Keyed window state, timers and firing logic; fed elements, watermarks and time.

    Parameters
    ----------
    spec : OperatorSpec
        The pipeline, built once per query.
    path : WindowPath, optional
        How elements are placed, due windows taken and contents stored: the general
        path when not given (:func:`tidemark._engine.create.create_window_operator`
        chooses a faster one where it serves the pipeline).
    tracer : object, optional
        Receives ``fired(key, window, watermark, results)`` for every firing.

    The caller drives it as :class:`~tidemark._engine.contract.OperatorHandle` says.
    The clocks and timers are one :class:`~tidemark._engine.timers.TimerService` per
    time domain. The general path's steps are hooks a subclass may extend to observe
    them, each called once per step: :meth:`add_contents`, :meth:`merge_contents`,
    :meth:`on_timer`, :meth:`evaluate` and :meth:`clear_all_state` (``tidemark.explain``
    replays a key so; a fast path never does: it is a path, not a subclass).
    """

    process_element: ElementPath
    """``(key, value, timestamp) -> status`` (ADDED, DROPPED, ...): one element, by the
    path's own callable, bound once."""
    process_elements: RunPath
    """``(key, values, timestamps)``: a run of one key's elements, in order, under the
    current watermark (BATCH hands each key's elements so), by the path's callable."""
    late_weight: Callable[[Any], int] | None = None
    """How many records a late element stands for, counted as dropped (None: one). A
    stream's partial stands for the elements folded into it
    (:func:`tidemark._engine.create.partials_operator`)."""

    def __init__(self, spec: OperatorSpec, path: WindowPath | None = None, *, tracer: Any = None):
        self.spec = spec
        # The spec's parts, read on every element: attributes, not a lookup through spec.
        self.assigner = spec.assigner
        self.logic = spec.logic
        self.trigger = spec.window_trigger
        self.evictor = spec.evictor
        self.allowed_lateness_ms = spec.allowed_lateness_ms
        self.late_data_tag = spec.late_data_tag
        self.is_event_time = spec.is_event_time
        self.is_merging = spec.is_merging
        self.tracer = tracer
        self.num_late_records_dropped = 0
        self.keys: dict[Any, KeyState] = {}
        self.output: list[tuple[Any, int]] = []
        self.side_outputs: dict[OutputTag, list[tuple[Any, int]]] = {}
        # The watermark at emission of every result, when the spec asks for it.
        self.output_watermarks: list[int] | None = [] if spec.record_output_watermarks else None
        self.path = path if path is not None else WindowPath()
        own = self.path.on_event_timer  # a path that takes its due windows itself
        self.event_time_timers = TimerService(
            EVENT_TIME, self.keys, own or self.on_timer, LONG_MIN, in_bulk=own is not None
        )
        self.processing_time_timers = TimerService(
            TimeDomain.PROCESSING_TIME, self.keys, self.on_timer, 0
        )
        self.clock = ClockContext(self.event_time_timers, self.processing_time_timers)
        trigger = self.trigger  # the spec holds one kind or the other
        self.driver: TriggerDriver
        if isinstance(trigger, DataflowTrigger):
            self.driver = PaneDriver(self, trigger)
        else:
            self.driver = self.path.trigger_driver(self, trigger)
        # The service of the windows' expiry: their cleanup timers.
        self._expiry = self.driver.expiry_timers()
        self.serves_runs_at_one_processing_time = self.path.serves_runs_at_one_processing_time
        self.process_element, self.process_elements = self.path.bind(self)

    @property
    def current_watermark(self) -> int:
        """The event-time clock; set it to restore a stored key's without firing."""
        return self.event_time_timers.current_time

    @current_watermark.setter
    def current_watermark(self, watermark: int) -> None:
        self.event_time_timers.current_time = watermark

    @property
    def current_processing_time(self) -> int:
        """The processing-time clock; set it to restore a stored key's without firing."""
        return self.processing_time_timers.current_time

    @current_processing_time.setter
    def current_processing_time(self, time: int) -> None:
        self.processing_time_timers.current_time = time

    # ------------------------------------------------------------------ elements

    def key_state(self, key: Any) -> KeyState:
        """``key``'s state, made empty when it has none."""
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        return ks

    def assign_and_add(self, key: Any, value: Any, timestamp: int | None) -> int:
        """The general path of one element: the assigner's windows, then :meth:`add_assigned`."""
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        try:
            windows = self.assigner.assign_windows(value, timestamp, self.clock)
        except Exception as exc:
            raise self.user_error("the window assigner", key, None, exc) from exc
        return self.add_assigned(key, ks, value, timestamp, windows)

    def add_assigned(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        """The general path once the assigner gave ``value``'s ``windows`` (a fast path
        that asked the assigner hands an element it does not serve on here)."""
        if self.is_merging:
            status = self._add_to_merging_windows(key, ks, value, timestamp, windows)
        else:
            status = self._add_to_windows(key, ks, value, timestamp, windows)
        if status == REFUSED or status == SKIPPED:
            status = self.late_element(value, timestamp, known_late=status == REFUSED)
        self.driver.after_element(key, ks)
        if not ks.contents and ks.is_empty():
            self.keys.pop(key, None)
        return status

    def _add_to_windows(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        status, accepts = SKIPPED, self.driver.accepts
        for window in windows:
            if self.is_window_late(window):
                continue
            if not accepts(ks, window):
                status = REFUSED if status == SKIPPED else status
                continue
            status = self._added_status(status, window)
            self._add_and_trigger(key, ks, window, window, value, timestamp)
        return status

    def _add_to_merging_windows(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        status, accepts = SKIPPED, self.driver.accepts
        merging = MergingWindowSet(self.assigner, ks.merging)
        for window in windows:
            actual = merging.add_window(
                window,
                lambda result, merged, state_result, merged_states: self.merge_contents(
                    key, ks, result, merged, state_result, merged_states
                ),
            )
            if self.is_window_late(actual):
                merging.retire_window(actual)
                continue
            if not accepts(ks, actual):
                status = REFUSED if status == SKIPPED else status
                continue
            state_window = merging.get_state_window(actual)
            if state_window is None:
                raise RuntimeError(f"window {actual!r} has no state window (key={key!r})")
            status = self._added_status(status, actual)
            self._add_and_trigger(key, ks, actual, state_window, value, timestamp)
        return status

    def _added_status(self, status: int, window: Window) -> int:
        if status != ADDED_LATE and window.max_timestamp() <= self.event_time_timers.current_time:
            return ADDED_LATE if self.is_event_time else ADDED
        return ADDED if status >= SKIPPED else status

    def _add_and_trigger(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        self.add_contents(key, ks, window, state_window, value, timestamp)
        self.driver.element_added(key, ks, window, state_window, value, timestamp)
        self.register_cleanup_timer(key, ks, window)

    def add_contents(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        """Add an element to ``state_window``'s contents (a list with an evictor)."""
        contents = ks.contents
        if self.evictor is not None:
            contents.setdefault(state_window, []).append((value, timestamp))
            return
        try:  # fold() of one element: WindowLogic.add
            contents[state_window] = self.logic.add(contents.get(state_window), value)
        except Exception as exc:
            raise self.fold_error(key, window, exc) from exc

    def fold(self, key: Any, window: Any, current: Any, values: Any) -> Any:
        """``current`` contents (None: a window without contents) with ``values`` added
        in order (:meth:`~tidemark._engine.functions.WindowLogic.add_all`); the user's
        error names the key, the window and the watermark."""
        try:
            return self.logic.add_all(current, values)
        except Exception as exc:
            raise self.fold_error(key, window, exc) from exc

    def fold_error(self, key: Any, window: Any, exc: Exception) -> UserFunctionError:
        """The error of the user's reduce or aggregate function adding to ``window``
        (a fast path adding inline raises it ``from exc``)."""
        return self.user_error("the reduce/aggregate function", key, window, exc)

    def run_element_by_element(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """:attr:`process_elements` as :attr:`process_element` for each element."""
        element = self.process_element
        for value, timestamp in zip(values, timestamps):
            element(key, value, timestamp)

    def late_element(self, value: Any, timestamp: int | None, known_late: bool = True) -> int:
        """An element in no window (late if ``known_late``, else judged here): see the module."""
        late = known_late or self.is_element_late(timestamp)
        if late and self.late_data_tag is not None:
            assert timestamp is not None
            self.side_outputs.setdefault(self.late_data_tag, []).append((value, timestamp))
            return SIDE_OUTPUT
        weight = self.late_weight
        self.num_late_records_dropped += 1 if weight is None else weight(value)
        return DROPPED if late else SKIPPED

    # ------------------------------------------------------------------ merging

    def merge_contents(
        self,
        key: Any,
        ks: KeyState,
        result: Window,
        merged: list[Window],
        state_result: Window,
        merged_states: list[Window],
    ) -> None:
        """Windows merged into ``result``: the driver's merge, then the contents."""
        self._check_merge_result(key, result)
        self.driver.on_merge(key, ks, result, merged)
        contents = ks.contents
        # With an evictor, windows hold element lists whatever the function is.
        merge = _join_lists if self.evictor is not None else self.logic.merge
        for state_window in merged_states:
            source = contents.pop(state_window, None)
            if source is not None:
                try:
                    contents[state_result] = merge(contents.get(state_result), source)
                except Exception as exc:
                    raise self.merge_error(key, result, exc) from exc

    def merge_error(self, key: Any, window: Any, exc: Exception) -> UserFunctionError:
        """The error of the user's merge of two windows' contents."""
        return self.user_error("the merge function", key, window, exc)

    def _check_merge_result(self, key: Any, result: Window) -> None:
        """Refuse a merge whose result ends behind its clock (as Flink does)."""
        if self.is_event_time and result.max_timestamp() + self.allowed_lateness_ms <= (
            self.current_watermark
        ):
            raise UnsupportedMergeError(
                "The end timestamp of an event-time window cannot become earlier than the "
                f"current watermark by merging; watermark={self.current_watermark}, "
                f"window={result!r}, key={key!r}"
            )
        if not self.is_event_time and result.max_timestamp() <= self.current_processing_time:
            raise UnsupportedMergeError(
                "The end timestamp of a processing-time window cannot become earlier than the "
                f"current processing time by merging; processing time="
                f"{self.current_processing_time}, window={result!r}, key={key!r}"
            )

    # ------------------------------------------------------------------ firing

    def fire(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, watermark: int
    ) -> None:
        """Evaluate the window function on ``window``'s contents and emit the results;
        ``watermark`` is the one the function sees (the current one, except where a
        BATCH run fires a complete window as the final watermark would)."""
        contents = ks.contents.get(state_window)
        if contents is not None:
            self.fire_contents(key, ks, window, state_window, contents, watermark)

    def fire_contents(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        contents: Any,
        watermark: int,
    ) -> None:
        """:meth:`fire` on ``contents`` (a path storing them otherwise hands them here)."""
        results = self.evaluate(key, ks, window, state_window, contents, watermark)
        self.emit(key, window, watermark, results)

    def emit(self, key: Any, window: Window, watermark: int, results: list[Any]) -> None:
        """Emit ``results`` of ``window`` at its ``max_timestamp()``, seen at ``watermark``."""
        timestamp = window.max_timestamp()
        self.output.extend([(result, timestamp) for result in results])
        if self.output_watermarks is not None:
            self.output_watermarks.extend([watermark] * len(results))
        if self.tracer is not None:
            self.tracer.fired(key, window, watermark, results)

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
        """The window function's results on ``contents`` (None: an empty window, which
        only a Dataflow trigger fires), seen as the firing ``pane``."""
        logic = self.logic
        ctx = (
            ProcessCallContext(self, ks, window, watermark, pane) if logic.window_function else None
        )
        try:
            if self.evictor is not None:
                return self._evict_and_evaluate(key, ks, window, state_window, contents or [], ctx)
            inputs = logic.empty_inputs() if contents is None else logic.inputs(contents)
            return logic.evaluate(key, window, ctx, inputs)
        except UserFunctionError:
            raise
        except Exception as exc:
            raise self.user_error("the window function", key, window, exc, watermark) from exc

    def _evict_and_evaluate(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        contents: list[tuple[Any, int | None]],
        ctx: ProcessCallContext | None,
    ) -> list[Any]:
        assert self.evictor is not None
        elements = [TimestampedValue(value, ts) for value, ts in contents]
        self.evictor.evict_before(elements, len(elements), window, self.clock)
        results = self.logic.evaluate(
            key, window, ctx, self.logic.fold([e.value for e in elements])
        )
        self.evictor.evict_after(elements, len(elements), window, self.clock)
        if elements:
            ks.contents[state_window] = [(e.value, e.timestamp) for e in elements]
        else:
            ks.contents.pop(state_window, None)
        return results

    def emit_side_output(self, tag: OutputTag, value: Any, timestamp: int) -> None:
        """Record ``value`` on the side output ``tag`` (from a process window function)."""
        self.side_outputs.setdefault(tag, []).append((value, timestamp))

    # ------------------------------------------------------------------ time

    def process_watermark(self, watermark: int) -> None:
        """Advance event time to ``watermark`` and fire every event-time timer it reaches.

        Timers fire in time order. A timer a callback registers for a later time that
        ``watermark`` reaches fires in the same call (Flink's catch-up). One it registers
        at or before the time being fired goes beyond Flink, which fires it again at once
        (a trigger that re-registers it every time loops forever there): it stays
        registered and fires at the next higher watermark, once per advance. When no
        timer is due, a look at the queue's top is all it costs.
        """
        service = self.event_time_timers
        if service.begin_advance(watermark):
            service.fire_due(watermark)
        else:
            service.current_time = watermark

    def advance_processing_time(self, time: int) -> None:
        """Set the processing-time clock and fire every processing-time timer it reaches.

        As :meth:`process_watermark`: timers fire in time order, catching up on those
        their callbacks register up to ``time``; one registered at or before the time
        being fired (``ContinuousProcessingTimeTrigger`` on event-time windows once the
        clock is past the window's end: Flink loops there) goes beyond Flink and fires at
        the next call with a later ``time`` (on Spark, the next micro-batch).
        """
        self.processing_time_timers.advance(time)

    def reset_clocks(self, watermark: int = LONG_MIN, processing_time: int = 0) -> None:
        """Set both clocks without firing anything (a new key in a BATCH run); held
        timers (of keys gone by then) wait no more."""
        self.event_time_timers.reset(watermark)
        self.processing_time_timers.reset(processing_time)

    def on_timer(self, domain: TimeDomain, key: Any, time: int, window: Window) -> None:
        """A timer of ``key`` fires (the timer services call this): the driver's timer
        callback, then, at the window's cleanup time, the end of all its state."""
        ks = self.keys[key]
        state_window = ks.merging.get(window) if self.is_merging else window
        if state_window is None:  # merged away
            self.forget_if_empty(key, ks)
            return
        expires = domain is self._expiry.domain and time == self.cleanup_time(window)
        self.driver.on_timer(domain, key, ks, time, window, state_window, expires)
        if expires:
            self.clear_all_state(key, ks, window, state_window, self.current_watermark)
        self.forget_if_empty(key, ks)

    def clear_all_state(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, watermark: int
    ) -> None:
        """Remove ``window``'s contents, trigger state and function state; ``watermark``
        is what the function's ``clear`` sees."""
        ks.contents.pop(state_window, None)
        self.driver.clear(key, ks, window)
        if self.logic.has_clear:
            try:
                self.logic.clear(ProcessCallContext(self, ks, window, watermark))
            except Exception as exc:
                raise self.user_error(
                    "the window function's clear", key, window, exc, watermark
                ) from exc
        ks.window_state.pop(window, None)
        if self.is_merging:
            ks.merging.pop(window, None)

    def forget_if_empty(self, key: Any, ks: KeyState) -> None:
        """Drop ``key`` once nothing of it is left."""
        if ks.is_empty():
            del self.keys[key]

    # ------------------------------------------------------------------ lateness

    def cleanup_time(self, window: Window) -> int:
        """When ``window``'s state goes: its end plus the allowed lateness (event time)."""
        if self.is_event_time:
            time = window.max_timestamp() + self.allowed_lateness_ms
            return time if time <= LONG_MAX else LONG_MAX
        return window.max_timestamp()

    def is_window_late(self, window: Window) -> bool:
        return (
            self.is_event_time and self.cleanup_time(window) <= self.event_time_timers.current_time
        )

    def is_element_late(self, timestamp: int | None) -> bool:
        return (
            self.is_event_time
            and timestamp is not None
            and timestamp + self.allowed_lateness_ms <= self.event_time_timers.current_time
        )

    def register_cleanup_timer(self, key: Any, ks: KeyState, window: Window) -> None:
        """``window``'s cleanup timer, in the service of its expiry (a window that never
        expires gets none, unless the driver expires windows at the end of input)."""
        time = self.cleanup_time(window)
        if time != LONG_MAX or self.driver.expires_at_end_of_input:
            self._expiry.register(key, ks, time, window)

    def delete_cleanup_timer(self, ks: KeyState, window: Window) -> None:
        time = self.cleanup_time(window)
        if time != LONG_MAX or self.driver.expires_at_end_of_input:
            self._expiry.delete(ks, time, window)

    def user_error(
        self, what: str, key: Any, window: Any, exc: Exception, watermark: int | None = None
    ) -> UserFunctionError:
        """The error of the user's ``what``, with the key, the window and the watermark."""
        if watermark is None:
            watermark = self.current_watermark
        if isinstance(exc, ReturnedNone):
            return returned_none(what, self.logic.function, key, window, watermark)
        return UserFunctionError(what, key, window, watermark, exc)

    # ------------------------------------------------------------------ inspection

    def num_keyed_state_entries(self) -> int:
        """Window contents, trigger state, merging sets and function state left (each
        window holding contents counted once, however the path stores them)."""
        entries = self.path.num_state_entries
        return sum(entries(ks) for ks in self.keys.values())

    def num_event_time_timers(self) -> int:
        return self.event_time_timers.count()

    def num_processing_time_timers(self) -> int:
        return self.processing_time_timers.count()

    def window_contents(self, key: Any) -> dict[Window, Any]:
        """What each live window of ``key`` holds, as the general path keeps it."""
        ks = self.keys.get(key)
        return {} if ks is None else self.path.window_contents(key, ks)

    def num_stored_contents(self) -> int:
        """The contents entries actually stored (a sliced path's: one per slice)."""
        return sum(len(ks.contents) for ks in self.keys.values())

    # ------------------------------------------------------------------ snapshots

    def snapshot_key(self, key: Any) -> KeyState | None:
        """The state of ``key`` (None when it has none), e.g. to store it elsewhere."""
        return self.keys.get(key)

    def restore_key(self, key: Any, ks: KeyState) -> None:
        """Install ``ks`` as the state of ``key`` and queue its timers (in the order
        they were first registered, so equal-time timers fire as they would have).

        A timer that was held (see :meth:`process_watermark`) is queued as any other: it
        fires at the next advance. (Spark advances a restored key's watermark only when
        it moves, and its processing time once per micro-batch.) The path adopts the
        key's contents as it stores them (a sliced path's slices become window contents
        on the others: :func:`tidemark._engine.slice_runs.unslice`)."""
        self.path.restored(key, ks)
        self.keys[key] = ks
        self.event_time_timers.restore(key, ks)
        self.processing_time_timers.restore(key, ks)

    def forget_all_keys(self) -> None:
        """Drop every key's state and every queued timer (before a restore)."""
        self.path.forgot_all()
        self.keys.clear()
        self.event_time_timers.clear()
        self.processing_time_timers.clear()

    def release(self) -> None:
        """Drop what the operator holds once its caller is done with it (a streaming
        call's end): the operator is in reference cycles (its path, driver and timer
        services call back into it), so what it still held would wait for the cyclic
        collector, which walks every object of it; dropped here, reference counting
        frees it at once."""
        self.forget_all_keys()
        self.output.clear()
        self.side_outputs.clear()

    def evict_key(self, key: Any) -> KeyState | None:
        """Remove ``key``'s state from memory and return it (its queued timers go stale)."""
        self.path.evicted(key)
        return self.keys.pop(key, None)
