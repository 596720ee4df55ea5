"""The fast paths are the general operator, only faster: proved by running random
pipelines both ways (``fast_paths`` on and off) and requiring the same output, side
output, dropped count, watermarks seen by the functions and state left.

Also pinned here: which operator a pipeline gets, and that a trigger or assigner
subclass that changes behaviour loses the fast path (it is then called as any other).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import (
    ALIGNED,
    KEYS,
    LATE_TAG,
    SPAN_MS,
    CountAndSum,
    Pipeline,
    _assigner,
    _evictor,
    _trigger,
    batch_inputs,
    examples,
    feed,
    feed_in_runs,
    key_runs,
    pipelines,
    streams,
    sum_reduce,
    window_label,
    with_final_watermark,
)
from transcript import within_seconds
from transcript_functions import RearmingEventTimeTrigger

from tidemark import (
    LONG_MAX,
    AggregateFunction,
    ContinuousProcessingTimeTrigger,
    EventTimeTrigger,
    ProcessWindowFunction,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from tidemark._engine.create import AlignedWindowOperator, SlicedWindowOperator
from tidemark._engine.operator import WindowOperator
from tidemark.testing import WindowOperatorHarness


class WatermarkSeen(ProcessWindowFunction):
    """Emits ``(key, window, watermark seen, inputs)``: the watermark its context showed."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        yield (key, window_label(context.window()), context.current_watermark(), tuple(elements))


def concat_ids(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """Associative but not commutative: the ids in the order the reduce saw them (an
    element is ``(key, id, value)``, a partial result ``(key, (ids...), value sum)``)."""
    ids_a = a[1] if isinstance(a[1], tuple) else (a[1],)
    ids_b = b[1] if isinstance(b[1], tuple) else (b[1],)
    return (a[0], ids_a + ids_b, a[2] + b[2])


class IdList(AggregateFunction):
    """The ids in arrival order; add and merge reuse their accumulator, as Flink allows
    (merge its first argument)."""

    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return []

    def add(self, value, accumulator):  # type: ignore[no-untyped-def]
        accumulator.append(value[1])
        return accumulator

    def get_result(self, accumulator):  # type: ignore[no-untyped-def]
        return tuple(accumulator)

    def merge(self, acc_a, acc_b):  # type: ignore[no-untyped-def]
        acc_a.extend(acc_b)
        return acc_a


def _function(kind: str) -> Any:
    if kind == "reduce":
        return sum_reduce
    if kind == "concat_reduce":
        return concat_ids
    if kind == "concat_aggregate":
        return IdList()
    if kind == "aggregate":
        return CountAndSum()
    if kind == "reduce_seen":
        return (sum_reduce, WatermarkSeen())
    if kind == "aggregate_seen":
        return (CountAndSum(), WatermarkSeen())
    return WatermarkSeen()  # "elements_seen": a window function over all elements


FUNCTIONS = (
    "reduce",
    "aggregate",
    "reduce_seen",
    "aggregate_seen",
    "elements_seen",
    # order-sensitive: a sliced window must combine its slices in arrival order
    "concat_reduce",
    "concat_aggregate",
)


@dataclass(frozen=True)
class Case:
    """A pipeline (its function replaced by ``function``) to run both ways."""

    pipeline: Pipeline
    function: str

    def harness(self, fast_paths: bool, batch_mode: bool = False) -> WindowOperatorHarness:
        p = self.pipeline
        return WindowOperatorHarness(
            _assigner(p.assigner),
            _function(self.function),
            key_selector=lambda value: value[0],
            trigger=None if p.trigger == ("default",) else _trigger(p.trigger),
            evictor=None if p.evictor is None else _evictor(p.evictor),
            allowed_lateness=p.allowed_lateness,
            late_data_tag=LATE_TAG if p.late_tag else None,
            fast_paths=fast_paths,
            batch_mode=batch_mode,
            slice_incremental=True,
        )


@st.composite
def cases(draw: Any, aligned_only: bool = False) -> Case:
    pipeline = draw(ALIGNED if aligned_only else st.one_of(ALIGNED, pipelines()))
    function = draw(st.sampled_from(FUNCTIONS))
    if pipeline.is_merging and pipeline.evictor is not None:
        function = "elements_seen"  # see known defect 3 in test_properties
    return Case(pipeline, function)


def state_left(harness: WindowOperatorHarness) -> dict[Any, Any]:
    """Every key's whole state: contents, trigger and function state, timers. The sliced
    operator's contents are given as each window's (its slices merged), as the general
    operator keeps them."""
    operator = harness.operator
    left = {}
    for key in sorted(operator.keys):
        state = list(operator.snapshot_key(key).__getstate__())  # type: ignore[union-attr]
        if isinstance(operator, SlicedWindowOperator):
            state[0] = operator.window_contents(key)
        left[key] = tuple(state)
    return left


def both_ways(case: Case, run: Any) -> tuple[Any, Any]:
    fast, general = case.harness(True), case.harness(False)
    assert isinstance(general.operator, WindowOperator)
    assert not isinstance(general.operator, AlignedWindowOperator)
    return (run(fast), state_left(fast)), (run(general), state_left(general))


@settings(max_examples=examples(300), deadline=None)
@given(case=cases(), events=st.one_of(streams(), key_runs()), final=st.booleans())
def test_fast_paths_equal_the_general_operator_element_by_element(
    case: Case, events: list[tuple[Any, ...]], final: bool
) -> None:
    events = with_final_watermark(events) if final else events
    fast, general = both_ways(case, lambda harness: feed(harness, events))
    assert fast == general


@settings(max_examples=examples(300), deadline=None)
@given(case=cases(), events=st.one_of(key_runs(), streams()), final=st.booleans())
def test_fast_paths_equal_the_general_operator_in_runs(
    case: Case, events: list[tuple[Any, ...]], final: bool
) -> None:
    events = with_final_watermark(events) if final else events
    fast, general = both_ways(case, lambda harness: feed_in_runs(harness, events))
    assert fast == general


@st.composite
def disordered_runs(draw: Any) -> list[tuple[Any, ...]]:
    """Streams of runs of one key's elements *out of* timestamp order by a bounded
    disorder (a micro-batch of a stream: each key's rows of the batch, in arrival order),
    16 or more a run (the aligned operator then folds stretches of one tumbling window),
    some reaching behind the watermark, with watermarks between runs."""
    watermark = draw(st.integers(-SPAN_MS, 0))
    events: list[tuple[Any, ...]] = []
    next_id = 0
    for _ in range(draw(st.integers(1, 5))):
        key = draw(st.sampled_from(KEYS))
        first = watermark + draw(st.integers(-SPAN_MS // 4, SPAN_MS // 2))
        steps = draw(st.lists(st.sampled_from((0, 0, 0, 1, 3)), min_size=16, max_size=60))
        disorder = draw(st.integers(1, 8))
        shifts = st.lists(st.integers(-disorder, disorder), min_size=len(steps))
        ts, stamps = first, []
        for step, shift in zip(steps, draw(shifts), strict=False):
            ts += step
            stamps.append(ts + shift)
            events.append(("element", (key, next_id, next_id % 10), ts + shift))
            next_id += 1
        if draw(st.booleans()):  # among the run's times: later runs reach behind it
            watermark = max(watermark, draw(st.integers(min(stamps) - 5, max(stamps))))
            events.append(("watermark", watermark))
    return events


@settings(max_examples=examples(300), deadline=None)
@given(case=cases(aligned_only=True), events=disordered_runs(), final=st.booleans())
def test_fast_paths_equal_the_general_operator_in_disordered_runs(
    case: Case, events: list[tuple[Any, ...]], final: bool
) -> None:
    events = with_final_watermark(events) if final else events
    fast, general = both_ways(case, lambda harness: feed_in_runs(harness, events))
    assert fast == general


def run_batch(harness: WindowOperatorHarness, keys: list[tuple[str, list[int]]], cuts: Any) -> Any:
    """A BATCH Spark task: each key's runs, +inf, then the key's state goes."""
    operator = harness.operator
    next_id = 0
    for key, stamps in keys:
        values = [(key, next_id + i, (next_id + i) % 7) for i in range(len(stamps))]
        next_id += len(stamps)
        bounds = [0, *sorted(set(cuts(len(stamps)))), len(stamps)]
        for start, end in zip(bounds, bounds[1:]):
            if start < end:
                operator.process_elements(key, values[start:end], stamps[start:end])
        operator.process_watermark(LONG_MAX)
        operator.evict_key(key)
        operator.reset_clocks()
    return (
        list(operator.output),
        operator.side_outputs,
        operator.num_late_records_dropped,
        operator.num_keyed_state_entries(),
    )


@settings(max_examples=examples(300), deadline=None)
@given(case=cases(aligned_only=True), keys=batch_inputs(), data=st.data())
def test_batch_mode_fast_paths_equal_the_general_operator(
    case: Case, keys: list[tuple[str, list[int]]], data: Any
) -> None:
    drawn: dict[int, list[int]] = {}

    def cuts(n: int) -> list[int]:
        return drawn.setdefault(len(drawn), data.draw(st.lists(st.integers(0, n), max_size=3)))

    fast = run_batch(case.harness(True, batch_mode=True), keys, cuts)
    replayed = iter(drawn.values())
    general = run_batch(case.harness(False, batch_mode=True), keys, lambda n: next(replayed))
    assert fast == general


# ---------------------------------------------------------------- which operator


def harness(assigner: Any, trigger: Any = None, **options: Any) -> WindowOperatorHarness:
    return WindowOperatorHarness(
        assigner, sum_reduce, key_selector=lambda v: v[0], trigger=trigger, **options
    )


def test_aligned_pipelines_get_the_aligned_operator_unless_fast_paths_are_off() -> None:
    tumbling = TumblingEventTimeWindows.of(10)
    assert isinstance(harness(tumbling).operator, AlignedWindowOperator)
    assert isinstance(harness(SlidingEventTimeWindows.of(10, 5)).operator, AlignedWindowOperator)
    assert isinstance(harness(tumbling, EventTimeTrigger.create()).operator, AlignedWindowOperator)
    assert not isinstance(harness(tumbling, fast_paths=False).operator, AlignedWindowOperator)
    purging = PurgingTrigger.of(EventTimeTrigger.create())
    assert not isinstance(harness(tumbling, purging).operator, AlignedWindowOperator)


class RenamedEventTimeTrigger(EventTimeTrigger):
    """Changes nothing it is called for: keeps the fast path."""

    def __repr__(self) -> str:
        return "Renamed()"


class CountingEventTimeTrigger(EventTimeTrigger):
    """Overrides a callback: loses the fast path, and is called."""

    def __init__(self) -> None:
        self.calls: list[int | None] = []

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        self.calls.append(timestamp)
        return super().on_element(element, timestamp, window, ctx)


class OwnWindows(TumblingEventTimeWindows):
    """Overrides assign_windows: its windows are not the layout's any more."""

    def assign_windows(self, element, timestamp, context):  # type: ignore[no-untyped-def]
        return super().assign_windows(element, timestamp + 7, context)


def feed_three(h: WindowOperatorHarness) -> list[Any]:
    for ts in (1, 4, 12):
        h.process_element(("a", ts, 1), ts)
    h.process_watermark(LONG_MAX)
    return h.output()


def test_an_event_time_trigger_subclass_keeps_the_fast_path_only_if_it_overrides_no_callback():
    renamed = RenamedEventTimeTrigger()
    assert renamed.fires_only_at_window_end()
    kept = harness(TumblingEventTimeWindows.of(10), renamed)
    assert isinstance(kept.operator, AlignedWindowOperator)
    assert feed_three(kept) == feed_three(harness(TumblingEventTimeWindows.of(10)))

    counting = CountingEventTimeTrigger()
    assert not counting.fires_only_at_window_end()
    lost = harness(TumblingEventTimeWindows.of(10), counting)
    assert not isinstance(lost.operator, AlignedWindowOperator)
    assert feed_three(lost) == [(("a", 5, 2), 9), (("a", 12, 1), 19)]
    assert counting.calls == [1, 4, 12]


def test_an_assigner_subclass_that_assigns_its_own_windows_loses_the_fast_path():
    own = OwnWindows.of(10)
    assert own.aligned_layout() is None
    h = harness(own)
    assert not isinstance(h.operator, AlignedWindowOperator)
    assert feed_three(h) == [(("a", 1, 1), 9), (("a", 16, 2), 19)]


# ---------------------------------------------------------------- timers registered in the past


def advance_past_the_window_end(trigger: Any, fast_paths: bool) -> Any:
    """Window [0, 10), lateness 10; processing time and the watermark move past its end,
    some advances repeated. A timer a callback registers at or before the time it fires
    for waits for the next advance of its clock (timer_registered_in_the_past.yaml)."""
    h = harness(
        TumblingEventTimeWindows.of(10), trigger, allowed_lateness=10, fast_paths=fast_paths
    )
    with within_seconds(20, f"{trigger!r}, fast_paths={fast_paths}"):
        h.set_processing_time(0)
        h.process_element(("a", 1, 1), 3)
        for processing_time, watermark in (
            (20, 5),
            (20, 9),
            (30, 9),
            (31, 12),
            (31, 15),
            (40, 25),
            (50, 40),
        ):
            h.set_processing_time(processing_time)
            h.process_watermark(watermark)
    return h.output(), state_left(h)


@pytest.mark.parametrize(
    "trigger, firings",
    [
        # 5 and 9 at processing time 20, then the held 9 at 30, 31 and 40 (not 20, 31 again)
        pytest.param(lambda: ContinuousProcessingTimeTrigger.of(5), 5, id="processing-time"),
        # at watermarks 9, 12, 15 and 25 (the cleanup at 19 takes the re-registered timer)
        pytest.param(RearmingEventTimeTrigger, 4, id="event-time"),
        pytest.param(EventTimeTrigger.create, 1, id="aligned-fast-path"),
    ],
)
def test_timers_registered_in_the_past_fire_once_per_advance_with_fast_paths_on_and_off(
    trigger: Any, firings: int
) -> None:
    fast = advance_past_the_window_end(trigger(), True)
    assert fast == advance_past_the_window_end(trigger(), False)
    assert len(fast[0]) == firings
    assert fast[1] == {}
