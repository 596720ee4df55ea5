"""The processing-time aligned operator (BATCH runs of elements at one processing time
added to the windows of that time at once) is the general operator, only faster: random
runs at random clock times, both ways (``fast_paths`` on and off), must give the same
output, side output and state, after every run and at each key's end.

Also pinned: which pipelines get it, and that a BATCH task reads the wall clock once per
run of a key's elements for it (and per element for every other processing-time
pipeline).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StructField, StructType
from test_fast_paths import IdList, WatermarkSeen, concat_ids
from test_properties import CountAndSum, examples, sum_reduce, window_label

from tidemark import (
    LONG_MAX,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    EventTimeTrigger,
    OutputTag,
    ProcessingTimeTrigger,
    ProcessWindowFunction,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    ValueStateDescriptor,
)
from tidemark._engine.create import ProcessingTimeAlignedOperator
from tidemark._engine.functions import window_logic
from tidemark._engine.operator import WindowOperator
from tidemark._engine.spec import OperatorSpec
from tidemark.spark.batch import worker
from tidemark.spark.batch.worker import BatchDriver, RunnerConfig
from tidemark.testing import WindowOperatorHarness

CLEARED = OutputTag("cleared")
FIRINGS = ValueStateDescriptor("firings")


class FiringsAndClears(ProcessWindowFunction):
    """Counts firings in per-window and global state, reports each clear on a side
    output, with the clocks it saw."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        state = context.window_state().get_state(FIRINGS)
        state.update((state.value() or 0) + 1)
        total = context.global_state().get_state(FIRINGS)
        total.update((total.value() or 0) + 1)
        yield (
            key,
            window_label(context.window()),
            state.value(),
            total.value(),
            context.current_processing_time(),
            tuple(elements),
        )

    def clear(self, context):  # type: ignore[no-untyped-def]
        context.window_state().get_state(FIRINGS).clear()
        context.output(CLEARED, (window_label(context.window()), context.current_processing_time()))


FUNCTIONS = {
    "reduce": lambda: sum_reduce,
    "concat_reduce": lambda: concat_ids,
    "aggregate": CountAndSum,
    "concat_aggregate": IdList,
    "reduce_seen": lambda: (sum_reduce, WatermarkSeen()),
    "aggregate_cleared": lambda: (CountAndSum(), FiringsAndClears()),
    "elements_seen": WatermarkSeen,
    "elements_cleared": FiringsAndClears,
}


@dataclass(frozen=True)
class Case:
    """Tumbling (``slide`` None) or sliding processing-time windows and a function."""

    size: int
    slide: int | None
    offset: int
    function: str

    def harness(self, fast_paths: bool) -> WindowOperatorHarness:
        if self.slide is None:
            assigner: Any = TumblingProcessingTimeWindows.of(self.size, self.offset)
        else:
            assigner = SlidingProcessingTimeWindows.of(self.size, self.slide, self.offset)
        return WindowOperatorHarness(
            assigner,
            FUNCTIONS[self.function](),
            key_selector=lambda value: value[0],
            fast_paths=fast_paths,
            batch_mode=True,
        )


@st.composite
def cases(draw: Any) -> Case:
    size = draw(st.integers(1, 40))
    slide = draw(st.one_of(st.none(), st.integers(1, size)))
    offset = draw(st.integers(-((slide or size) - 1), (slide or size) - 1))
    return Case(size, slide, offset, draw(st.sampled_from(sorted(FUNCTIONS))))


@st.composite
def key_runs(draw: Any) -> list[tuple[str, list[tuple[int, int, bool]]]]:
    """Keys, each with runs ``(elements, clock step before it, fire due timers)``: the
    clock stands or moves on before a run, and may fire what it reached (as a stream's
    clock would; BATCH fires at the key's end only)."""
    keys = []
    for key in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True)):
        runs = draw(
            st.lists(
                st.tuples(st.integers(1, 6), st.sampled_from((0, 0, 1, 7, 30)), st.booleans()),
                min_size=1,
                max_size=6,
            )
        )
        keys.append((key, runs))
    return keys


def run(harness: WindowOperatorHarness, keys: Any, start: int) -> Any:
    """Each key's runs at their clock times, then the clocks to +inf, the key's state
    (then it goes); the key's whole state after every run."""
    operator = harness.operator
    next_id, states = 0, []
    for key, runs in keys:
        clock = start
        for size, step, fire in runs:
            clock += step
            if fire:
                operator.advance_processing_time(clock)
            else:
                operator.current_processing_time = clock
            values = [(key, next_id + i, (next_id + i) % 7) for i in range(size)]
            next_id += size
            operator.process_elements(key, values, [None] * size)
            states.append(operator.snapshot_key(key).__getstate__())  # type: ignore[union-attr]
        operator.process_watermark(LONG_MAX)
        operator.advance_processing_time(LONG_MAX)
        left = operator.evict_key(key)
        states.append(None if left is None else left.__getstate__())
        operator.reset_clocks()
    return list(operator.output), operator.side_outputs, states


@settings(max_examples=examples(400), deadline=None)
@given(case=cases(), keys=key_runs(), start=st.integers(-50, 50))
def test_runs_at_one_processing_time_equal_the_general_operator(
    case: Case, keys: Any, start: int
) -> None:
    fast, general = case.harness(True), case.harness(False)
    assert isinstance(fast.operator, ProcessingTimeAlignedOperator)
    assert type(general.operator) is WindowOperator
    assert run(fast, keys, start) == run(general, keys, start)


# ---------------------------------------------------------------- which operator


def harness(assigner: Any, **options: Any) -> WindowOperatorHarness:
    options.setdefault("batch_mode", True)
    return WindowOperatorHarness(assigner, sum_reduce, key_selector=lambda v: v[0], **options)


class OwnProcessingTimeTrigger(ProcessingTimeTrigger):
    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        return super().on_element(element, timestamp, window, ctx)


def test_batch_processing_time_windows_get_the_processing_time_aligned_operator() -> None:
    for assigner in (
        TumblingProcessingTimeWindows.of(10),
        SlidingProcessingTimeWindows.of(10, 5),
    ):
        assert isinstance(harness(assigner).operator, ProcessingTimeAlignedOperator)
    trigger = ProcessingTimeTrigger.create()
    operator = harness(TumblingProcessingTimeWindows.of(10), trigger=trigger).operator
    assert isinstance(operator, ProcessingTimeAlignedOperator)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"fast_paths": False}, id="fast-paths-off"),
        pytest.param({"trigger": OwnProcessingTimeTrigger()}, id="trigger-subclass"),
        pytest.param({"trigger": ContinuousProcessingTimeTrigger.of(5)}, id="own-trigger"),
        pytest.param({"evictor": CountEvictor.of(2)}, id="evictor"),
        pytest.param(
            {"assigner": TumblingEventTimeWindows.of(10), "trigger": EventTimeTrigger()},
            id="event-time",
        ),
    ],
)
def test_other_pipelines_do_not_get_the_processing_time_aligned_operator(
    options: dict[str, Any],
) -> None:
    assigner = options.pop("assigner", TumblingProcessingTimeWindows.of(10))
    operator = harness(assigner, **options).operator
    assert not isinstance(operator, ProcessingTimeAlignedOperator)


# ---------------------------------------------------------------- the BATCH task's clock


def batch_task(
    monkeypatch: pytest.MonkeyPatch, trigger: Any, clock: list[float]
) -> list[tuple[int, int, int]]:
    """A BATCH task over keys a (3 elements) and b (2), the wall clock stepping through
    ``clock`` (seconds) at each reading; ``(key, count, window start)`` per result."""

    class Count(ProcessWindowFunction):
        def process(self, key, context, elements):  # type: ignore[no-untyped-def]
            yield (key, len(list(elements)), context.window().start)

    # the spec a BATCH run ships (batch_mode: each key's elements come complete)
    spec = OperatorSpec(
        TumblingProcessingTimeWindows.of(10), window_logic(Count()), trigger, batch_mode=True
    )
    output = StructType([StructField(n, LongType()) for n in ("k", "n", "start")])
    config = RunnerConfig(
        spec=spec,
        value_names=("k",),
        value_types=("LongType",),
        result_schema=output,
        key_columns=["k"],
        function_key=False,
        replay=False,
        watermarks=None,
        timestamp_column=None,
        has_processing_time=False,
        timestamps_in="ts",
    )
    batch = pa.RecordBatch.from_pydict(
        {"k": [1, 1, 1, 2, 2], "ts": pa.array([None] * 5, pa.int64())}
    )
    readings = iter(clock)
    monkeypatch.setattr(worker, "time", SimpleNamespace(time=lambda: next(readings)))
    out = pa.Table.from_batches(list(BatchDriver(config)(iter([batch]))))
    main = out.filter(pa.compute.equal(out["__tm_output"], "main"))
    return sorted(zip(*(main[n].to_pylist() for n in ("k", "n", "start"))))


def test_a_batch_task_reads_the_clock_once_per_run_of_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each reading 5 ms later: the window [0, 10) ms at the run's first reading, 0.000 s.
    clock = [0.005 * i for i in range(10)]
    assert batch_task(monkeypatch, None, clock) == [(1, 3, 0), (2, 2, 0)]


def test_a_batch_task_reads_the_clock_per_element_for_another_processing_time_trigger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A trigger of its own takes the general path: 0, 5 ms in [0, 10), 10 ms in [10, 20)
    clock = [0.005 * i for i in range(10)]
    results = batch_task(monkeypatch, OwnProcessingTimeTrigger(), clock)
    assert results == [(1, 1, 10), (1, 2, 0), (2, 1, 10), (2, 1, 20)]
