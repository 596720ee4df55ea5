"""A bounded run computes once: its results, each side output and its dropped count are
read from one run of the pipeline, and ``write_outputs`` writes them all from it.

The replay below (``out_of_orderness`` 0, windows of 10 ms)::

    arrival  0  1  2  3  4  5
    key      a  a  b  b  a  b
    ts      20 25 21 22  1  3     -> ts 1 (key a) and ts 3 (key b) are late:
                                     [0, 10) was cleaned at watermark 20

``LATE`` catches them in :func:`_pipeline`; without a tag (:func:`_dropping`) they are
dropped. Each call of the window function appends a line to a file, so the number of
lines counts how often the engine ran over the input.
"""

from __future__ import annotations

import os

import pytest

import tidemark as tm
from tidemark.spark.runtime.session import is_connect

pytestmark = pytest.mark.spark

ROWS = [("a", 20, 0), ("a", 25, 1), ("b", 21, 2), ("b", 22, 3), ("a", 1, 4), ("b", 3, 5)]
LATE = tm.OutputTag("late")
NOTE = tm.OutputTag("note", "k string, n long")


class CountingWindow(tm.ProcessWindowFunction):
    """Counts the window's elements; appends a line to ``path`` at each call and emits
    a note to the side output ``NOTE``."""

    def __init__(self, path: str):
        self.path = path

    def process(self, key, context, elements):
        n = len(list(elements))
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{key} {context.window().start}\n".encode())
        finally:
            os.close(fd)
        context.output(NOTE, (key, n))
        yield (key, context.window().start, n)


def _source(spark):
    df = spark.createDataFrame(ROWS, "k string, ts long, arrival long")
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(0)
    return tm.from_dataframe(df, timestamp="ts", order_by="arrival", watermark_strategy=strategy)


def _pipeline(spark, path, late=True):
    windowed = _source(spark).key_by("k").window(tm.TumblingEventTimeWindows.of(10))
    if late:
        windowed = windowed.side_output_late_data(LATE)
    return windowed.process(CountingWindow(str(path)), "k string, start long, n long")


def _calls(path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _stages_run(spark, group: str) -> int:
    """How many stages of the job group ran at least one task."""
    tracker = spark.sparkContext.statusTracker()
    run = 0
    for job in tracker.getJobIdsForGroup(group):
        for stage in tracker.getJobInfo(job).stageIds:
            info = tracker.getStageInfo(stage)
            run += info is not None and info.numCompletedTasks > 0
    return run


def test_results_side_outputs_and_dropped_count_come_from_one_run(spark, tmp_path):
    calls = tmp_path / "calls"
    result = _pipeline(spark, calls, late=False)
    assert sorted(tuple(r) for r in result.to_dataframe().collect()) == [
        ("a", 20, 2),
        ("b", 20, 2),
    ]
    assert sorted(tuple(r) for r in result.get_side_output(NOTE).to_dataframe().collect()) == [
        ("a", 2),
        ("b", 2),
    ]
    assert result.num_late_records_dropped() == 2
    assert _calls(calls) == 2  # one call per window: the engine ran once, not three times
    result.unpersist()


def test_reading_a_second_output_runs_no_python_stage_again(spark, tmp_path):
    """Job count (classic only: the status tracker): once the results were read, the
    side output is one stage over the kept run and the dropped count two (its sum), where
    each used to shuffle the input and run the engine again (2 and 3 stages)."""
    if is_connect(spark):
        pytest.skip("the status tracker needs a classic session")
    result = _pipeline(spark, tmp_path / "calls")
    context = spark.sparkContext
    try:
        context.setJobGroup("tm-first", "results")
        result.to_dataframe().collect()
        context.setJobGroup("tm-again", "a side output and the dropped count")
        result.get_side_output(LATE).to_dataframe().collect()
        result.num_late_records_dropped()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    assert _stages_run(spark, "tm-first") >= 2  # the shuffle by key, then the engine
    assert _stages_run(spark, "tm-again") == 3
    assert _calls(tmp_path / "calls") == 2
    result.unpersist()


def test_unpersist_releases_the_kept_run_and_outputs_still_read(spark, tmp_path):
    calls = tmp_path / "calls"
    result = _pipeline(spark, calls)
    assert len(result.to_dataframe().collect()) == 2
    assert result.combined_dataframe().storageLevel.useMemory
    result.unpersist()
    assert not result.combined_dataframe().storageLevel.useMemory
    assert sorted(r.ts for r in result.get_side_output(LATE).to_dataframe().collect()) == [1, 3]
    assert _calls(calls) == 4  # released: the second read ran the engine again


def test_write_outputs_on_a_bounded_source_writes_every_output_from_one_run(spark, tmp_path):
    calls = tmp_path / "calls"
    result = _pipeline(spark, calls, late=False)
    written: dict = {}

    def sink(name):
        def write(df, batch_id):
            written[name] = (batch_id, sorted(tuple(r) for r in df.collect()))

        return write

    outcome = result.write_outputs(
        {"main": sink("main"), NOTE: sink("note"), "__late_records_dropped": sink("dropped")}
    )
    assert outcome is None
    assert written == {
        "main": (0, [("a", 20, 2), ("b", 20, 2)]),
        "note": (0, [("a", 2), ("b", 2)]),
        "dropped": (0, [(2,)]),  # one row: the run's count
    }
    assert _calls(calls) == 2
    assert not result.combined_dataframe().storageLevel.useMemory  # released when done


def test_write_outputs_on_a_bounded_source_takes_a_checkpoint_it_does_not_need(spark, tmp_path):
    written = []
    result = _pipeline(spark, tmp_path / "calls")
    result.write_outputs(
        {LATE: lambda df, batch_id: written.extend(r.ts for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
    )
    assert sorted(written) == [1, 3]
    assert not (tmp_path / "checkpoint").exists()


def test_write_outputs_on_a_bounded_source_writes_an_earlier_windows_outputs(spark, tmp_path):
    first = _pipeline(spark, tmp_path / "calls")
    second = first.window_all(tm.TumblingEventTimeWindows.of(100)).sum("n")
    written: dict = {}
    second.write_outputs(
        {
            "main": lambda df, b: written.update(main=[tuple(r) for r in df.collect()]),
            first.get_side_output(LATE): lambda df, b: written.update(
                late=sorted(r.ts for r in df.collect())
            ),
            (first, "__late_records_dropped"): lambda df, b: written.update(
                dropped=[tuple(r) for r in df.collect()]
            ),
        }
    )
    assert written == {"main": [("a", 20, 4)], "late": [1, 3], "dropped": [(0,)]}


def test_write_outputs_refuses_a_trigger_on_a_bounded_source(spark, tmp_path):
    result = _pipeline(spark, tmp_path / "calls")
    with pytest.raises(tm.WindowSpecError) as error:
        result.write_outputs({"main": print}, trigger={"availableNow": True})
    assert str(error.value) == (
        "`trigger` applies to a streaming query; this pipeline reads a bounded DataFrame, "
        "which write_outputs runs once; got trigger={'availableNow': True}: drop it"
    )


@pytest.mark.parametrize(
    ("sinks", "message"),
    [
        ({}, "`sinks` must name at least one output, e.g. {'main': sink}"),
        (
            {"main": "out/"},
            "`sinks` must map output names to callables; not callable: ['main']",
        ),
    ],
    ids=["no sinks", "not callable"],
)
def test_write_outputs_on_a_bounded_source_checks_its_sinks(spark, tmp_path, sinks, message):
    result = _pipeline(spark, tmp_path / "calls")
    with pytest.raises(tm.WindowSpecError) as error:
        result.write_outputs(sinks)
    assert str(error.value) == message


def test_write_outputs_on_a_stream_needs_a_checkpoint(spark, tmp_path):
    stream = spark.readStream.format("rate").load()
    result = (
        tm.from_dataframe(stream, timestamp="timestamp")
        .key_by(lambda row: row.value % 2)
        .window(tm.TumblingEventTimeWindows.of(1000))
        .sum("value")
    )
    with pytest.raises(tm.WindowSpecError) as error:
        result.write_outputs({"main": print})
    assert str(error.value) == (
        "`checkpoint` is needed on a streaming DataFrame: the query keeps its state, "
        "timers and offsets there; got checkpoint=None: give a directory, e.g. "
        "checkpoint='out/_checkpoint'"
    )


class CountingReduce(tm.ReduceFunction):
    """Keeps the first element; appends a line to ``path`` at each call."""

    def __init__(self, path: str):
        self.path = path

    def reduce(self, a, b):
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, b"x\n")
        finally:
            os.close(fd)
        return a


def _batch_reduce(spark, path):
    df = spark.createDataFrame(ROWS, "k string, ts long, arrival long")
    windowed = tm.from_dataframe(df, timestamp="ts").key_by("k")
    return windowed.window(tm.TumblingEventTimeWindows.of(10)).reduce(CountingReduce(str(path)))


def test_a_batch_reduce_gives_only_results_and_keeps_nothing(spark, tmp_path):
    result = _batch_reduce(spark, tmp_path / "calls")
    assert len(result.to_dataframe().collect()) == 4
    assert not result.combined_dataframe().storageLevel.useMemory


def test_write_outputs_with_several_sinks_runs_a_batch_reduce_once(spark, tmp_path):
    alone = _batch_reduce(spark, tmp_path / "alone")
    alone.to_dataframe().collect()
    written: dict = {}
    _batch_reduce(spark, tmp_path / "calls").write_outputs(
        {
            "main": lambda df, b: written.update(main=len(df.collect())),
            "__late_records_dropped": lambda df, b: written.update(dropped=df.collect()[0][0]),
        }
    )
    assert written == {"main": 4, "dropped": 0}
    assert _calls(tmp_path / "calls") == _calls(tmp_path / "alone") == 2
