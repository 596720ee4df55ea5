"""Why did a window (not) fire, from a streaming query's checkpoint (issue 50;
docs/why-no-result.md).

Each query reads one file per micro-batch. The answer read from its checkpoint (the
recorded watermarks, the key's state, its elements of each micro-batch read again)
equals the engine's explanation fed the same micro-batches: every firing, the watermark
and each element's fate.

Query A (deltas layout; per-partition watermarks, out-of-orderness 1 s, 10 s windows,
late data to a side output; key ``a`` in partition 0, ``b`` in partition 1)::

    batch 0: a@101 b@102        -> W = min(99.999, 100.999)   = 99.999
    batch 1: a@112              -> W = min(110.999, 100.999)  = 100.999 (partition 1 holds it)
    batch 2: b@125 b@115 a@103  -> W = min(110.999, 123.999)  = 110.999 (partition 0 holds it)
    batch 3: a@105 (late)       -> [100, 110) fired under 110.999 first; a@105 to the side output

Then ``[110, 120)`` of a and of b wait: partition 0 holds the watermark, which partition
1 alone would have taken past 120 s; ``[120, 130)`` of b waits for input past 131 s.

Query B (row layout; one input, monotonous timestamps, ``CountTrigger.of(3)``, no
late-data tag)::

    batch 0: a@101 a@102        -> W = 101.999: [100, 110) counts 2 of 3
    batch 1: a@115              -> W = 114.999: [100, 110) cleaned without a result
    batch 2: a@105 (late) a@116 -> a@105 dropped; [110, 120) counts 2 of 3
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row
from streaming_scenarios import keyed_file_stream

import tidemark as tm
from tidemark.cli import main
from tidemark.errors import ExplainError, WindowSpecError
from tidemark.explain import Element, MicroBatch, PartitionState, Watermark, explain_events
from tidemark.spark import explain_checkpoint, explain_query
from tidemark.spark.streaming.driver.batch_records import (
    RECORDS_DIR,
    BatchRecorder,
    WatermarkSetup,
    input_observation,
    read_batch_records,
)
from tidemark.spark.streaming.driver.state_reader import state_batches
from tidemark.time import LONG_MIN

pytestmark = pytest.mark.spark

S = 1000
LATE = tm.OutputTag("late")

A_BATCHES = [
    [("a", 101 * S, 1), ("b", 102 * S, 2)],
    [("a", 112 * S, 1)],
    [("b", 125 * S, 1), ("b", 115 * S, 3), ("a", 103 * S, 5)],
    [("a", 105 * S, 7)],
]
A_WATERMARKS = [99_999, 100_999, 110_999, 110_999]  # after each micro-batch

B_BATCHES = [
    [("a", 101 * S, 1), ("a", 102 * S, 2)],
    [("a", 115 * S, 1)],
    [("a", 105 * S, 5), ("a", 116 * S, 1)],
]
B_WATERMARKS = [101_999, 114_999, 115_999]


def _pipeline_a(source: Any) -> Any:
    source = source.withColumn("p", (source.k == "b").cast("int"))
    return (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(1000),
            partition_column="p",
            partitions=2,
        )
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(10 * S))
        .side_output_late_data(LATE)
        .sum("n")
    )


def _pipeline_b(source: Any) -> Any:
    return (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(10 * S))
        .trigger(tm.CountTrigger.of(3))
        .sum("n")
    )


def _records_through(checkpoint: str, batch: int) -> None:
    """Wait for the listener to record ``batch`` (it runs after the micro-batch)."""
    directory = Path(checkpoint) / RECORDS_DIR
    deadline = time.monotonic() + 60
    while not (directory / str(batch)).exists():
        assert time.monotonic() < deadline, f"no record of micro-batch {batch}"
        time.sleep(0.2)


def _engine(result: Any, key: str, batches: list, watermarks: list, last_batch: int, rows):
    """The engine's explanation of ``key`` fed the same micro-batches: batch ``n`` runs
    under the watermark after ``n - 1``, then its elements; then the no-data batches
    up to ``last_batch``."""
    events: list[Any] = []
    for number in range(last_batch + 1):
        events.append(MicroBatch(number))
        if number > 0 and watermarks[min(number, len(watermarks)) - 1] > LONG_MIN:
            events.append(Watermark(watermarks[min(number, len(watermarks)) - 1]))
        if number < len(batches):
            events += [
                Element(rows(*row), row[1], _label(rows(*row)))
                for row in batches[number]
                if row[0] == key
            ]
    return explain_events(result._plan.spec, key, events, mode="streaming")


def _label(row: Any) -> str:
    """The answer's name of an element: its columns but the key and the event time."""
    return ", ".join(f"{c}={v!r}" for c, v in row.asDict().items() if c not in ("k", "ts"))


def _row_a(k: str, ts: int, n: int) -> Any:
    return Row(k=k, ts=ts, n=n, p=int(k == "b"))


def _row_b(k: str, ts: int, n: int) -> Any:
    return Row(k=k, ts=ts, n=n)


def _same(x: Any, engine: Any) -> None:
    assert x.firings == engine.firings
    assert x.elements == engine.elements
    assert [(w.window, w.status, w.elements) for w in x.windows] == [
        (w.window, w.status, w.elements) for w in engine.windows
    ]
    assert x.watermark == engine.watermark


@pytest.fixture(scope="module")
def query_a(spark, tmp_path_factory):
    """Query A, answered while running, then stopped: (result, checkpoint, answers)."""
    root = tmp_path_factory.mktemp("explain-a")
    result = _pipeline_a(keyed_file_stream(spark, root / "in", A_BATCHES))
    checkpoint = str(root / "checkpoint")
    query = result.write_outputs(
        {"main": lambda df, _: df.count(), LATE: lambda df, _: df.count()},
        checkpoint=checkpoint,
        trigger={"processingTime": "100 milliseconds"},
    )
    try:
        query.processAllAvailable()
        last = len(A_BATCHES) - 1
        _records_through(checkpoint, last)
        running = {k: explain_checkpoint(spark, checkpoint, k, result) for k in ("a", "b")}
        assert query.isActive
    finally:
        query.stop()
    return result, checkpoint, running


@pytest.fixture(scope="module")
def query_b(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("explain-b")
    result = _pipeline_b(keyed_file_stream(spark, root / "in", B_BATCHES))
    checkpoint = str(root / "checkpoint")
    spark.conf.set("spark.tidemark.streaming.stateLayout", "row")
    try:
        query = result.write_outputs(
            {"main": lambda df, _: df.count()},
            checkpoint=checkpoint,
            trigger={"availableNow": True},
        )
        query.awaitTermination(600)
    finally:
        spark.conf.unset("spark.tidemark.streaming.stateLayout")
    last = state_batches(spark, checkpoint)[1]  # a no-data batch after the last file
    _records_through(checkpoint, last)
    return result, checkpoint, last


def test_each_micro_batch_records_the_watermark_and_each_partitions_share(spark, query_a):
    _, checkpoint, _ = query_a
    records = read_batch_records(spark, checkpoint)
    assert [r.batch for r in records] == [0, 1, 2, 3]
    assert [r.ended_ms for r in records] == A_WATERMARKS
    assert [r.ran_under_ms for r in records] == [LONG_MIN, *A_WATERMARKS[:-1]]
    # the engine's watermark, as tidemark's own figures report it
    assert [r.figures["watermark_ms"] for r in records[1:]] == A_WATERMARKS[:-1]
    assert [[i.max_event_time_ms for i in r.inputs] for r in records] == [
        [101 * S, 102 * S],
        [112 * S, 102 * S],
        [112 * S, 125 * S],
        [112 * S, 125 * S],
    ]
    assert [r.holding().partition for r in records] == [0, 1, 0, 0]
    assert records[3].inputs[1].last_batch == 2 and records[3].inputs[0].last_batch == 3
    files = sorted(p.name for p in (Path(checkpoint) / RECORDS_DIR).iterdir())
    assert files == ["0", "1", "2", "3"]  # no temporary file left behind
    assert json.loads((Path(checkpoint) / RECORDS_DIR / "3").read_text())["partition_column"] == "p"


def test_a_running_and_a_stopped_query_answer_as_the_engine_fed_the_same_batches(spark, query_a):
    result, checkpoint, running = query_a
    for key in ("a", "b"):
        engine = _engine(result, key, A_BATCHES, A_WATERMARKS, 3, _row_a)
        stopped = explain_checkpoint(spark, checkpoint, key, result)
        _same(running[key], engine)
        _same(stopped, engine)
        assert stopped.history_from == 0 and stopped.batch_id == 3


def test_a_late_element_went_to_the_side_output_after_its_window_fired(spark, query_a):
    result, checkpoint, _ = query_a
    x = explain_checkpoint(spark, checkpoint, "a", result, timestamp=105 * S)
    (late,) = x.elements_at(105 * S)
    assert (late.fate, late.batch, late.watermark) == ("late_side_output", 3, 110_999)
    fired = x.window(100 * S, 110 * S)
    assert fired.status == "fired"
    (firing,) = [x.firings[i] for i in fired.firings]
    assert (firing.batch, firing.watermark, firing.timing) == (3, 110_999, "on_time")
    assert "LATE_SIDE_OUTPUT" in x.text()


def test_the_partition_holding_the_watermark_is_named(spark, query_a):
    result, checkpoint, _ = query_a
    x = explain_checkpoint(spark, checkpoint, "b", result, window=(110 * S, 120 * S))
    wait = x.window(110 * S, 120 * S).waiting
    assert wait.kind == "event_time_timer" and wait.timer == 119_999
    assert x.window(120 * S, 130 * S).waiting.kind == "input_not_ended"
    assert x.holder == PartitionState(0, 112 * S, 110_999, False, 2)  # as batch 3 ran
    assert "Partition 0 sets the watermark at 110999" in x.text()


def test_at_an_earlier_batch_the_other_partition_held_it(spark, query_a):
    result, checkpoint, _ = query_a
    x = explain_checkpoint(spark, checkpoint, "a", result, batch_id=2)
    assert x.watermark == 100_999 and x.holder.partition == 1  # as batch 2 ran
    assert x.next_watermark == 110_999 and x.partitions_after[0].watermark == 110_999
    assert [w.status for w in x.windows] == ["open", "open"]


def test_without_the_pipeline_the_state_says_what_each_window_waits_for(spark, query_a):
    _, checkpoint, _ = query_a
    x = explain_checkpoint(spark, checkpoint, "a")
    (open_window,) = x.windows
    assert open_window.window == (110 * S, 120 * S)
    assert open_window.waiting.kind == "event_time_timer"
    assert open_window.waiting.timer == 119_999 and x.holder.partition == 0
    assert "without the pipeline" in x.text()


def test_the_query_view_names_the_minimum_and_the_open_windows(spark, query_a):
    _, checkpoint, _ = query_a
    view = explain_query(spark, checkpoint)
    assert (view.batch_id, view.watermark, view.next_watermark) == (3, 110_999, 110_999)
    assert view.holder.partition == 0 and view.idleness is False
    assert (view.keys, view.open_windows, view.oldest) == (2, 3, (110 * S, 120 * S))
    assert [(w.key, w.open_windows, w.oldest) for w in view.waiting] == [
        ("a", 1, (110 * S, 120 * S)),
        ("b", 2, (110 * S, 120 * S)),
    ]
    assert "<- the minimum: it holds the watermark" in view.text()
    assert json.dumps(view.to_dict())


def test_the_last_windows_of_a_finished_stream_wait_for_more_input(spark, query_b):
    result, checkpoint, last = query_b
    x = explain_checkpoint(spark, checkpoint, "a", result)
    _same(x, _engine(result, "a", B_BATCHES, B_WATERMARKS, last, _row_b))


def test_a_count_trigger_at_k_of_n_and_a_late_element_dropped(spark, query_b):
    result, checkpoint, _ = query_b
    x = explain_checkpoint(spark, checkpoint, "a", result)
    wait = x.window(110 * S, 120 * S).waiting
    assert (wait.kind, wait.count, wait.count_of) == ("count", 2, 3)
    (late,) = x.elements_at(105 * S)
    assert late.fate == "late_dropped"
    assert x.window(100 * S, 110 * S).status == "purged"
    state_only = explain_checkpoint(spark, checkpoint, "a")
    assert state_only.window(110 * S, 120 * S).waiting.kind == "count"


def test_a_pipeline_other_than_the_checkpoints_is_refused(spark, query_a, query_b):
    result_b = query_b[0]
    with pytest.raises(WindowSpecError, match="`pipeline` must be the window the checkpoint"):
        explain_checkpoint(spark, query_a[1], "a", result_b)


def test_refusals_name_the_parameter(spark, query_a, tmp_path):
    result, checkpoint, _ = query_a
    with pytest.raises(ExplainError, match="`batch_id` must be a micro-batch"):
        explain_checkpoint(spark, checkpoint, "a", result, batch_id=99)
    with pytest.raises(WindowSpecError, match="`checkpoint` must be the checkpoint of a query"):
        explain_checkpoint(spark, str(tmp_path), "a")
    with pytest.raises(ExplainError, match="`key` must be a key the query holds state"):
        explain_checkpoint(spark, checkpoint, "nobody")


def test_the_command_line_answers_from_a_checkpoint(query_a, capsys):
    _, checkpoint, _ = query_a
    assert main(["explain", "--checkpoint", checkpoint]) == 0
    assert "<- the minimum: it holds the watermark" in capsys.readouterr().out
    assert main(["explain", "--checkpoint", checkpoint, "--key", "b"]) == 0
    assert "Partition 0 holds the watermark back" in capsys.readouterr().out
    assert main(["explain", "--checkpoint", checkpoint, "--batch", "99"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tidemark explain: error: `batch_id` must be") and "java" not in err


def test_the_picture_marks_the_window_and_the_holding_partition(spark, query_a, tmp_path):
    result, checkpoint, _ = query_a
    x = explain_checkpoint(spark, checkpoint, "b", result, window=(110 * S, 120 * S))
    assert x.picture(tmp_path / "why.png").stat().st_size > 0
    with pytest.raises(ExplainError, match="`picture` draws the key's replayed events"):
        explain_checkpoint(spark, checkpoint, "b").picture(tmp_path / "state.png")


class _Progress:
    """What the recorder reads of a micro-batch's progress."""

    def __init__(self, batch: int, run: str, maxima: list):
        self.batchId, self.runId = batch, run
        self.observedMetrics = {
            input_observation(i) + "a1b2": Row(max_ts=m) for i, m in enumerate(maxima)
        }
        self.observedMetrics["tidemark"] = Row(num_records_in=1)


def test_records_keep_the_last_batches_and_a_restart_counts_each_input_again(spark, tmp_path):
    setup = WatermarkSetup(1000, "p", (0, 1))
    checkpoint = str(tmp_path / "checkpoint")
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", "2")
    try:
        first = BatchRecorder(spark, checkpoint, setup)
        for batch, maxima in enumerate([[10_000, 20_000], [30_000, None], [None, 40_000]]):
            first.on_progress(_Progress(batch, "run-1", maxima))
        # a restart: Spark counts each input again from its first row; the watermark holds
        second = BatchRecorder(spark, checkpoint, setup)
        second.on_progress(_Progress(3, "run-2", [50_000, None]))
    finally:
        spark.conf.unset("spark.sql.streaming.minBatchesToRetain")
    records = read_batch_records(spark, checkpoint)
    assert [r.batch for r in records] == [2, 3]  # the last two, as Spark keeps its logs
    assert sorted(p.name for p in (Path(checkpoint) / RECORDS_DIR).iterdir()) == ["2", "3"]
    assert [r.ended_ms for r in records] == [28_999, 28_999]
    restarted = records[1]
    assert [i.max_event_time_ms for i in restarted.inputs] == [50_000, None]
    assert restarted.ran_under_ms == 28_999 and restarted.run == "run-2"
    assert restarted.holding().partition == 1  # none seen since the restart


@pytest.mark.slow  # eight small streaming queries and a reader process beside two
def test_the_cost_benchmark_runs(tmp_path):
    """``benchmarks/explain_cost.py`` (what asking costs a running query, figures in
    ``benchmarks/README.md``) keeps working, at two micro-batches a query."""
    script = Path(__file__).parents[3] / "benchmarks" / "explain_cost.py"
    for mode, label in (("record", "on:"), ("reader", "reader:")):
        env = {**os.environ, "EXPLAIN_COST_DIR": str(tmp_path / mode)}
        done = subprocess.run(
            [sys.executable, str(script), mode, "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert label in done.stdout and "median" in done.stdout, done.stdout
