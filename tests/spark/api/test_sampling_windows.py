"""Sliding windows with ``slide > size``: sampling windows, with gaps (issue 47).

Flink accepts them (its only rules: ``size > 0``, ``abs(offset) < slide``). An element in
a gap is in no window: Flink's ``WindowOperator`` sends it to the late side output or
counts it in ``numLateRecordsDropped`` only when it is late, and otherwise loses it
without a trace. tidemark accounts for every element, so a gap element that is not late
is counted in ``num_late_records_dropped`` (never sent to the late side output: it is not
late); a late one is handled as every late element is. Fast paths (aligned, sliced,
pre-aggregation, the columnar BATCH paths) assume each timestamp is in some window, so
sampling windows take the general path in every mode.

Windows of 10 s every 30 s, one key ``a``::

    0        10                 30       40                 60       70
    [--------)  . . gap . . .   [--------)  . . gap . . .   [--------)
        a@5       a@15  a@25        a@35       a@41
"""

from __future__ import annotations

import pytest
from streaming_scenarios import keyed_file_stream

import tidemark as tm
from tidemark._engine.trace import Tracer
from tidemark.spark.streaming import END_OF_INPUT_MS
from tidemark.testing import WindowOperatorHarness
from tidemark.time import LONG_MAX

S = 1000
SAMPLING = tm.SlidingEventTimeWindows.of(10 * S, 30 * S)
LATE = tm.OutputTag("late")


def _harness(assigner, **options):
    return WindowOperatorHarness(assigner, lambda a, b: a + b, **options)


@pytest.mark.parametrize("fast_paths", [True, False], ids=["fast-paths", "general"])
@pytest.mark.parametrize(
    ("arrivals", "side_output", "results", "late", "dropped"),
    [
        pytest.param(
            # 15 and 25 fall in the gap before any watermark: not late, counted
            [(1, 5), (10, 15), (100, 35), (1000, 25)],
            False,
            [(1, 9999), (100, 39999)],
            [],
            2,
            id="gap-elements-counted",
        ),
        pytest.param(
            # the same with a late side output: a gap element is not late, so not in it
            [(1, 5), (10, 15), (100, 35), (1000, 25)],
            True,
            [(1, 9999), (100, 39999)],
            [],
            2,
            id="not-late-gap-elements-never-reach-the-side-output",
        ),
        pytest.param(
            # watermark 40 s after a@41 (see below): a@25 is late as well as in a gap
            [(1, 5), (100, 41), (1000, 25)],
            True,
            [(1, 9999)],
            [(1000, 25 * S)],
            1,
            id="a-late-gap-element-goes-to-the-side-output",
        ),
    ],
)
def test_gap_elements_are_counted_on_the_engine(
    fast_paths, arrivals, side_output, results, late, dropped
):
    h = _harness(SAMPLING, fast_paths=fast_paths, late_data_tag=LATE if side_output else None)
    for value, seconds in arrivals:
        h.process_element(value, seconds * S)
        if seconds == 41:
            h.process_watermark(40 * S)
    h.process_watermark(LONG_MAX)
    assert type(h.operator).__name__ == "WindowOperator"  # no fast path for gaps
    assert h.output() == results
    assert h.side_output(LATE) == late
    assert h.num_late_records_dropped == dropped
    assert (h.num_keyed_state_entries(), h.num_event_time_timers()) == (0, 0)


def test_the_windows_and_the_gaps_of_sampling_windows():
    windows = [SAMPLING.assign_windows(None, s * S, None) for s in (0, 9, 10, 29, 30, -21, -20)]
    assert [[(w.start, w.end) for w in ws] for ws in windows] == [
        [(0, 10 * S)],
        [(0, 10 * S)],
        [],
        [],
        [(30 * S, 40 * S)],
        [(-30 * S, -20 * S)],
        [],
    ]
    assert SAMPLING.aligned_layout() is None
    assert tm.SlidingEventTimeWindows.of(10, 10).aligned_layout() is not None


def test_processing_time_gap_elements_are_counted():
    h = _harness(tm.SlidingProcessingTimeWindows.of(10, 30))
    for now, value in [(5, 1), (15, 10), (35, 100)]:
        h.set_processing_time(now)
        h.process_element(value)
    h.set_processing_time(100)
    assert h.output() == [(1, 9), (100, 39)]
    assert h.num_late_records_dropped == 1


def test_a_traced_gap_element_is_dropped():
    tracer = Tracer()
    h = _harness(SAMPLING, tracer=tracer)
    statuses = []
    for value, seconds in [(1, 5), (10, 15)]:
        arrival = tracer.begin_element(None, seconds * S, f"e{value}")
        status = h.operator.process_element(None, value, seconds * S)
        statuses.append(tracer.element_status(arrival, status))
    assert statuses == ["on_time", "dropped"]
    assert h.num_late_records_dropped == 1


# ------------------------------------------------------------------------ on Spark

ROWS = [("a", 5, 1), ("a", 15, 10), ("a", 35, 100), ("a", 25, 1000), ("a", 12, 10000)]


def _pipeline(source, **stream):
    monotonous = tm.WatermarkStrategy.for_monotonous_timestamps()
    return (
        tm.from_dataframe(source, timestamp="ts", watermark_strategy=monotonous, **stream)
        .key_by("k")
        .window(SAMPLING)
        .side_output_late_data(LATE)
        .sum("n")
    )


def _outputs(result, **options):
    got: dict[str, list] = {"main": [], "late": [], "dropped": []}
    sinks = {
        "main": lambda df, _: got["main"].extend(tuple(r) for r in df.collect()),
        LATE: lambda df, _: got["late"].extend(tuple(r) for r in df.collect()),
        "__late_records_dropped": lambda df, b: got["dropped"].append((b, df.first()[0])),
    }
    query = result.write_outputs(sinks, **options)
    if query is not None:
        query.awaitTermination(300)
    return got


@pytest.mark.spark
def test_gap_elements_are_counted_in_batch(spark):
    df = spark.createDataFrame([(k, s * S, n) for k, s, n in ROWS], "k string, ts long, n long")
    got = _outputs(_pipeline(df, timestamp_unit="ms"))
    # BATCH has no watermark before the end: every gap element is counted, none is late
    assert sorted(got["main"]) == [("a", 5 * S, 1), ("a", 35 * S, 100)]
    assert got["late"] == []
    assert got["dropped"] == [(0, 3)]


@pytest.mark.spark
def test_gap_elements_are_counted_in_a_replay(spark):
    rows = [(k, s * S, n, i) for i, (k, s, n) in enumerate(ROWS)]
    df = spark.createDataFrame(rows, "k string, ts long, n long, arrival long")
    got = _outputs(_pipeline(df, timestamp_unit="ms", order_by="arrival"))
    # a@15 comes under watermark 5 s - 1: not late, counted; a@25 and a@12 come after
    # a@35 (watermark 35 s - 1): late, to the side output
    assert sorted(got["main"]) == [("a", 5 * S, 1, 0), ("a", 35 * S, 100, 2)]
    assert sorted(r[:3] for r in got["late"]) == [("a", 12 * S, 10000), ("a", 25 * S, 1000)]
    assert got["dropped"] == [(0, 1)]


@pytest.mark.spark
def test_gap_elements_are_counted_on_a_stream(spark, tmp_path):
    """One file per micro-batch: a@5, a@15 (gap), a@35; then a@25 (gap, late: the
    watermark is 35 s - 1), a@41 (gap, not late); then the end-of-input marker."""
    batches = [
        [("a", 5 * S, 1), ("a", 15 * S, 10), ("a", 35 * S, 100)],
        [("a", 25 * S, 1000), ("a", 41 * S, 10000)],
        [("_end", END_OF_INPUT_MS, 0)],
    ]
    source = keyed_file_stream(spark, tmp_path / "in", batches)
    got = _outputs(
        _pipeline(source),
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    assert sorted(got["main"]) == [("a", 5 * S, 1), ("a", 35 * S, 100)]
    assert got["late"] == [("a", 25 * S, 1000)]
    dropped = dict(got["dropped"])
    assert (dropped[0], dropped[1]) == (1, 1)
    assert sum(dropped.values()) == 2
