"""Dynamic-gap sessions and Flink's lost elements (docs/concepts/sessions.md, "Dynamic
gaps and Flink's lost elements").

Flink 1.20's merging window set maps a window equal to an in-flight merged session to
itself, so the session's earlier elements are left in a state no one fires. tidemark
gives Flink's result by default (pinned here against the output of a real Flink 1.20.5
run), and ``keep_all_elements=True`` keeps every element: on the engine, on its fast
paths, in BATCH, a replay and a stream, and in a ``window_all`` split over partitions.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import differential as d
import pytest
from test_differential import check, check_streamed, scenarios

import tidemark as tm
from tidemark.errors import WindowSpecError
from tidemark.testing import WindowOperatorHarness

# tools/flinkref/examples.json, "dynamic-session-equal" (gap_unit 1: gap = 1 + value % 4;
# tests/flink/test_against_flink.py replays it), on Flink 1.20.5:
# four elements of value 0 at 0 ([0, 1)), then two of value 1 at 0 ([0, 2)), key "a",
# an AggregateFunction (sum, count): one window [0, 2) of sum 1, count 1, ts 1.
FLINK_DYN_EQUAL = [("a", 0, 2, (1, 1), 1)]
VALUES = [0, 0, 0, 0, 1, 1]


class SumCount(tm.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value[1], accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> tuple[int, int]:
        return (accumulator[0], accumulator[1])

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


class Labelled(tm.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        for result in elements:
            yield (key, window.start, window.end, result)


def gap_of(element: Any) -> int:
    return 1 + element[1] % 4


def engine_run(keep: bool | None, fast_paths: bool, batch: bool) -> list[Any]:
    harness = WindowOperatorHarness(
        tm.EventTimeSessionWindows.with_dynamic_gap(gap_of, keep_all_elements=keep),
        (SumCount(), Labelled()),
        key_selector=lambda element: element[0],
        fast_paths=fast_paths,
        batch_mode=batch,
    )
    for value in VALUES:
        harness.process_element(("a", value), 0)
    harness.process_watermark(tm.LONG_MAX)
    return [(*value, timestamp) for value, timestamp in harness.output()]


@pytest.mark.parametrize("fast_paths", [True, False])
@pytest.mark.parametrize("batch", [True, False])
def test_flinks_result_by_default_and_every_element_when_kept(fast_paths, batch):
    assert engine_run(None, fast_paths, batch) == FLINK_DYN_EQUAL
    assert engine_run(False, fast_paths, batch) == FLINK_DYN_EQUAL
    assert engine_run(True, fast_paths, batch) == [("a", 0, 2, (2, 6), 1)]


def test_the_choice_is_a_bool():
    with pytest.raises(WindowSpecError, match=r"`keep_all_elements` must be True .* got 'yes'"):
        tm.EventTimeSessionWindows.with_dynamic_gap(gap_of, keep_all_elements="yes")
    assert tm.ProcessingTimeSessionWindows.with_dynamic_gap(
        gap_of, keep_all_elements=True
    ).keep_all_elements


# ------------------------------------------------------------------ Spark


def _sessions(spark: Any, keep: bool | None) -> Any:
    rows = [("a", value, 1_700_000_000_000) for value in VALUES]
    frame = spark.createDataFrame(rows, "k string, v long, ts long")
    stream = tm.from_dataframe(frame, "ts")
    return stream.key_by("k").window(
        tm.EventTimeSessionWindows.with_dynamic_gap(
            lambda row: 1 + row.v % 4, keep_all_elements=keep
        )
    )


@pytest.mark.spark
def test_the_spark_api_warns_unless_told(spark):
    with pytest.warns(tm.TidemarkWarning, match=r"keep_all_elements=True .* Flink's results"):
        windows = _sessions(spark, None).sum("v")
    assert [(r.v,) for r in windows.to_dataframe().collect()] == [(1,)]
    for keep, total in ((False, 1), (True, 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", tm.TidemarkWarning)
            windows = _sessions(spark, keep).sum("v")
        assert [r.v for r in windows.to_dataframe().collect()] == [total]


def kept_scenarios(seed: int, count: int) -> list[dict]:
    """Random dynamic-gap scenarios that keep all elements, one of them the named case."""
    found = [s for s in scenarios(seed, 40 * count) if s["assigner"]["type"] == "dynamic"]
    chosen = found[:count]
    for scenario in chosen:
        scenario["assigner"]["keep"] = True
    rows = [("k0", v, 0, arrival, tm.LONG_MIN) for arrival, v in enumerate(VALUES)]
    chosen[0] = {**chosen[0], "rows": rows, "trigger": None, "evictor": None}
    chosen[0]["out_of_orderness"] = chosen[0]["out_of_orderness"] or 0
    return chosen


@pytest.mark.spark
@pytest.mark.parametrize("replay", [False, True], ids=["batch", "replay"])
def test_kept_sessions_in_batch_and_replay_are_the_engines(spark, replay):
    check(spark, kept_scenarios(31, 6), replay=replay)


@pytest.mark.spark
def test_kept_sessions_in_a_stream_are_the_engines(spark, tmp_path):
    (stream,), batches = d.random_streaming_scenarios(random.Random(32), 1)
    picked = kept_scenarios(33, 3)[1:]
    for scenario in picked:
        scenario["out_of_orderness"], scenario["rows"] = stream["out_of_orderness"], stream["rows"]
    check_streamed(spark, tmp_path, picked, batches)
