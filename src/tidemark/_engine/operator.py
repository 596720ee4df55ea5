"""The window operator: Flink's ``WindowOperator`` and ``EvictingWindowOperator`` in one.

Per element: assign windows; for merging assigners add each to the key's merging window
set; skip windows that are late; add the element to each remaining window's contents;
ask the trigger; fire and/or purge; register the window's cleanup timer. An element that
went into no window and is itself late goes to the late-data side output, or is counted
as dropped. Timers fire in time order when the watermark (event time) or the clock
(processing time) reaches them; a window's cleanup timer removes all its state.

The operator is driven by its caller (the test harness, or a Spark runner): it never
reads a clock of its own.
"""

from __future__ import annotations

from typing import Any

from tidemark._engine.contexts import ClockContext, ProcessCallContext, TriggerCallContext
from tidemark._engine.keystate import KeyState
from tidemark._engine.merging import MergingWindowSet
from tidemark._engine.spec import OperatorSpec, validate_window_spec
from tidemark._engine.timers import TimerService
from tidemark.errors import UnsupportedMergeError, UserFunctionError
from tidemark.evictors import TimestampedValue
from tidemark.outputs import OutputTag
from tidemark.panes import PaneInfo
from tidemark.time import LONG_MAX, LONG_MIN, TimeDomain
from tidemark.triggers import TriggerResult
from tidemark.windows import Window

__all__ = [
    "WindowOperator",
    "OperatorSpec",
    "ADDED",
    "ADDED_LATE",
    "SIDE_OUTPUT",
    "DROPPED",
    "SKIPPED",
    "validate_window_spec",
]

# What became of an element (returned by process_element, used by tracing).
ADDED, ADDED_LATE, SIDE_OUTPUT, DROPPED, SKIPPED = range(5)

EVENT_TIME = TimeDomain.EVENT_TIME


def _join_lists(target: list[Any] | None, source: list[Any]) -> list[Any]:
    return source if target is None else target + source


class WindowOperator:
    """Keyed window state, timers and firing logic; fed elements, watermarks and time.

    The general operator: it serves every pipeline, calling the assigner, trigger and
    functions as Flink's ``WindowOperator`` does. :func:`create_window_operator` picks
    it, or an operator that is the same but faster for its pipeline
    (:func:`tidemark._engine.create.create_window_operator`).

    Parameters
    ----------
    spec : OperatorSpec
        The pipeline, built once per query.
    tracer : object, optional
        Receives ``fired(key, window, watermark, results)`` for every firing.

    The caller drives it with :meth:`process_element` (or :meth:`process_elements`),
    :meth:`process_watermark` and :meth:`advance_processing_time`; it may set
    ``current_watermark`` / ``current_processing_time`` directly to restore the clocks
    of a stored key without firing anything. Emitted results collect in ``output``,
    side outputs in ``side_outputs``, late elements without a tag in
    ``num_late_records_dropped``.

    The clocks and timers are one :class:`~tidemark._engine.timers.TimerService` per
    time domain, ``event_time_timers`` and ``processing_time_timers``; both fire into
    :meth:`_on_timer`.
    """

    # Whether windows can close (a Dataflow trigger finished): asks _is_open per window.
    _closes_windows = False
    # Whether a key's contents may hold slices besides windows (the sliced operator's).
    _keeps_slices = False
    # Whether a caller reading a wall clock may read it once per run of a key's elements
    # and hand the run to process_elements (the processing-time aligned operator).
    serves_runs_at_one_processing_time = False

    def __init__(self, spec: OperatorSpec, *, tracer: Any = None):
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
        self.event_time_timers = TimerService(EVENT_TIME, self.keys, self._on_timer, LONG_MIN)
        self.processing_time_timers = TimerService(
            TimeDomain.PROCESSING_TIME, self.keys, self._on_timer, 0
        )
        # The service of the windows' own time domain: their cleanup timers.
        self._window_timers = (
            self.event_time_timers if self.is_event_time else self.processing_time_timers
        )
        self.output: list[tuple[Any, int]] = []
        self.side_outputs: dict[OutputTag, list[tuple[Any, int]]] = {}
        # The watermark at emission of every result, when the spec asks for it.
        self.output_watermarks: list[int] | None = [] if spec.record_output_watermarks else None
        self._clock = ClockContext(self.event_time_timers, self.processing_time_timers)

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

    def process_element(self, key: Any, value: Any, timestamp: int | None) -> int:
        """Process one element of ``key``; return what became of it (ADDED, DROPPED, ...)."""
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        try:
            windows = self.assigner.assign_windows(value, timestamp, self._clock)
        except Exception as exc:
            raise self._user_error("the window assigner", key, None, exc) from exc
        return self._process_assigned(key, ks, value, timestamp, windows)

    def _process_assigned(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        """:meth:`process_element` once the assigner gave ``value``'s ``windows`` (a fast
        path that asked the assigner hands an element it does not serve on here)."""
        if self.is_merging:
            status = self._add_to_merging_windows(key, ks, value, timestamp, windows)
        else:
            status = self._add_to_windows(key, ks, value, timestamp, windows)
        if status == SKIPPED and self.is_element_late(timestamp):
            status = self._late_element(value, timestamp)
        if not ks.contents and ks.is_empty():
            del self.keys[key]
        return status

    def _add_to_windows(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        status = SKIPPED
        for window in windows:
            if self.is_window_late(window):
                continue
            if self._closes_windows and not self._is_open(ks, window):
                continue
            status = self._added_status(status, window)
            self._add_and_trigger(key, ks, window, window, value, timestamp)
        return status

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """Process a run of elements of one key, in order, under the current watermark:
        :meth:`process_element` for each (a BATCH run hands the engine each key's
        elements this way; the aligned operator serves runs faster)."""
        for value, timestamp in zip(values, timestamps):
            self.process_element(key, value, timestamp)

    def _add_to_merging_windows(
        self, key: Any, ks: KeyState, value: Any, timestamp: int | None, windows: Any
    ) -> int:
        status = SKIPPED
        merging = MergingWindowSet(self.assigner, ks.merging)
        for window in windows:
            actual = merging.add_window(
                window,
                lambda result, merged, state_result, merged_states: self._merge(
                    key, ks, result, merged, state_result, merged_states
                ),
            )
            if self.is_window_late(actual):
                merging.retire_window(actual)
                continue
            if self._closes_windows and not self._is_open(ks, actual):
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
        return ADDED if status == SKIPPED else status

    def _add_and_trigger(
        self,
        key: Any,
        ks: KeyState,
        window: Window,
        state_window: Window,
        value: Any,
        timestamp: int | None,
    ) -> None:
        self._add_contents(key, ks, window, state_window, value, timestamp)
        ctx = TriggerCallContext(self, key, ks, window)
        try:
            result = self.trigger.on_element(value, timestamp, window, ctx)
        except Exception as exc:
            raise self._user_error("trigger.on_element", key, window, exc) from exc
        self._apply(key, ks, window, state_window, result)
        self.register_cleanup_timer(key, ks, window)

    def _add_contents(
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
        try:
            contents[state_window] = self.logic.add(contents.get(state_window), value)
        except Exception as exc:
            raise self._user_error("the reduce/aggregate function", key, window, exc) from exc

    def _is_open(self, ks: KeyState, window: Window) -> bool:
        """Whether ``window`` takes elements (asked only where ``_closes_windows``: a
        Dataflow trigger that finished closes its window)."""
        return True

    def _apply(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, result: Any
    ) -> None:
        if not isinstance(result, TriggerResult):
            raise self._user_error(
                "the trigger", key, window, TypeError(f"returned {result!r}, not a TriggerResult")
            )
        if result.is_fire():
            self._fire(key, ks, window, state_window, self.event_time_timers.current_time)
        if result.is_purge():
            ks.contents.pop(state_window, None)

    def _late_element(self, value: Any, timestamp: int | None) -> int:
        if self.late_data_tag is not None:
            assert timestamp is not None
            self.side_outputs.setdefault(self.late_data_tag, []).append((value, timestamp))
            return SIDE_OUTPUT
        self.num_late_records_dropped += 1
        return DROPPED

    # ------------------------------------------------------------------ merging

    def _merge(
        self,
        key: Any,
        ks: KeyState,
        result: Window,
        merged: list[Window],
        state_result: Window,
        merged_states: list[Window],
    ) -> None:
        self._check_merge_result(key, result)
        try:
            self.trigger.on_merge(result, TriggerCallContext(self, key, ks, result, merged))
        except Exception as exc:
            raise self._user_error("trigger.on_merge", key, result, exc) from exc
        for window in merged:
            self._clear_trigger(key, ks, window)
            self.delete_cleanup_timer(ks, window)
        self._merge_contents(key, ks, result, state_result, merged_states)

    def _merge_contents(
        self,
        key: Any,
        ks: KeyState,
        result: Window,
        state_result: Window,
        merged_states: list[Window],
    ) -> None:
        """Fold the merged state windows' contents into ``state_result``'s."""
        contents = ks.contents
        # With an evictor, windows hold element lists whatever the function is.
        merge = _join_lists if self.evictor is not None else self.logic.merge
        for state_window in merged_states:
            source = contents.pop(state_window, None)
            if source is not None:
                try:
                    contents[state_result] = merge(contents.get(state_result), source)
                except Exception as exc:
                    raise self._user_error("the merge function", key, result, exc) from exc

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

    def _fire(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, watermark: int
    ) -> None:
        """Evaluate the window function on ``window``'s contents and emit the results;
        ``watermark`` is the one the function sees (the current one, except where a
        BATCH run fires a complete window as the final watermark would)."""
        contents = ks.contents.get(state_window)
        if contents is None:
            return
        results = self._evaluate(key, ks, window, state_window, contents, watermark)
        timestamp = window.max_timestamp()
        self.output.extend([(result, timestamp) for result in results])
        if self.output_watermarks is not None:
            self.output_watermarks.extend([watermark] * len(results))
        if self.tracer is not None:
            self.tracer.fired(key, window, watermark, results)

    def _evaluate(
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
            raise self._user_error("the window function", key, window, exc, watermark) from exc

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
        self.evictor.evict_before(elements, len(elements), window, self._clock)
        results = self.logic.evaluate(
            key, window, ctx, self.logic.fold([e.value for e in elements])
        )
        self.evictor.evict_after(elements, len(elements), window, self._clock)
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
        registered and fires at the next higher watermark, once per advance.
        """
        self.event_time_timers.advance(watermark)

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

    def _on_timer(self, domain: TimeDomain, key: Any, time: int, window: Window) -> None:
        """A timer of ``key`` fires (the timer services call this): the trigger's timer
        callback, then, at the window's cleanup time, the end of all its state."""
        ks = self.keys[key]
        state_window = self._state_window_of(ks, window)
        if state_window is None:  # merged away
            self._forget_if_empty(key, ks)
            return
        ctx = TriggerCallContext(self, key, ks, window)
        try:
            if domain is EVENT_TIME:
                result = self.trigger.on_event_time(time, window, ctx)
            else:
                result = self.trigger.on_processing_time(time, window, ctx)
        except Exception as exc:
            raise self._user_error("the trigger's timer callback", key, window, exc) from exc
        self._apply(key, ks, window, state_window, result)
        if domain is self._window_timers.domain and time == self.cleanup_time(window):
            self._clear_all_state(key, ks, window, state_window, self.current_watermark)
        self._forget_if_empty(key, ks)

    def _state_window_of(self, ks: KeyState, window: Window) -> Window | None:
        """Where ``window``'s contents live: itself, or for a merging assigner the state
        window of its merging set (None once it merged into another)."""
        return ks.merging.get(window) if self.is_merging else window

    def _clear_all_state(
        self, key: Any, ks: KeyState, window: Window, state_window: Window, watermark: int
    ) -> None:
        """Remove ``window``'s contents, trigger state and function state; ``watermark``
        is what the function's ``clear`` sees."""
        ks.contents.pop(state_window, None)
        self._clear_trigger(key, ks, window)
        if self.logic.has_clear:
            try:
                self.logic.clear(ProcessCallContext(self, ks, window, watermark))
            except Exception as exc:
                raise self._user_error(
                    "the window function's clear", key, window, exc, watermark
                ) from exc
        ks.window_state.pop(window, None)
        if self.is_merging:
            ks.merging.pop(window, None)

    def _clear_trigger(self, key: Any, ks: KeyState, window: Window) -> None:
        try:
            self.trigger.clear(window, TriggerCallContext(self, key, ks, window))
        except Exception as exc:
            raise self._user_error("trigger.clear", key, window, exc) from exc
        if not ks.trigger_state.get(window, True):
            del ks.trigger_state[window]

    def _forget_if_empty(self, key: Any, ks: KeyState) -> None:
        if ks.is_empty():
            del self.keys[key]

    # ------------------------------------------------------------------ helpers

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
        time = self.cleanup_time(window)
        if time != LONG_MAX:
            self._window_timers.register(key, ks, time, window)

    def delete_cleanup_timer(self, ks: KeyState, window: Window) -> None:
        time = self.cleanup_time(window)
        if time != LONG_MAX:
            self._window_timers.delete(ks, time, window)

    def _user_error(
        self, what: str, key: Any, window: Any, exc: Exception, watermark: int | None = None
    ) -> UserFunctionError:
        if watermark is None:
            watermark = self.current_watermark
        return UserFunctionError(what, key, window, watermark, exc)

    # ------------------------------------------------------------------ inspection

    def num_keyed_state_entries(self) -> int:
        """Window contents, trigger state, merging sets and function state left."""
        return sum(ks.num_state_entries() for ks in self.keys.values())

    def num_event_time_timers(self) -> int:
        return self.event_time_timers.count()

    def num_processing_time_timers(self) -> int:
        return self.processing_time_timers.count()

    # ------------------------------------------------------------------ snapshots

    def snapshot_key(self, key: Any) -> KeyState | None:
        """The state of ``key`` (None when it has none), e.g. to store it elsewhere."""
        return self.keys.get(key)

    def restore_key(self, key: Any, ks: KeyState) -> None:
        """Install ``ks`` as the state of ``key`` and queue its timers (in the order
        they were first registered, so equal-time timers fire as they would have).

        A timer that was held (see :meth:`process_watermark`) is queued as any other: it
        fires at the next advance. (Spark advances a restored key's watermark only when
        it moves, and its processing time once per micro-batch.) A key's slices, kept
        by the sliced operator (fast paths on), become its windows' contents here
        (:func:`tidemark._engine.slices.unslice`)."""
        if not self._keeps_slices and any(not isinstance(s, Window) for s in ks.contents):
            from tidemark._engine.slices import unslice  # the slices module builds on this one

            unslice(self, ks)
        self.keys[key] = ks
        self.event_time_timers.restore(key, ks)
        self.processing_time_timers.restore(key, ks)

    def forget_all_keys(self) -> None:
        """Drop every key's state and every queued timer (before a restore)."""
        self.keys.clear()
        self.event_time_timers.clear()
        self.processing_time_timers.clear()

    def evict_key(self, key: Any) -> KeyState | None:
        """Remove ``key``'s state from memory and return it (its queued timers go stale)."""
        return self.keys.pop(key, None)
