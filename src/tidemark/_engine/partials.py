"""Local-global aggregation of a non-keyed window in BATCH: partial results per part of
the input, merged in one place, as Flink SQL's two-phase aggregation does.

Flink runs ``windowAll`` at parallelism 1: one task sees every element. Where the
window's function declares ``order_insensitive = True`` (an
:class:`~tidemark.functions.AggregateFunction` with ``merge``, or a
:class:`~tidemark.functions.ReduceFunction`), its result does not depend on the order
nor the grouping of its elements, and a BATCH run may split the work:

1. each part of the input runs :func:`local_spec`: the same windows and trigger, the
   function's accumulator (or reduced value) kept as it is and emitted, when the part
   ends, as a *partial* ``(window start, window end, contents)``;
2. one operator runs :func:`global_spec` over every part's partials: each partial goes
   back into its window (:class:`PartialWindows`; for sessions the partials' windows
   merge as the session assigner merges, :class:`MergingPartialWindows`), the contents
   merge with the function's ``merge`` (or the reduce), and the window fires once, at the
   end of the input, with the user's window function, as on the one-task path.

BATCH fires every window once, at the end of the input (watermark +inf), so the windows
that fire, their results, timestamps (``max_timestamp()``), firing order (by window end)
and the watermark a window function sees are those of the one-task path.
:func:`serves` says where this holds: an event-time assigner with a fixed layout
(tumbling, sliding) or event-time sessions (of a static gap, or of a dynamic gap that
keeps all its elements), a trigger that fires only at the window end, no evictor, no
Dataflow trigger, and a declared function (see :func:`serves`).
Everything else keeps Flink's one-task semantics. The guide: ``docs/concepts/functions.md``.

A stream splits the same way where each micro-batch's elements of a window are judged
against one watermark (or placed at one processing time) and nothing fires on an
element (tumbling or sliding windows under their default trigger, no allowed lateness,
no late side output: :mod:`tidemark.spark.streaming.driver.preaggregate` says where): each
input partition of a micro-batch folds its elements per key and *slice* into a
:class:`Partial` (the contents and how many elements they hold). A slice is a window
for tumbling windows and ``gcd(size, slide)`` of time for sliding ones
(:func:`slice_ms`): every element of a slice lies in the same windows, so an element
per window is not needed. Processing-time windows fold a key's elements of a
micro-batch into one partial: they all meet the key's one processing time there. The
operator of :func:`~tidemark._engine.create.partials_operator` (the window's own
assigner and fast path, its function merging partials: :func:`stream_merge_spec`)
merges each partial into each window of its slice that is not late, or, when they all
are, counts all its elements as dropped (each of them would have been). A window's
stored contents are the user's accumulator (or reduced value) on both paths, so either
reads the other's state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from math import gcd
from typing import Any, NamedTuple

from tidemark._engine.functions import (
    AggregateLogic,
    ReduceLogic,
    WindowLogic,
    declared_order_insensitive,
)
from tidemark._engine.merging import keeps_equal_windows
from tidemark._engine.spec import OperatorSpec
from tidemark.assigners import (
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
    MergingWindowAssigner,
    WindowAssigner,
    WindowAssignerContext,
)
from tidemark.functions import AggregateFunction, ProcessAllWindowFunction
from tidemark.triggers import EventTimeTrigger, ProcessingTimeTrigger, Trigger
from tidemark.windows import TimeWindow, Window

__all__ = [
    "serves",
    "stream_serves",
    "slice_ms",
    "local_spec",
    "global_spec",
    "stream_merge_spec",
    "PartialWindows",
    "MergingPartialWindows",
    "Partial",
    "partial_elements",
    "AccumulatorLogic",
]


def serves(spec: OperatorSpec) -> bool:
    """Whether a BATCH run of ``spec`` (one key) may aggregate per part and merge, with
    the results of the one-task path (the conditions are in the module docstring)."""
    if not _folds_declared(spec) or not spec.is_event_time:
        return False
    if not spec.window_trigger.fires_only_at_window_end():
        return False
    assigner = spec.assigner
    if assigner.aligned_layout() is not None:
        return True
    # Sessions merge into the same windows in any order, except where Flink loses a
    # merged session's elements to a later window equal to it (dynamic gaps only):
    # which elements that loses depends on the order, so only a split of sessions that
    # keep all their elements is the one-task run.
    if type(assigner) is EventTimeSessionWindows:
        return True
    return type(assigner) is DynamicEventTimeSessionWindows and keeps_equal_windows(assigner)


def _folds_declared(spec: OperatorSpec) -> bool:
    """What both splits ask of ``spec``: a function that folds (keeps no elements) and
    is declared order-insensitive, no evictor, no Dataflow trigger."""
    logic = spec.logic
    if logic.keeps_elements or not declared_order_insensitive(logic.function):
        return False
    return spec.evictor is None and not spec.trigger_is_dataflow


def stream_serves(spec: OperatorSpec) -> bool:
    """Whether a stream of ``spec`` may fold each micro-batch's elements per key and
    slice (:func:`slice_ms`) before its key groups, with the results, drops and state of
    the one-task path: a declared function (as :func:`serves` asks) on tumbling or
    sliding windows under their default trigger (nothing fires on an element), without
    allowed lateness (a slice's windows are late exactly when each of its elements is)
    and without a late side output (it needs the late elements one by one). Event time,
    or processing time: a key's elements of a micro-batch all meet one processing time,
    so they reach the same windows."""
    if not _folds_declared(spec) or spec.assigner.aligned_layout() is None:
        return False
    if spec.allowed_lateness_ms != 0 or spec.late_data_tag is not None:
        return False
    default = EventTimeTrigger if spec.is_event_time else ProcessingTimeTrigger
    return type(spec.window_trigger) is default


def slice_ms(spec: OperatorSpec) -> int | None:
    """The event time a stream's partial covers (its slices start at the assigner's
    offset): a window of tumbling windows, ``gcd(size, slide)`` of sliding ones (windows
    start and end on slice bounds, so each slice is wholly in or out of each window).
    None for processing-time windows: a key's partial of a micro-batch covers all its
    elements there."""
    layout = spec.assigner.aligned_layout()
    assert layout is not None
    return gcd(layout.size_ms, layout.slide_ms) if spec.is_event_time else None


class AccumulatorLogic(AggregateLogic):
    """:class:`~tidemark._engine.functions.AggregateLogic` of the user's aggregate
    function whose result is the accumulator itself: what a part of the input hands on.
    The user's ``create_accumulator``, ``add`` and ``merge`` are called as the one-task
    path calls them (one call of the user's per element); only ``get_result`` is not."""

    def fold(self, values: list[Any]) -> list[Any]:
        return [self.add_all(None, values)]

    def inputs(self, contents: Any) -> list[Any]:
        return [contents]

    def empty_inputs(self) -> list[Any]:
        return [self.aggregate.create_accumulator()]


class _EmitPartial(ProcessAllWindowFunction):
    """A part's window function: ``(start, end, encode(contents))`` per window."""

    def __init__(self, encode: Callable[[Any], Any]):
        self.encode = encode

    def process(self, context: Any, elements: Any) -> Any:
        window = context.window()
        return [(window.start, window.end, self.encode(contents)) for contents in elements]


_NOTHING = object()  # a window's merged contents before its first partial


class _MergePartials(AggregateFunction):
    """Merges the partials of a window (``(start, end, contents)`` elements) with the
    user's ``merge`` (or reduce), and gives the user's result of the merged contents."""

    order_insensitive = True

    def __init__(self, combine: Callable[[Any, Any], Any], result: Callable[[Any], Any]):
        self.combine = combine
        self.result = result

    def create_accumulator(self) -> Any:
        return _NOTHING

    def add(self, value: Any, accumulator: Any) -> Any:
        contents = value[2]
        return contents if accumulator is _NOTHING else self.combine(accumulator, contents)

    def get_result(self, accumulator: Any) -> Any:
        return self.result(accumulator)

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        if acc_a is _NOTHING:
            return acc_b
        if acc_b is _NOTHING:
            return acc_a
        return self.combine(acc_a, acc_b)


class Partial(NamedTuple):
    """What a part of a stream holds for one key and slice (``start``, ``end``; 0, 0 in
    processing time): ``contents`` (the accumulator or reduced value) folded from
    ``elements`` elements. Fed to the operator of
    :func:`~tidemark._engine.create.partials_operator` as one
    element, at the earliest of its elements' timestamps."""

    start: int
    end: int
    contents: Any
    elements: int


def partial_elements(partial: Partial) -> int:
    """How many records a late :class:`Partial` stands for: the elements folded into it
    (the ``late_weight`` of the operator merging a stream's partials,
    :func:`~tidemark._engine.create.partials_operator`)."""
    return partial.elements


def _same(value: Any) -> Any:
    return value


class PartialWindows(WindowAssigner):
    """The window a partial ``(start, end, contents)`` belongs to: its own, under the
    original assigner's default trigger (event time)."""

    def __init__(self, original: WindowAssigner):
        self.original = original

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        return [TimeWindow(element[0], element[1])]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return self.original.get_default_trigger(env)

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.original!r})"


class MergingPartialWindows(PartialWindows, MergingWindowAssigner):
    """:class:`PartialWindows` of sessions: partials whose windows overlap or touch
    merge, as the sessions' own windows do. Two parts' partials of one window are
    equal windows, and both are kept (where Flink's set would map the second to a
    fresh state: :func:`~tidemark._engine.merging.keeps_equal_windows`)."""

    keep_all_elements = True

    def merge_windows(
        self,
        windows: Iterable[Window],
        callback: Callable[[Collection[Window], Window], Any],
    ) -> None:
        TimeWindow.merge_windows(windows, callback)  # type: ignore[arg-type]


def local_spec(spec: OperatorSpec, encode: Callable[[Any], Any] = _same) -> OperatorSpec:
    """What each part of the input runs: ``spec``'s windows, trigger and function, each
    window emitting its partial ``(start, end, encode(contents))`` at the end of the
    part (the part's elements in any order: no BATCH promise of time order)."""
    logic = spec.logic
    emit = _EmitPartial(encode)
    local: WindowLogic
    if logic.aggregate is not None:
        local = AccumulatorLogic(logic.aggregate, emit)
    else:
        local = ReduceLogic(logic.function, emit)
    return _spec(spec, spec.assigner, local)


def _merging_logic(spec: OperatorSpec) -> WindowLogic:
    """``spec``'s window logic over partials: their contents merged with the function's
    merge (or reduce), the user's window function at the firing."""
    logic = spec.logic
    aggregate = logic.aggregate
    if aggregate is not None:
        merging = _MergePartials(aggregate.merge, aggregate.get_result)
    else:
        merging = _MergePartials(logic.reduce, _same)
    return AggregateLogic(merging, logic.window_function)


def global_spec(spec: OperatorSpec) -> OperatorSpec:
    """What merges every part's partials: each back in its window, merged with the
    function's merge (or reduce), the user's window function at the firing."""
    merged = _merging_logic(spec)
    windows = (
        PartialWindows if spec.assigner.aligned_layout() is not None else MergingPartialWindows
    )
    return _spec(spec, windows(spec.assigner), merged)


def stream_merge_spec(spec: OperatorSpec) -> OperatorSpec:
    """What merges a stream's partials, one per key and slice (:func:`stream_serves`):
    ``spec``'s own windows and trigger, its function merging each partial's contents
    with the user's merge (or reduce), the user's window function at the firing. A
    partial is fed at the earliest of its elements' timestamps, within its slice, so
    the assigner places it in the slice's windows, where each of its elements went
    (processing time: the key's current processing time places it, as it places each
    element)."""
    return _spec(spec, spec.assigner, _merging_logic(spec))


def _spec(spec: OperatorSpec, assigner: WindowAssigner, logic: WindowLogic) -> OperatorSpec:
    return OperatorSpec(
        assigner=assigner,
        logic=logic,
        trigger=spec.trigger,
        allowed_lateness_ms=spec.allowed_lateness_ms,
        late_data_tag=spec.late_data_tag,
        fast_paths=spec.fast_paths,
        slice_incremental=spec.slice_incremental,
    )
