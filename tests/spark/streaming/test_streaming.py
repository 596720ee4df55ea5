"""The Structured Streaming runner equals the engine fed the same micro-batches.

Every scenario is a file-source stream fed one JSON file per micro-batch; its outputs
(results, late side output, dropped count) must equal :func:`engine_reference`: the
engine fed each batch's elements followed by the watermark Spark moved to.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import search_path
from pyspark.sql.types import LongType, StructField, StructType
from streaming_scenarios import (
    LATE,
    LATENESS,
    PANES,
    RESULT_SCHEMA,
    SCENARIOS,
    Describe,
    FileStream,
    Scenario,
    _spec,
    combined_stream,
    describe_row,
    engine_reference,
    summarize,
)

from tidemark import (
    ContinuousProcessingTimeTrigger,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import combined_schema
from tidemark.spark.streaming import StreamPlan, window_stream, write_outputs
from tidemark.spark.streaming.driver.checkpoint import read_records
from tidemark.spark.streaming.driver.state_reader import read_group_rows
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS
from tidemark.spark.streaming.worker.state import load_keys

pytestmark = pytest.mark.spark

TESTS_DIR = Path(__file__).parents[2]


def _state_rows(spark, checkpoint: str) -> list:
    """The key-group rows of the query's state store (Spark's state data source)."""
    return read_group_rows(spark, checkpoint)


def _state_keys(spark, checkpoint: str) -> set:
    """The engine keys the state store holds, over all key-group rows."""
    return {k for row in _state_rows(spark, checkpoint) for k in load_keys(row.keys)}


def _run(spark, scenario: Scenario, root: Path) -> FileStream:
    stream = FileStream(spark, scenario, root).start()
    try:
        stream.feed()
    finally:
        stream.stop()
    return stream


# ---------------------------------------------------------------------- fast end to end


def test_lateness_side_output_and_cleanup_match_engine(spark, tmp_path):
    """One query, three sinks: results, late data and drop counts equal the engine's;
    the operator runs once per batch; state is gone once the final watermark passed.

    ::

        size 10, allowed lateness 5, out-of-orderness 2      W after batch: 2 12 22 27 MAX
        batch 2: a@2  behind Spark's previous watermark -> late firing of a[0,10)
                 a@11 behind the watermark, window [10,20) open -> added
        batch 3: a@12 -> late firing of a[10,20); a@1, b@9 -> side output "late"
    """
    log = tmp_path / "fired.log"
    spec = _spec(
        TumblingEventTimeWindows.of(10),
        allowed_lateness_ms=5,
        late_data_tag=LATE,
        function=Describe(str(log)),
    )
    # One key group: a and b share a processor call, a state row and a Spark timer.
    scenario = dataclasses.replace(LATENESS, spec=spec, max_parallelism=1)
    stream = FileStream(spark, scenario, tmp_path / "run").start()
    try:
        stream.feed(4)
        assert _state_keys(spark, stream.checkpoint) == {"a", "b"}  # both hold open windows
        stream.feed()
    finally:
        stream.stop()
    firings = len(log.read_text().splitlines())  # before the reference adds its own
    got, want = summarize(stream.outputs), engine_reference(scenario)
    assert got == want
    assert want["late"] == {("a", 13, 1): 1, ("b", 14, 9): 1}
    firings_of_a0 = [r for r in want["main"] if r[:3] == ("a", 0, 10)]
    assert sorted(r[3] for r in firings_of_a0) == [3, 4]  # on time, then late with a@2
    assert ("a", 10, 20, 2, 13, 22) in want["main"]  # a@11 joined the open window
    assert ("a", 10, 20, 3, 25, 22) in want["main"]  # a@12: late firing
    assert firings == sum(got["main"].values())  # three sinks, one run of the operator
    assert _state_rows(spark, stream.checkpoint) == []  # no key left: group rows cleared
    # a window not in a chain runs in applyInPandasWithState (bindings.py), in the
    # deltas layout in transformWithStateInPandas
    progress = stream.query.recentProgress
    deltas = read_records(spark, stream.checkpoint).layout == "deltas"
    operator = "transformWithStateInPandasExec" if deltas else "applyInPandasWithState"
    assert {op["operatorName"] for p in progress for op in p["stateOperators"]} == {operator}


def test_event_time_without_watermark_is_rejected(spark):
    df = spark.readStream.format("rate").load()
    with pytest.raises(WindowSpecError, match="needs a watermark.*out_of_orderness_ms"):
        _window_stream(df, out_of_orderness_ms=None)


def test_two_windows_in_one_query_are_refused_naming_the_fix(spark, tmp_path):
    """Spark runs one applyInPandasWithState per query: a union of two windows' outputs
    is refused when the query starts, with the way out named."""
    (tmp_path / "in").mkdir()
    first = combined_stream(spark, LATENESS, tmp_path / "in")
    second = combined_stream(spark, LATENESS, tmp_path / "in")
    both = dataclasses.replace(first, frame=first.frame.unionByName(second.frame))
    try:
        with pytest.raises(WindowSpecError, match="one window .or one chain. per query"):
            write_outputs(both, {"main": lambda d, b: None}, str(tmp_path / "checkpoint"))
    finally:  # a query started in error would fail later tests' spark.streams.active == []
        for query in spark.streams.active:
            query.stop()


def test_batch_dataframe_is_rejected(spark):
    with pytest.raises(WindowSpecError, match="must be a streaming DataFrame"):
        _window_stream(spark.range(3).selectExpr("'a' as key", "id as v", "id as ts"))


def test_own_watermark_is_rejected(spark):
    df = spark.readStream.format("rate").load().withWatermark("timestamp", "1 second")
    with pytest.raises(WindowSpecError, match="already has a watermark"):
        _window_stream(df, timestamp_column="timestamp")


def test_processing_time_assigner_needs_processing_time_mode(spark):
    df = spark.readStream.format("rate").load()
    spec = _spec(TumblingProcessingTimeWindows.of(1000))
    with pytest.raises(WindowSpecError, match="needs time_mode='ProcessingTime'"):
        _window_stream(df, spec=spec)


def _window_stream(df, max_parallelism=None, **overrides):
    if "key" not in df.columns:
        df = df.selectExpr("'a' as key", "value as v", "timestamp as ts", "timestamp")
    arguments = dict(
        key_columns=["key"],
        timestamp_column="ts",
        spec=_spec(TumblingEventTimeWindows.of(10)),
        out_of_orderness_ms=0,
        value_columns=["key", "v", "ts"],
        result_schema=RESULT_SCHEMA,
        result_to_row=describe_row,
    )
    arguments.update(overrides)
    return window_stream(
        df,
        StreamPlan(**arguments),
        max_parallelism=max_parallelism,
        spark_offset_ms=SPARK_OFFSET_MS,  # timestamps from the epoch on
    )


# ---------------------------------------------------------------------- all scenarios


@pytest.mark.slow
@pytest.mark.parametrize("max_parallelism", [None, 1], ids=["default_groups", "one_group"])
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != LATENESS.name])
def test_scenario_matches_engine(spark, tmp_path, name, max_parallelism):
    scenario = dataclasses.replace(SCENARIOS[name], max_parallelism=max_parallelism)
    stream = _run(spark, scenario, tmp_path)
    assert summarize(stream.outputs) == engine_reference(scenario)


@pytest.mark.slow
def test_restart_with_other_max_parallelism_fails_naming_it(spark, tmp_path):
    """Key groups are fixed with the state: another count would read state into the
    wrong groups, so the restarted query fails instead, naming the setting."""
    first = FileStream(spark, dataclasses.replace(LATENESS, max_parallelism=4), tmp_path)
    first.start()
    first.feed(2)
    first.stop()
    for other in (8, 3):  # 3: slots of 3 groups are not among those of 4
        second = FileStream(spark, dataclasses.replace(LATENESS, max_parallelism=other), tmp_path)
        second.fed = first.fed
        with pytest.raises(WindowSpecError, match=rf"has 4 key groups, this query {other}"):
            second.start()


def test_max_parallelism_is_validated(spark):
    df = spark.readStream.format("rate").load()
    with pytest.raises(WindowSpecError, match=r"`max_parallelism` must be an int in \[1, 32768\]"):
        _window_stream(df, max_parallelism=0)


@pytest.mark.slow
def test_idle_key_window_closes_in_a_batch_without_its_input(spark, tmp_path):
    scenario = SCENARIOS["idle_key_closed_by_timer"]
    stream = _run(spark, scenario, tmp_path)
    b_batches = [
        b
        for (name, b), rows in stream.outputs.items()
        if name == "main"
        for r in rows
        if r[0] == "b"
    ]
    assert len(b_batches) == 1 and b_batches[0] >= 1  # b had input only in batch 0


@pytest.mark.slow
def test_restart_from_checkpoint_loses_and_duplicates_nothing(spark, tmp_path):
    first = FileStream(spark, LATENESS, tmp_path).start()
    first.feed(2)
    first.stop()
    second = first.restarted()
    try:
        second.feed()
    finally:
        second.stop()
    assert summarize(second.outputs) == engine_reference(LATENESS)


@pytest.mark.slow
@pytest.mark.parametrize("layout", [None, "row"], ids=["session_layout", "row"])
@pytest.mark.parametrize("name", [LATENESS.name, PANES.name])
def test_driver_killed_mid_batch_recovers_exactly(spark, tmp_path, name, layout):
    """kill -9 the driver while a batch's sink runs (before its commit); a new driver
    replays that batch from the checkpoint and the batch-id sink keeps one copy (a
    Dataflow trigger's pane state too), in the session's state layout (the deltas
    layout by default: the replayed batch reads the state its killed attempt did not
    commit, so no worker may trust a copy of it) and in the row layout."""
    from streaming_scenarios import write_batch_file

    before = os.environ.get("TIDEMARK_TEST_STATE_LAYOUT")
    if layout is not None:
        os.environ["TIDEMARK_TEST_STATE_LAYOUT"] = layout  # the children's
    scenario = SCENARIOS[name]
    for index, rows in enumerate(scenario.batches):
        (tmp_path / "in").mkdir(exist_ok=True)
        write_batch_file(tmp_path / "in", index, rows, "long")
    try:
        _kill_and_finish(tmp_path, name)
    finally:
        if before is None:
            os.environ.pop("TIDEMARK_TEST_STATE_LAYOUT", None)
        else:
            os.environ["TIDEMARK_TEST_STATE_LAYOUT"] = before
    if layout is not None:
        record = tmp_path / "checkpoint" / "tidemark-state-layout" / "part-00000.txt"
        assert record.read_text().strip() == layout
    main = spark.read.parquet(str(tmp_path / "out" / "main"))
    late = spark.read.parquet(str(tmp_path / "out" / "late"))
    want = engine_reference(scenario)
    assert sorted(tuple(r)[:-1] for r in main.collect()) == sorted(want["main"].elements())
    assert sorted(tuple(r)[:-1] for r in late.collect()) == sorted(want["late"].elements())


def _kill_and_finish(tmp_path: Path, name: str) -> None:
    child = _child(tmp_path, name, pause_after="3")
    try:
        _wait_for(lambda: (tmp_path / "out" / "_paused").exists(), child, timeout=240)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert not (tmp_path / "out" / "main" / "batch=4").exists()
    finisher = _child(tmp_path, name, pause_after="none")
    assert finisher.wait(timeout=240) == 0


def _child(root: Path, name: str, pause_after: str) -> subprocess.Popen:
    script = TESTS_DIR / "support" / "streaming_scenarios.py"
    args = [sys.executable, str(script), name, str(root), pause_after]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(search_path.folders()))
    log = open(root / f"child-{pause_after}.log", "w")
    return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_for(condition, child: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if child.poll() is not None:
            raise AssertionError(f"child exited early with {child.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the child")
        time.sleep(0.5)


# ---------------------------------------------------------------------- processing time


@pytest.mark.slow
def test_processing_time_windows_close_on_idle_input(spark, tmp_path):
    """Processing-time windows of 2 s: one file, then no input; Spark's processing-time
    timers (a batch per trigger interval, with or without data) close the windows."""
    from streaming_scenarios import write_batch_file

    (tmp_path / "in").mkdir()
    df = spark.readStream.schema("key string, v long, ts long").json(str(tmp_path / "in"))
    combined = _window_stream(
        df,
        spec=_spec(TumblingProcessingTimeWindows.of(2000)),
        out_of_orderness_ms=None,
        time_mode="ProcessingTime",
    )
    got: list = []
    query = write_outputs(
        combined,
        {"main": lambda d, b: got.extend(tuple(r) for r in d.collect())},
        str(tmp_path / "checkpoint"),
        {"processingTime": "500 milliseconds"},
    )
    try:
        write_batch_file(tmp_path / "in", 0, [("a", 1, 0), ("a", 2, 0), ("b", 3, 0)], "long")
        deadline = time.monotonic() + 90
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        query.stop()
    windows = sorted((r[0], r[3], r[4], r[2] - r[1]) for r in got)
    assert windows == [("a", 2, 3, 2000), ("b", 1, 3, 2000)]


@pytest.mark.slow
def test_processing_time_timer_in_event_time_query_fails_loudly(spark, tmp_path):
    spec = _spec(TumblingEventTimeWindows.of(10), trigger=ContinuousProcessingTimeTrigger.of(5))
    scenario = Scenario("mixed", spec, [[("a", 1, 1)]])
    stream = FileStream(spark, scenario, tmp_path).start()
    try:
        with pytest.raises(WindowSpecError, match="processing-time timer was registered"):
            stream.feed()
    finally:
        stream.stop()


def test_result_schema_helper_types():
    # The combined output keeps result columns nullable (side-output rows leave them null).
    schema = combined_schema(StructType([StructField("n", LongType(), False)]))
    assert schema["n"].nullable and schema.fieldNames()[0] == "__tm_output"
