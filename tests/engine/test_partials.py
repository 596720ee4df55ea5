"""Local-global aggregation of a non-keyed window (``_engine/partials.py``) is the one-task
BATCH run, only split: random inputs cut into random parts (some empty), each part in
any order, its partials merged in any order, give the one-task run's results, timestamps,
firing order, side outputs and watermarks seen; and where it does not serve, it says so.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemark import (
    LONG_MAX,
    AggregateFunction,
    ContinuousEventTimeTrigger,
    CountEvictor,
    CountTrigger,
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    OutputTag,
    ProcessAllWindowFunction,
    ReduceFunction,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    ValueStateDescriptor,
)
from tidemark._engine.create import create_window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.partials import global_spec, local_spec, serves
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import WindowSpecError

NOTES = OutputTag("notes")


class CountSum(AggregateFunction):
    """``(count, sum)`` of the elements' second field: order-insensitive, declared."""

    order_insensitive = True

    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        accumulator[0] += 1
        accumulator[1] += value[1]
        return accumulator

    def get_result(self, accumulator: list[int]) -> tuple[int, int]:
        return (accumulator[0], accumulator[1])

    def merge(self, acc_a: list[int], acc_b: list[int]) -> list[int]:
        return [acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]]


class Highest(AggregateFunction):
    """The largest element (a tuple): q7's shape, its empty accumulator None."""

    order_insensitive = True

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        return value if accumulator is None or value > accumulator else accumulator

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return max((a for a in (acc_a, acc_b) if a is not None), default=None)


class Largest(ReduceFunction):
    order_insensitive = True

    def reduce(self, value1: Any, value2: Any) -> Any:
        return max(value1, value2)


class Described(ProcessAllWindowFunction):
    """Its window, the watermark it sees, the input, how many windows fired before
    (global state) and a side output per firing."""

    def process(self, context: Any, elements: Any) -> Any:
        window = context.window()
        fired = context.global_state().get_state(ValueStateDescriptor("fired"))
        before = fired.value() or 0
        fired.update(before + 1)
        context.output(NOTES, (window.start, before))
        yield (window.start, window.end, context.current_watermark(), tuple(elements), before)


ASSIGNERS = {
    "tumbling": lambda: TumblingEventTimeWindows.of(10),
    "tumbling_offset": lambda: TumblingEventTimeWindows.of(10, 3),
    "sliding": lambda: SlidingEventTimeWindows.of(12, 4),
    "sliding_offset": lambda: SlidingEventTimeWindows.of(10, 4, 1),
    "session": lambda: EventTimeSessionWindows.with_gap(5),
    "dynamic_session": lambda: DynamicEventTimeSessionWindows.with_dynamic_gap(
        lambda element: 2 + element[1] % 5
    ),
    "dynamic_session_kept": lambda: DynamicEventTimeSessionWindows.with_dynamic_gap(
        lambda element: 2 + element[1] % 5, keep_all_elements=True
    ),
}
SERVED = [name for name in ASSIGNERS if name != "dynamic_session"]
"""The assigners split runs serve: all but dynamic-gap sessions that lose elements as
Flink's do (see :func:`test_sessions_losing_elements_keep_the_one_task_run`)."""
FUNCTIONS = {"count_sum": CountSum, "highest": Highest, "largest": Largest}


def spec_of(assigner: str, function: str, described: bool, lateness: int = 0) -> OperatorSpec:
    window_function = Described() if described else None
    logic = window_logic(FUNCTIONS[function](), window_function)
    return OperatorSpec(ASSIGNERS[assigner](), logic, allowed_lateness_ms=lateness)


def run(spec: OperatorSpec, elements: list[tuple[Any, int]]) -> tuple[list[Any], dict[Any, Any]]:
    """``(results, side outputs)`` of one operator of ``spec`` fed ``elements`` and
    then the final watermark, as a BATCH task ends."""
    op = create_window_operator(spec)
    op.process_elements(None, [v for v, _ in elements], [t for _, t in elements])
    op.process_watermark(LONG_MAX)
    op.advance_processing_time(LONG_MAX)
    return list(op.output), {tag.tag_id: list(out) for tag, out in op.side_outputs.items()}


def one_task(spec: OperatorSpec, elements: list[tuple[Any, int]]) -> Any:
    """Flink's BATCH: one task, elements in time order (ties by value), then +inf."""
    batch = spec.with_run_options(
        batch_mode=True, record_output_watermarks=False, fast_paths=True, slice_incremental=False
    )
    return run(batch, sorted(elements, key=lambda e: (e[1], e[0])))


def pre_aggregated(
    spec: OperatorSpec, elements: list[tuple[Any, int]], parts: int, rng: random.Random
) -> Any:
    """Each of ``parts`` random parts (each in random order) aggregated where it is, the
    partials merged, in random order, by one operator."""
    split: list[list[tuple[Any, int]]] = [[] for _ in range(parts)]
    for element in elements:
        split[rng.randrange(parts)].append(element)
    partials = []
    for part in split:
        rng.shuffle(part)
        emitted, sides = run(local_spec(spec), part)
        assert not sides
        partials += [(partial, partial[1] - 1) for partial, _ in emitted]
    rng.shuffle(partials)
    return run(global_spec(spec), partials)


elements_strategy = st.lists(
    st.tuples(st.integers(-30, 60), st.integers(-3, 9)).map(lambda p: ((p[0], p[1]), p[0])),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(
    assigner=st.sampled_from(sorted(SERVED)),
    function=st.sampled_from(sorted(FUNCTIONS)),
    described=st.booleans(),
    lateness=st.sampled_from([0, 7]),
    elements=elements_strategy,
    parts=st.integers(1, 5),
    seed=st.integers(0, 2**32),
)
def test_pre_aggregated_is_the_one_task_run(
    assigner: str,
    function: str,
    described: bool,
    lateness: int,
    elements: list[tuple[Any, int]],
    parts: int,
    seed: int,
) -> None:
    spec = spec_of(assigner, function, described, lateness)
    assert serves(spec)
    expected = one_task(spec, elements)
    assert pre_aggregated(spec, elements, parts, random.Random(seed)) == expected


def test_sessions_losing_elements_keep_the_one_task_run() -> None:
    """Not served: a dynamic-gap session that loses elements as Flink's does (six
    elements at one timestamp, gaps 2 and 3: the one-task run counts 1, as Flink 1.20
    does; which elements a split run loses depends on the split). Kept, all six count
    in both runs."""
    elements = [((0, 0), 0)] * 4 + [((0, 1), 0)] * 2
    flinks = spec_of("dynamic_session", "count_sum", described=False)
    assert not serves(flinks)
    assert one_task(flinks, elements) == ([((1, 1), 2)], {})
    kept = spec_of("dynamic_session_kept", "count_sum", described=False)
    assert serves(kept)
    for seed in range(5):
        assert pre_aggregated(kept, elements, 2, random.Random(seed)) == ([((6, 2), 2)], {})
    assert one_task(kept, elements) == ([((6, 2), 2)], {})


def test_sessions_of_different_parts_merge_when_they_touch() -> None:
    # part 1: [0, 5); part 2: [5, 10) and [20, 25): the first two touch, one session
    spec = spec_of("session", "count_sum", described=True)
    elements = [((0, 1), 0), ((5, 2), 5), ((20, 4), 20)]
    expected = one_task(spec, elements)
    assert [r[:2] for r, _ in expected[0]] == [(0, 10), (20, 25)]
    parts = [[elements[0]], elements[1:]]
    partials = []
    for part in parts:
        partials += [(p, p[1] - 1) for p, _ in run(local_spec(spec), part)[0]]
    assert run(global_spec(spec), partials) == expected


class Undeclared(CountSum):
    order_insensitive = False


def _with(spec: OperatorSpec, **changes: Any) -> OperatorSpec:
    window = {
        "assigner": spec.assigner,
        "logic": spec.logic,
        "trigger": spec.trigger,
        "evictor": spec.evictor,
    }
    return OperatorSpec(**{**window, **changes})


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"logic": window_logic(Undeclared())}, id="undeclared"),
        pytest.param({"logic": window_logic(Described())}, id="process-function"),
        pytest.param({"evictor": CountEvictor.of(2)}, id="evictor"),
        pytest.param({"trigger": CountTrigger.of(2)}, id="count-trigger"),
        pytest.param({"trigger": ContinuousEventTimeTrigger.of(5)}, id="continuous-trigger"),
        pytest.param({"assigner": TumblingProcessingTimeWindows.of(10)}, id="processing-time"),
        pytest.param(
            {"assigner": GlobalWindows.create(), "trigger": CountTrigger.of(2)}, id="global"
        ),
    ],
)
def test_one_task_semantics_stay_where_splitting_is_not_exact(changes: dict[str, Any]) -> None:
    spec = spec_of("tumbling", "count_sum", described=False)
    assert serves(spec)
    assert not serves(_with(spec, **changes))


def test_an_order_insensitive_aggregate_needs_merge() -> None:
    class NoMerge(AggregateFunction):
        order_insensitive = True

        def create_accumulator(self) -> int:
            return 0

        def add(self, value: Any, accumulator: int) -> int:
            return accumulator + 1

        def get_result(self, accumulator: int) -> int:
            return accumulator

    with pytest.raises(WindowSpecError) as raised:
        window_logic(NoMerge())
    assert str(raised.value) == (
        "`aggregate_function` NoMerge declares order_insensitive = True but has no "
        "merge(): the partial accumulators of the parts of the input are merged with it; "
        "define merge(acc_a, acc_b), or drop the declaration"
    )


def test_the_declaration_is_a_bool() -> None:
    class Maybe(Largest):
        order_insensitive = "yes"  # type: ignore[assignment]

    with pytest.raises(WindowSpecError) as raised:
        window_logic(Maybe())
    assert str(raised.value) == (
        "`order_insensitive` of Maybe must be True or False; got 'yes': set the class "
        "attribute order_insensitive = True only where the result does not depend on the "
        "order elements are added or combined in"
    )


def test_a_plain_callable_declares_with_an_attribute() -> None:
    def largest(a: Any, b: Any) -> Any:
        return max(a, b)

    largest.order_insensitive = True  # type: ignore[attr-defined]
    spec = OperatorSpec(TumblingEventTimeWindows.of(10), window_logic(largest))
    assert serves(spec)
