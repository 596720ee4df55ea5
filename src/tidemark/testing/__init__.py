"""Test your own window pipelines, triggers and evictors the way Flink's harness does.

:class:`WindowOperatorHarness` drives the window operator by hand: elements with
timestamps, watermarks, and the processing-time clock, then shows what was emitted, what
went to side outputs, what was dropped, and how much state and how many timers are left.

The guide, with the output format: ``docs/testing.md``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tidemark._engine.contract import OperatorHandle
from tidemark._engine.create import create_window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.assigners import WindowAssigner
from tidemark.errors import ExplainError
from tidemark.evictors import Evictor
from tidemark.outputs import OutputTag
from tidemark.panes import AccumulationMode, PaneInfo
from tidemark.ranges import out_of_range_error
from tidemark.time import TimeLike, to_millis
from tidemark.triggers import AnyTrigger

if TYPE_CHECKING:
    from tidemark.explain import Explanation

__all__ = ["WindowOperatorHarness", "Watermark"]

# What explain=True records, as fed (plain tuples: tidemark.explain is loaded only when
# asked): ("element", key, value, timestamp, label), ("watermark", t), ("time", t).
_Fed = tuple[Any, ...]


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
    tracer : Tracer, optional
    fast_paths : bool
        False runs the general operator even where a faster one serves the pipeline
        (they must agree; this is how that is checked).
    batch_mode : bool
        The caller promises Flink BATCH input (see ``OperatorSpec``).
    accumulation_mode : AccumulationMode, optional
        With a Dataflow trigger: how its panes relate (DISCARDING when not given).
    slice_incremental : bool
        Slice sliding windows of a reduce or aggregate function too (see
        ``OperatorSpec.slice_incremental``).
    explain : bool
        Record the events as fed (each element with its key, the watermarks, the
        processing time) so that :meth:`explain` can answer why a key's window fired or
        not (``docs/why-no-result.md``). Off by default: it keeps every element.

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
        trigger: AnyTrigger | None = None,
        evictor: Evictor | None = None,
        allowed_lateness: TimeLike = 0,
        late_data_tag: OutputTag | None = None,
        tracer: Any = None,
        fast_paths: bool = True,
        batch_mode: bool = False,
        accumulation_mode: AccumulationMode | None = None,
        slice_incremental: bool = False,
        explain: bool = False,
    ):
        if isinstance(function, tuple):
            logic = window_logic(*function)
        else:
            logic = window_logic(function)
        self._key_selector = key_selector
        spec = OperatorSpec(
            assigner,
            logic,
            trigger=trigger,
            evictor=evictor,
            allowed_lateness_ms=to_millis(allowed_lateness, "allowed_lateness"),
            late_data_tag=late_data_tag,
            batch_mode=batch_mode,
            fast_paths=fast_paths,
            accumulation_mode=accumulation_mode,
            slice_incremental=slice_incremental,
        )
        self._spec = spec
        self._operator = create_window_operator(spec, tracer=tracer)
        # The timestamps the windows hold, read once, as every mode reads them: asked of
        # the assigner per element, they took about a third of the harness's time.
        self._low, self._high = self._operator.assigner.timestamp_range()
        # The operator's element callable (bound once when it was made) and output list.
        self._process = self._operator.process_element
        self._output = self._operator.output
        self._events: list[Any] = []
        self._seen = 0
        self._fed: list[_Fed] | None = [] if explain else None
        self._restored: bytes | None = None  # the snapshot explain() starts from

    @property
    def operator(self) -> OperatorHandle:
        return self._operator

    def process_element(
        self, value: Any, timestamp: int | None = None, *, label: str | None = None
    ) -> None:
        """Feed one element; ``timestamp`` may be None for processing-time pipelines;
        ``label`` names it in :meth:`explain`'s answers (default ``str(value)``)."""
        key_selector = self._key_selector
        key = None if key_selector is None else key_selector(value)
        if timestamp is not None and not self._low <= timestamp <= self._high:
            bounds = (self._low, self._high)
            raise out_of_range_error(self._operator.assigner, timestamp, bounds, value)
        if self._fed is not None:
            self._fed.append(("element", key, value, timestamp, label))
        self._process(key, value, timestamp)
        if len(self._output) > self._seen:
            self._collect()

    def process_watermark(self, timestamp: int) -> None:
        """Advance event time: due event-time timers fire in time order, then the
        watermark is forwarded (it appears in :meth:`output_with_watermarks`).

        A watermark that does not advance (``<=`` the current one) is ignored, as in a
        Flink job, where only increasing watermarks reach an operator.
        """
        if timestamp <= self._operator.current_watermark:
            return
        if self._fed is not None:
            self._fed.append(("watermark", timestamp))
        self._operator.process_watermark(timestamp)
        self._collect()
        self._events.append(Watermark(timestamp))

    def set_processing_time(self, timestamp: int) -> None:
        """Set the processing-time clock; due processing-time timers fire in time order."""
        if self._fed is not None:
            self._fed.append(("time", timestamp))
        self._operator.advance_processing_time(timestamp)
        self._collect()

    def _collect(self) -> None:
        output = self._output
        if len(output) > self._seen:
            self._events.extend(output[self._seen :])
            self._seen = len(output)

    def output(self) -> list[tuple[Any, int]]:
        """``[(value, timestamp)]`` emitted so far, in order."""
        return list(self._operator.output)

    def pane_output(self) -> list[tuple[Any, int, PaneInfo, bool]]:
        """``[(value, timestamp, pane, is_retraction)]`` emitted so far, in order: the
        pane each result came from (a Dataflow trigger's; :attr:`PaneInfo.UNKNOWN`
        under Flink's triggers), and whether it retracts an earlier result
        (RETRACTING mode)."""
        op = self._operator
        panes = getattr(op.driver, "output_panes", None)
        if panes is None:
            panes = [(PaneInfo.UNKNOWN, False)] * len(op.output)
        return [(v, ts, pane, r) for (v, ts), (pane, r) in zip(op.output, panes)]

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

    def explain(
        self,
        key: Any = None,
        *,
        window: tuple[int, int] | None = None,
        timestamp: int | None = None,
        time_range: tuple[int, int] | None = None,
        time_zone: str | None = None,
        partitions: Sequence[Any] = (),
        idleness: bool | None = None,
    ) -> Explanation:
        """Why ``key``'s windows fired or not, from the events fed so far (the harness
        must be made with ``explain=True``): :func:`tidemark.explain.explain_events` on
        the key's elements and the clocks, in the order they were fed.

        After a :meth:`restore`, the answer starts from the snapshot's state of the key
        and its clocks (``initial_state``), with the events fed since.
        """
        from tidemark._engine.keystate import KeyState
        from tidemark.explain import InitialState, explain_events

        if self._fed is None:
            raise ExplainError(
                "`explain` needs the events as fed: make the harness with explain=True; "
                "got a harness made without it"
            )
        events = _key_events(self._fed, key)
        initial = None
        if self._restored is not None:
            keys, watermark, processing_time = pickle.loads(self._restored)
            held = keys.get(key, KeyState())
            initial = InitialState(held, watermark, processing_time)
        return explain_events(
            self._spec,
            key,
            events,
            mode="engine",
            window=window,
            timestamp=timestamp,
            time_range=time_range,
            time_zone=time_zone,
            partitions=partitions,
            idleness=idleness,
            initial_state=initial,
        )

    def restore(self, snapshot: bytes) -> None:
        """Replace all keyed state and clocks with a :meth:`snapshot` (timers re-queued)."""
        keys, watermark, processing_time, dropped = pickle.loads(snapshot)
        op = self._operator
        op.forget_all_keys()
        op.reset_clocks(watermark, processing_time)
        op.num_late_records_dropped = dropped
        for key, ks in keys.items():
            op.restore_key(key, ks)
        if self._fed is not None:  # explain() starts from here now
            self._fed = []
            self._restored = pickle.dumps((keys, watermark, processing_time))


def _key_events(fed: list[_Fed], key: Any) -> list[Any]:
    """``key``'s elements and every clock's advance, as :mod:`tidemark.explain` events."""
    from tidemark.explain import Element, ProcessingTime
    from tidemark.explain import Watermark as Advance

    events: list[Any] = []
    for step in fed:
        if step[0] == "element":
            if step[1] == key:
                events.append(Element(*step[2:]))
        else:
            events.append((Advance if step[0] == "watermark" else ProcessingTime)(step[1]))
    return events


# ---------------------------------------------------------------------------- traces

__all__ += ["replay_trace"]


def replay_trace(
    assigner: WindowAssigner,
    function: Any,
    elements: Sequence[tuple[Any, ...]],
    *,
    key_selector: Callable[[Any], Any] | None = None,
    trigger: AnyTrigger | None = None,
    evictor: Evictor | None = None,
    out_of_orderness: TimeLike = 0,
    allowed_lateness: TimeLike = 0,
    late_data_tag: OutputTag | None = None,
    title: str | None = None,
    time_zone: str | None = None,
    describe: Callable[[Any], str] | None = None,
) -> dict[str, Any]:
    """Replay a small recorded stream on the engine and return its trace for
    :func:`tidemark.timeline`.

    The elements arrive in the order given, as from one Flink source with a
    bounded-out-of-orderness watermark: after every element the watermark becomes
    ``max_timestamp_seen - out_of_orderness - 1``; at the end it becomes ``LONG_MAX``,
    which fires every event-time window that is left.

    Parameters
    ----------
    assigner, function, key_selector, trigger, evictor, allowed_lateness, late_data_tag
        As for :class:`WindowOperatorHarness`.
    elements : sequence of ``(value, timestamp)`` or ``(value, timestamp, label)``
        In arrival order; timestamps in int ms. The label (default ``str(value)``) names
        the element in the picture.
    out_of_orderness : Duration, timedelta or int ms
        The watermark's lag behind the largest timestamp seen.
    title, time_zone : str, optional
        Stored in the trace (``time_zone`` is an IANA name such as ``"Asia/Shanghai"``).
    describe : callable, optional
        ``result -> str`` for the firing marks; default ``str``.

    Returns
    -------
    dict
        The trace (``tools/TRACE.md``); :func:`tidemark.timeline.validate_trace` accepts it.

    Examples
    --------
    >>> from tidemark import TumblingEventTimeWindows
    >>> trace = replay_trace(TumblingEventTimeWindows.of(5), lambda a, b: a + b,
    ...                      [(1, 1, "a"), (2, 6, "b"), (3, 2, "c")])
    >>> [(e["label"], e["status"]) for e in trace["elements"]]
    [('a', 'on_time'), ('b', 'on_time'), ('c', 'dropped')]
    >>> [(f["start"], f["end"], f["arrival"], f["result"]) for f in trace["firings"]]
    [(0, 5, 1, '1'), (5, 10, 3, '2')]
    """
    from tidemark._engine.trace import Tracer
    from tidemark.watermarks import WatermarkStrategy

    tracer = Tracer(title=title, time_zone=time_zone, describe=describe)
    harness = WindowOperatorHarness(
        assigner,
        function,
        key_selector=key_selector,
        trigger=trigger,
        evictor=evictor,
        allowed_lateness=allowed_lateness,
        late_data_tag=late_data_tag,
        tracer=tracer,
    )
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(out_of_orderness)
    generator = strategy.create_watermark_generator()
    operator = harness.operator
    for value, timestamp, *label in elements:
        key = key_selector(value) if key_selector is not None else None
        tracer.process_element(operator, key, value, timestamp, label[0] if label else str(value))
        generator.on_event(value, timestamp)
        tracer.process_watermark(operator, generator.current_watermark())
    tracer.finish(operator)
    return tracer.trace()
