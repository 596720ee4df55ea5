"""Test your own window pipelines, triggers and evictors the way Flink's harness does.

:class:`WindowOperatorHarness` drives the window operator by hand: elements with
timestamps, watermarks, and the processing-time clock, then shows what was emitted, what
went to side outputs, what was dropped, and how much state and how many timers are left.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable

from tidemark._engine.functions import window_logic
from tidemark._engine.operator import WindowOperator
from tidemark.assigners import WindowAssigner
from tidemark.evictors import Evictor
from tidemark.outputs import OutputTag
from tidemark.time import TimeLike, to_millis
from tidemark.triggers import Trigger

__all__ = ["WindowOperatorHarness", "Watermark"]


class Watermark:
    """A watermark as it appears among the emitted records."""

    __slots__ = ("timestamp",)

    def __init__(self, timestamp: int):
        self.timestamp = timestamp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Watermark) and other.timestamp == self.timestamp

    def __hash__(self) -> int:
        return hash(("Watermark", self.timestamp))

    def __repr__(self) -> str:
        return f"Watermark({self.timestamp})"


class WindowOperatorHarness:
    """One window operator, driven by hand.

    Parameters
    ----------
    assigner : WindowAssigner
    function : ReduceFunction, callable, AggregateFunction, ProcessWindowFunction, ...
        The window function. Give ``(reduce_or_aggregate, window_function)`` as a tuple
        to combine an incremental function with a process or window function.
    key_selector : callable, optional
        ``value -> key``; ``None`` means non-keyed (all elements share one key, ``None``).
    trigger, evictor : optional
    allowed_lateness : Duration, timedelta or int ms
    late_data_tag : OutputTag, optional

    Examples
    --------
    >>> from tidemark import TumblingEventTimeWindows
    >>> h = WindowOperatorHarness(TumblingEventTimeWindows.of(5),
    ...                           lambda a, b: (a[0], a[1] + b[1]),
    ...                           key_selector=lambda v: v[0])
    >>> h.process_element(("a", 1), 3); h.process_element(("a", 2), 4)
    >>> h.process_watermark(4)
    >>> h.output()
    [(('a', 3), 4)]
    >>> h.num_keyed_state_entries(), h.num_event_time_timers()
    (0, 0)
    """

    def __init__(
        self,
        assigner: WindowAssigner,
        function: Any,
        *,
        key_selector: Callable[[Any], Any] | None = None,
        trigger: Trigger | None = None,
        evictor: Evictor | None = None,
        allowed_lateness: TimeLike = 0,
        late_data_tag: OutputTag | None = None,
        tracer: Any = None,
    ):
        if isinstance(function, tuple):
            logic = window_logic(*function)
        else:
            logic = window_logic(function)
        self._key_selector = key_selector
        self._operator = WindowOperator(
            assigner,
            logic,
            trigger=trigger,
            evictor=evictor,
            allowed_lateness_ms=to_millis(allowed_lateness, "allowed_lateness"),
            late_data_tag=late_data_tag,
            tracer=tracer,
        )
        self._events: list[Any] = []
        self._seen = 0

    @property
    def operator(self) -> WindowOperator:
        return self._operator

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """Feed one element; ``timestamp`` may be None for processing-time pipelines."""
        key = self._key_selector(value) if self._key_selector is not None else None
        self._operator.process_element(key, value, timestamp)
        self._collect()

    def process_watermark(self, timestamp: int) -> None:
        """Advance event time: due event-time timers fire in time order, then the
        watermark is forwarded (it appears in :meth:`output_with_watermarks`)."""
        self._operator.process_watermark(timestamp)
        self._collect()
        self._events.append(Watermark(timestamp))

    def set_processing_time(self, timestamp: int) -> None:
        """Set the processing-time clock; due processing-time timers fire in time order."""
        self._operator.advance_processing_time(timestamp)
        self._collect()

    def _collect(self) -> None:
        output = self._operator.output
        if len(output) > self._seen:
            self._events.extend(output[self._seen :])
            self._seen = len(output)

    def output(self) -> list[tuple[Any, int]]:
        """``[(value, timestamp)]`` emitted so far, in order."""
        return list(self._operator.output)

    def output_with_watermarks(self) -> list[Any]:
        """Emitted records and forwarded :class:`Watermark` s, in order."""
        return list(self._events)

    def side_output(self, tag: OutputTag) -> list[tuple[Any, int]]:
        """``[(value, timestamp)]`` emitted to the side output ``tag``."""
        return list(self._operator.side_outputs.get(tag, []))

    @property
    def num_late_records_dropped(self) -> int:
        return self._operator.num_late_records_dropped

    @property
    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def num_keyed_state_entries(self) -> int:
        """Window contents, trigger state, merging-set and function state entries left."""
        return self._operator.num_keyed_state_entries()

    def num_event_time_timers(self) -> int:
        return self._operator.num_event_time_timers()

    def num_processing_time_timers(self) -> int:
        return self._operator.num_processing_time_timers()

    def snapshot(self) -> bytes:
        """The operator's keyed state and clocks, pickled (a checkpoint)."""
        op = self._operator
        return pickle.dumps(
            (op.keys, op.current_watermark, op.current_processing_time, op.num_late_records_dropped)
        )

    def restore(self, snapshot: bytes) -> None:
        """Replace all keyed state and clocks with a :meth:`snapshot` (timers re-queued)."""
        keys, watermark, processing_time, dropped = pickle.loads(snapshot)
        op = self._operator
        op.keys.clear()
        op._event_queue.clear()
        op._processing_queue.clear()
        op.current_watermark, op.current_processing_time = watermark, processing_time
        op.num_late_records_dropped = dropped
        for key, ks in keys.items():
            op.restore_key(key, ks)
