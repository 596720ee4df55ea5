"""A BATCH ``window_all`` of a declared order-insensitive function, pre-aggregated per
Spark partition and merged in one task (LOCAL_GLOBAL), equals the one-task run exactly:
results in their order, timestamps, side outputs, the watermark its window function
sees, the figures; on random inputs over several assigners (sliding with offsets,
sessions of a static gap and of a dynamic one keeping all elements), partitions left
empty, NaN and null values; and the errors are the same.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

import tidemark as tm
from tidemark.errors import InputDataError, UserFunctionError
from tidemark.spark import execution
from tidemark.spark.batch.local_global import CONF

pytestmark = pytest.mark.spark

NOTES = tm.OutputTag("notes", "start long, before long")


def _larger(a: Any, b: Any) -> bool:
    """``b > a`` with null below and NaN above every number (Spark's order), and -0.0
    below 0.0, so that the largest does not depend on the order (as declared)."""
    if b is None or a is None:
        return a is None and b is not None
    if math.isnan(b) or math.isnan(a):
        return math.isnan(b) and not math.isnan(a)
    return (b, math.copysign(1, b)) > (a, math.copysign(1, a))


class CountSumMax(tm.AggregateFunction):
    """Count, integer sum and the largest score (NaN largest, nulls skipped)."""

    order_insensitive = True

    def create_accumulator(self) -> list[Any]:
        return [0, 0, None]

    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        accumulator[0] += 1
        accumulator[1] += value.amount or 0
        if _larger(accumulator[2], value.score):
            accumulator[2] = value.score
        return accumulator

    def get_result(self, accumulator: list[Any]) -> tuple[Any, ...]:
        return tuple(accumulator)

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        top = acc_b[2] if _larger(acc_a[2], acc_b[2]) else acc_a[2]
        return [acc_a[0] + acc_b[0], acc_a[1] + acc_b[1], top]


class Described(tm.ProcessAllWindowFunction):
    """The window, the watermark seen, the result, the firings before it (global state)
    and a side output per firing."""

    def process(self, context: Any, elements: Any) -> Any:
        window = context.window()
        fired = context.global_state().get_state(tm.ValueStateDescriptor("fired"))
        before = fired.value() or 0
        fired.update(before + 1)
        context.output(NOTES, (window.start, before))
        for n, total, top in elements:
            yield (window.start, window.end, context.current_watermark(), n, total, top, before)


DESCRIBED = "start long, end long, watermark long, n long, total long, top double, before long"


class LargestAmount(tm.ReduceFunction):
    """The row with the largest ``(amount, n)`` (nulls lowest): a reduce over Rows."""

    order_insensitive = True

    def reduce(self, value1: Any, value2: Any) -> Any:
        def rank(row: Any) -> tuple[Any, ...]:
            return (row.amount is not None, row.amount or 0, row.n)

        return value2 if rank(value2) > rank(value1) else value1


ASSIGNERS = {
    "tumbling": tm.TumblingEventTimeWindows.of(700),
    "tumbling_offset": tm.TumblingEventTimeWindows.of(700, 250),
    "sliding_offset": tm.SlidingEventTimeWindows.of(900, 300, 100),
    "session": tm.EventTimeSessionWindows.with_gap(60),
    "dynamic_kept": tm.EventTimeSessionWindows.with_dynamic_gap(
        lambda row: 7 + row.n % 60, keep_all_elements=True
    ),
    "dynamic_flinks": tm.EventTimeSessionWindows.with_dynamic_gap(
        lambda row: 7 + row.n % 60, keep_all_elements=False
    ),
}


def _events(spark: Any, seed: int, size: int, partitions: int) -> Any:
    rng = random.Random(seed)
    rows = []
    for n in range(size):
        amount = None if rng.random() < 0.05 else rng.randrange(-50, 50)
        score = rng.choice([None, math.nan, -0.0, 0.0, float(rng.randrange(10))])
        ts = rng.randrange(-3000, 3000) // 7 * 7
        rows.append((amount, score, ts, n))
    df = spark.createDataFrame(rows, "amount long, score double, ts long, n long")
    return df.repartition(partitions)  # more partitions than rows leaves some empty


def _outputs(spark: Any, df: Any, assigner: str, function: str, split: bool) -> Any:
    spark.conf.set(CONF, "true" if split else "false")
    try:
        windowed = tm.from_dataframe(df, timestamp="ts").window_all(ASSIGNERS[assigner])
        if function == "described":
            result = windowed.aggregate(CountSumMax(), Described(), DESCRIBED)
        elif function == "aggregate":
            result = windowed.aggregate(CountSumMax(), output_schema="n long, t long, m double")
        else:
            result = windowed.reduce(LargestAmount())
        mode = execution.mode_of(result.plan, spark)
        expected_mode = execution.ExecutionMode.LOCAL_GLOBAL if split else "one task"
        assert (mode is execution.ExecutionMode.LOCAL_GLOBAL) == (expected_mode != "one task")
        rows = [tuple(r) for r in result.to_dataframe().collect()]
        notes = [tuple(r) for r in result.get_side_output(NOTES).to_dataframe().collect()]
        return rows, sorted(notes), result.metrics()
    finally:
        spark.conf.unset(CONF)


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, -0.0 told from 0.0."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize(
    ("assigner", "function", "seed", "size", "partitions"),
    [
        pytest.param("tumbling", "described", 1, 300, 3, id="tumbling-process"),
        pytest.param("tumbling_offset", "aggregate", 2, 200, 4, id="tumbling-offset"),
        pytest.param("sliding_offset", "described", 3, 250, 3, id="sliding-offset-process"),
        pytest.param("sliding_offset", "reduce", 4, 150, 2, id="sliding-offset-reduce"),
        pytest.param("session", "described", 5, 250, 3, id="session-process"),
        pytest.param("dynamic_kept", "aggregate", 6, 250, 4, id="dynamic-session-kept"),
        pytest.param("tumbling", "aggregate", 7, 3, 6, id="empty-partitions"),
        pytest.param("sliding_offset", "aggregate", 8, 0, 2, id="no-element"),
    ],
)
def test_pre_aggregated_window_all_is_the_one_task_run(
    spark: Any, assigner: str, function: str, seed: int, size: int, partitions: int
) -> None:
    df = _events(spark, seed, size, partitions)
    one_task = _outputs(spark, df, assigner, function, split=False)
    split = _outputs(spark, df, assigner, function, split=True)
    assert _same(split[0], one_task[0])  # the rows, in their order
    assert split[1] == one_task[1]
    assert split[2] == one_task[2]
    if size:
        assert one_task[2]["num_records_in"] == size and one_task[0]


class Undeclared(CountSumMax):
    order_insensitive = False


def test_undeclared_functions_keep_the_one_task_run(spark: Any) -> None:
    df = _events(spark, 9, 20, 2)
    stream = tm.from_dataframe(df, timestamp="ts")
    windowed = stream.window_all(ASSIGNERS["tumbling"])
    undeclared = windowed.aggregate(Undeclared(), output_schema="n long, t long, m double")
    assert execution.mode_of(undeclared.plan, spark) is execution.ExecutionMode.BATCH
    counted = windowed.trigger(tm.CountTrigger.of(3))
    triggered = counted.aggregate(CountSumMax(), output_schema="n long, t long, m double")
    assert execution.mode_of(triggered.plan, spark) is execution.ExecutionMode.BATCH
    keyed = stream.key_by("n").window(ASSIGNERS["tumbling"])
    per_key = keyed.aggregate(CountSumMax(), output_schema="n long, t long, m double")
    assert execution.mode_of(per_key.plan, spark) is execution.ExecutionMode.BATCH
    sessions = stream.window_all(ASSIGNERS["dynamic_flinks"])  # lose elements as Flink's
    merged = sessions.aggregate(CountSumMax(), output_schema="n long, t long, m double")
    assert execution.mode_of(merged.plan, spark) is execution.ExecutionMode.BATCH
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(100)
    recorded = tm.from_dataframe(df, timestamp="ts", order_by="n", watermark_strategy=strategy)
    replay = recorded.window_all(ASSIGNERS["tumbling"])
    replayed = replay.aggregate(CountSumMax(), output_schema="n long, t long, m double")
    assert execution.mode_of(replayed.plan, spark) is execution.ExecutionMode.REPLAY


class Failing(CountSumMax):
    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        if value.n == 7:
            raise ValueError("seven")
        return super().add(value, accumulator)


@pytest.mark.parametrize("split", [False, True], ids=["one-task", "split"])
def test_errors_are_the_one_task_runs(spark: Any, split: bool) -> None:
    spark.conf.set(CONF, "true" if split else "false")
    try:
        rows = [(1, 0.5, 100, 7), (2, 1.0, None, 8)]
        df = spark.createDataFrame(rows, "amount long, score double, ts long, n long")
        windowed = tm.from_dataframe(df.limit(1), timestamp="ts").window_all(ASSIGNERS["tumbling"])
        failing = windowed.aggregate(Failing(), output_schema="n long, t long, m double")
        seven = "the reduce/aggregate function raised ValueError: seven \\(key=None, window="
        with pytest.raises(UserFunctionError, match=seven), tm.raising_tidemark_errors():
            failing.to_dataframe().collect()
        stream = tm.from_dataframe(df.where("n = 8"), timestamp="ts")
        null_ts = stream.window_all(ASSIGNERS["tumbling"])
        counted = null_ts.aggregate(CountSumMax(), output_schema="n long, t long, m double")
        null = "null timestamp in column 'ts'"
        with pytest.raises(InputDataError, match=null), tm.raising_tidemark_errors():
            counted.to_dataframe().collect()
    finally:
        spark.conf.unset(CONF)
