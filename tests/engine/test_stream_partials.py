"""A stream's partials (``_engine/partials.py``): where a stream may fold its elements
per window before its key groups (:func:`stream_serves`), and the operator that merges
the partials (:class:`PartialsOperator`) against the one-task operator fed the same
elements, on the engine (no Spark).

Tumbling windows of 10; each micro-batch splits its elements over parts (input
partitions) in a random way, each part folds its elements per window into a Partial, the
merging operator gets the partials after the batch's watermark, as a key group's call
feeds them. Results, dropped counts and the stored contents must be the one-task run's.
"""

from __future__ import annotations

import pickle
import random
from collections import defaultdict
from typing import Any

import pytest

import tidemark as tm
from tidemark._engine.create import create_window_operator, partials_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.partials import Partial, slice_ms, stream_serves
from tidemark._engine.spec import OperatorSpec
from tidemark.time import LONG_MAX

SIZE = 10


class CountMax(tm.AggregateFunction):
    order_insensitive = True

    def create_accumulator(self) -> Any:
        return [0, None]

    def add(self, value: Any, acc: Any) -> Any:
        return [acc[0] + 1, value if acc[1] is None else max(acc[1], value)]

    def get_result(self, acc: Any) -> Any:
        return tuple(acc)

    def merge(self, a: Any, b: Any) -> Any:
        return [a[0] + b[0], max(a[1], b[1])]


class Unordered(CountMax):
    order_insensitive = False


class Larger(tm.ReduceFunction):
    order_insensitive = True

    def reduce(self, a: Any, b: Any) -> Any:
        return max(a, b)


class WithWindow(tm.ProcessAllWindowFunction):
    def process(self, context: Any, elements: Any) -> Any:
        yield (context.window().start, next(iter(elements)), context.current_watermark())


def _spec(function: Any = None, **options: Any) -> OperatorSpec:
    logic = window_logic(function or CountMax(), WithWindow())
    return OperatorSpec(tm.TumblingEventTimeWindows.of(SIZE), logic, **options)


@pytest.mark.parametrize(
    "options,function,served",
    [
        pytest.param({}, None, True, id="tumbling_aggregate"),
        pytest.param({}, Larger(), True, id="tumbling_reduce"),
        pytest.param({}, Unordered(), False, id="undeclared"),
        pytest.param({"allowed_lateness_ms": 1}, None, False, id="allowed_lateness"),
        pytest.param({"late_data_tag": tm.OutputTag("late")}, None, False, id="late_tag"),
        pytest.param({"trigger": tm.CountTrigger.of(2)}, None, False, id="count_trigger"),
        pytest.param(
            {"trigger": tm.ContinuousEventTimeTrigger.of(5)}, None, False, id="continuous_trigger"
        ),
    ],
)
def test_where_a_stream_may_fold_before_its_key_groups(
    options: dict, function: Any, served: bool
) -> None:
    assert stream_serves(_spec(function, **options)) is served


@pytest.mark.parametrize(
    "assigner",
    [
        tm.EventTimeSessionWindows.with_gap(5),
        tm.ProcessingTimeSessionWindows.with_gap(5),
        tm.GlobalWindows.create(),
    ],
    ids=["sessions", "processing_time_sessions", "global"],
)
def test_other_windows_are_not_served(assigner: Any) -> None:
    spec = OperatorSpec(assigner, window_logic(CountMax(), WithWindow()))
    assert not stream_serves(spec)


@pytest.mark.parametrize(
    "assigner,expected",
    [
        (tm.TumblingEventTimeWindows.of(10), 10),
        (tm.SlidingEventTimeWindows.of(10, 5), 5),
        (tm.SlidingEventTimeWindows.of(10, 4), 2),
        (tm.SlidingEventTimeWindows.of(9, 6, 1), 3),
        (tm.TumblingProcessingTimeWindows.of(10), None),
        (tm.SlidingProcessingTimeWindows.of(10, 4), None),
    ],
)
def test_sliding_windows_are_served_per_slice(assigner: Any, expected: int) -> None:
    spec = OperatorSpec(assigner, window_logic(CountMax(), WithWindow()))
    assert stream_serves(spec)
    assert slice_ms(spec) == expected


class KeyedWithWindow(tm.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        yield (key, window.start, next(iter(elements)), context.current_watermark())


ASSIGNERS = {
    "tumbling": tm.TumblingEventTimeWindows.of(SIZE),
    "sliding": tm.SlidingEventTimeWindows.of(SIZE, 5),
    "sliding_gcd": tm.SlidingEventTimeWindows.of(SIZE, 4, 1),
}


def _partials(spec: OperatorSpec, elements: list[tuple], parts: int, rng: Any) -> list:
    """``elements`` (key, value, ts) dealt over ``parts`` parts, each folded per key and
    slice: (key, partial, ts), shuffled."""
    width = slice_ms(spec)
    offset = spec.assigner.aligned_layout().offset_ms
    dealt: dict[tuple, list] = defaultdict(list)
    for key, value, ts in elements:
        start = ts - (ts - offset) % width
        dealt[(rng.randrange(parts), key, start)].append((value, ts))
    partials = []
    for (_, key, start), held in dealt.items():
        contents = spec.logic.add_all(None, [value for value, _ in held])
        earliest = min(ts for _, ts in held)
        partials.append((key, Partial(start, start + width, contents, len(held)), earliest))
    rng.shuffle(partials)
    return partials


def _batches(rng: Any, keys: int) -> list[list[tuple]]:
    """Micro-batches of (key, value, ts) moving forward with disorder (late elements)."""
    batches, now = [], 0
    for _ in range(8):
        now += rng.randrange(0, 25)
        batch = [
            (rng.randrange(keys), rng.randrange(100), max(0, now - rng.randrange(30)))
            for _ in range(12 * keys)
        ]
        batches.append(batch)
    return batches


@pytest.mark.parametrize("windows", sorted(ASSIGNERS))
@pytest.mark.parametrize("seed", range(12))
def test_partials_merged_are_the_one_task_run(seed: int, windows: str) -> None:
    """Per key (or one key, None), partials of random parts: results, drops and the
    stored contents after every micro-batch are the one-task operator's."""
    rng = random.Random(seed)
    keyed = seed % 3 != 0
    function = Larger() if seed % 2 else CountMax()
    logic = window_logic(function, KeyedWithWindow() if keyed else WithWindow())
    spec = OperatorSpec(ASSIGNERS[windows], logic)
    one_task = create_window_operator(spec)
    merging = partials_operator(spec)
    keys = [0, 1, 2] if keyed else [None]
    high = None
    for batch in _batches(rng, len(keys)):
        batch = [(keys[k], value, ts) for k, value, ts in batch]
        for key in keys:  # a key group's call feeds each key's elements in turn
            for k, value, ts in batch:
                if k == key:
                    one_task.process_element(key, value, ts)
            held = [(p, ts) for k, p, ts in _partials(spec, batch, 1 + seed % 3, rng) if k == key]
            merging.process_elements(key, [p for p, _ in held], [ts for _, ts in held])
        high = max([high or 0, *(ts for _, _, ts in batch)])
        watermark = high - 3
        for op in (one_task, merging):
            if watermark > op.current_watermark:
                op.process_watermark(watermark)
        for key in keys:  # each stores the user's accumulator (or reduced value)
            assert merging.window_contents(key) == one_task.window_contents(key)
    assert merging.num_late_records_dropped == one_task.num_late_records_dropped
    assert one_task.num_late_records_dropped > 0
    for op in (one_task, merging):
        op.process_watermark(LONG_MAX)
    assert merging.output == one_task.output
    assert len(one_task.output) > 3


def test_a_late_partial_drops_each_of_its_elements() -> None:
    spec = _spec()
    merging = partials_operator(spec)
    merging.process_watermark(19)
    late = Partial(10, 20, [4, 9], 4)  # its window's max timestamp 19 is behind
    on_time = Partial(20, 30, [2, 7], 2)
    merging.process_elements(None, [late, on_time], [12, 21])
    assert merging.num_late_records_dropped == 4
    assert merging.window_contents(None) == {tm.TimeWindow(20, 30): [2, 7]}


def test_either_operator_restores_the_others_key_state() -> None:
    """A restart that switches the combining on or off reads the stored key state."""
    spec = _spec()
    one_task = create_window_operator(spec)
    for value, ts in [(3, 1), (8, 4), (5, 12)]:
        one_task.process_element(None, value, ts)
    merging = partials_operator(spec)
    merging.restore_key(None, pickle.loads(pickle.dumps(one_task.snapshot_key(None))))
    merging.process_elements(None, [Partial(0, 10, [2, 9], 2)], [6])
    back = create_window_operator(spec)
    back.restore_key(None, pickle.loads(pickle.dumps(merging.snapshot_key(None))))
    back.process_element(None, 1, 15)
    back.process_watermark(LONG_MAX)
    assert [result for result, _ in back.output] == [
        (0, (4, 9), LONG_MAX),
        (10, (2, 5), LONG_MAX),
    ]


@pytest.mark.parametrize(
    "options", [{}, {"trigger": tm.CountTrigger.of(2)}], ids=["default", "count"]
)
def test_processing_time_windows_need_their_default_trigger(options: dict) -> None:
    logic = window_logic(CountMax(), WithWindow())
    spec = OperatorSpec(tm.TumblingProcessingTimeWindows.of(SIZE), logic, **options)
    assert stream_serves(spec) is not options


@pytest.mark.parametrize("windows", ["tumbling", "sliding"])
@pytest.mark.parametrize("seed", range(6))
def test_processing_time_partials_merged_are_the_one_task_run(seed: int, windows: str) -> None:
    """Processing-time windows: a key's elements of a micro-batch, in any number of
    partials (one per part), land in the windows of the key's processing time there."""
    rng = random.Random(seed)
    assigner = (
        tm.TumblingProcessingTimeWindows.of(SIZE)
        if windows == "tumbling"
        else tm.SlidingProcessingTimeWindows.of(SIZE, 4)
    )
    spec = OperatorSpec(assigner, window_logic(CountMax(), KeyedWithWindow()))
    one_task = create_window_operator(spec)
    merging = partials_operator(spec)
    now = 0
    for _ in range(8):
        now += rng.randrange(0, 9)
        for op in (one_task, merging):
            op.advance_processing_time(now)
        for key in (0, 1, 2):
            values = [rng.randrange(100) for _ in range(rng.randrange(0, 6))]
            for value in values:
                one_task.process_element(key, value, None)
            dealt: dict[int, list] = defaultdict(list)
            for value in values:
                dealt[rng.randrange(1 + seed % 3)].append(value)
            partials = [
                Partial(0, 0, spec.logic.add_all(None, held), len(held)) for held in dealt.values()
            ]
            merging.process_elements(key, partials, [None] * len(partials))
            assert merging.window_contents(key) == one_task.window_contents(key)
    for op in (one_task, merging):
        op.advance_processing_time(LONG_MAX)
    assert merging.output == one_task.output
    assert len(one_task.output) > 3
