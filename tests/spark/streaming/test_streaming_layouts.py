"""State layouts in a real query: the deltas layout equals the engine, is recorded beside
the checkpoint at the first start and kept by restarts; another layout on an existing
checkpoint (or an old checkpoint, the row layout) is refused before the query starts.
A ``window_all`` takes the row layout unless asked. (``make test`` runs every streaming
test in the default layouts, ``make test-row`` through the row layout.)"""

from __future__ import annotations

import dataclasses

import pytest
from streaming_scenarios import (
    END,
    LATENESS,
    PANES,
    FileStream,
    Scenario,
    _spec,
    engine_reference,
    summarize,
)

import tidemark as tm
from tidemark.errors import SessionSetupError, WindowSpecError
from tidemark.spark.runtime.confs import STREAMING_PACK_INPUT as PACK_INPUT
from tidemark.spark.runtime.preflight import ROCKSDB_PROVIDER, STATE_STORE_PROVIDER
from tidemark.spark.streaming import END_OF_INPUT_MS
from tidemark.spark.streaming.driver.checkpoint import (
    LAYOUT_CONF,
    check_checkpoint_groups,
    read_records,
    state_layout,
)
from tidemark.spark.streaming.driver.state_reader import read_group_rows
from tidemark.spark.streaming.worker.deltas import STATE_SERVER_VALUE_BYTES, value_bytes_limit
from tidemark.spark.streaming.worker.state import load_keys

pytestmark = pytest.mark.spark

COMPACT_CONF = "spark.tidemark.streaming.stateCompactBytes"


@pytest.fixture
def asking(spark):
    """Set the session's layout (and compaction threshold) for a test, then restore."""
    before = {name: spark.conf.get(name, None) for name in (LAYOUT_CONF, COMPACT_CONF)}

    def ask(layout: str | None, compact_bytes: int | None = None) -> None:
        for name, value in ((LAYOUT_CONF, layout), (COMPACT_CONF, compact_bytes)):
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, str(value))

    yield ask
    for name, value in before.items():
        if value is None:
            spark.conf.unset(name)
        else:
            spark.conf.set(name, value)


def _keys(spark, checkpoint: str) -> set:
    return {k for row in read_group_rows(spark, checkpoint) for k in load_keys(row.keys)}


@pytest.mark.parametrize("scenario", [LATENESS, PANES], ids=["lateness", "panes"])
def test_the_deltas_layout_equals_the_engine_and_restarts_in_it(spark, tmp_path, asking, scenario):
    """Two key groups, compaction at 200 bytes; stopped after two batches and restarted:
    the checkpoint's layout is kept."""
    asking("deltas", 200)
    scenario = dataclasses.replace(scenario, max_parallelism=2)
    first = FileStream(spark, scenario, tmp_path).start()
    try:
        first.feed(2)
    finally:
        first.stop()
    assert read_records(spark, first.checkpoint).layout == "deltas"
    assert _keys(spark, first.checkpoint) == {"a", "b"}
    operators = {
        op["operatorName"] for p in first.query.recentProgress for op in p["stateOperators"]
    }
    assert operators == {"transformWithStateInPandasExec"}
    asking(None)  # a window built with the checkpoint (as write_outputs of a pipeline) keeps it
    assert state_layout(spark, read_records(spark, first.checkpoint)).name == "deltas"
    asking("deltas", 200)  # FileStream builds its window without the checkpoint
    second = first.restarted()
    try:
        second.feed()
    finally:
        second.stop()
    assert summarize(second.outputs) == engine_reference(scenario)
    assert read_group_rows(spark, second.checkpoint) == []  # every key gone at the end


# one key group, 25,000 new keys a call, none fired before the end: each call's delta
# and base are MBs: before the work-around, PySpark 4.0.0 failed it in 4 runs of 4
LARGE_GROUP = Scenario(
    "one_large_key_group",
    _spec(tm.TumblingEventTimeWindows.of(1_000)),
    [[(f"key-{b}-{i}", i, b * 10 + i % 10) for i in range(25_000)] for b in range(2)] + [[END]],
    max_parallelism=1,
)


@pytest.mark.skipif(value_bytes_limit() is None, reason="PySpark 4.0's state server only")
def test_a_group_over_pyspark_40s_state_value_limit_equals_the_engine(spark, tmp_path, asking):
    """On PySpark 4.0, whose state server may read a large value in part (SPARK-53870),
    the delta goes as several versions and the base in chunks, within its limit, and the
    results are the engine's. (Elsewhere a value is written whole, as every test does;
    this one takes ~80 s.)"""
    asking("deltas", 200)
    stream = FileStream(spark, LARGE_GROUP, tmp_path).start()
    try:
        stream.feed(2)
        rows = read_group_rows(spark, stream.checkpoint)
        assert len(rows) == 1 and len(load_keys(rows[0].keys)) == 50_000
        assert len(rows[0].keys) > 32 * STATE_SERVER_VALUE_BYTES
        stream.feed()
    finally:
        stream.stop()
    assert summarize(stream.outputs) == engine_reference(LARGE_GROUP)


def test_another_layout_on_a_checkpoint_is_refused_before_the_query_starts(spark, tmp_path, asking):
    asking("deltas")
    first = FileStream(spark, LATENESS, tmp_path).start()
    try:
        first.feed(1)
    finally:
        first.stop()
    asking("row")
    second = FileStream(spark, LATENESS, tmp_path)
    with pytest.raises(WindowSpecError) as error:
        second.start()
    message = str(error.value)
    assert "its state is in the 'deltas' layout" in message
    assert "Set spark.tidemark.streaming.stateLayout='deltas' (or unset it" in message
    assert spark.streams.active == []


def test_a_checkpoint_without_a_layout_record_is_in_the_row_layout(spark, tmp_path, asking):
    """A checkpoint of the release before records its key groups, not its layout."""
    checkpoint = str(tmp_path / "checkpoint")
    assert read_records(spark, checkpoint).layout is None
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 4)
    assert read_records(spark, checkpoint).layout == "row"
    asking(None)
    assert state_layout(spark, read_records(spark, checkpoint)).name == "row"
    asking("deltas")
    with pytest.raises(WindowSpecError, match="its state is in the 'row' layout"):
        state_layout(spark, read_records(spark, checkpoint))


def test_a_layout_the_session_names_wrongly_is_refused(spark, asking):
    asking("delta")
    with pytest.raises(WindowSpecError, match=r"stateLayout` must be one of \['row', 'deltas'\]"):
        state_layout(spark, None)
    asking("deltas")
    spark.conf.set("spark.tidemark.streaming.stateCacheKeys", "many")
    try:
        with pytest.raises(WindowSpecError, match="stateCacheKeys` must be a positive whole"):
            state_layout(spark, None)
    finally:
        spark.conf.unset("spark.tidemark.streaming.stateCacheKeys")


def _user_query(spark, directory):
    source = spark.readStream.schema("k string, n long, ts long").json(str(directory))
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)
    stream = tm.from_dataframe(source, timestamp="ts", watermark_strategy=strategy)
    return stream.key_by("k").window(tm.TumblingEventTimeWindows.of(50)).sum("n")


@pytest.mark.parametrize("layout", [None, "row"])
def test_a_query_the_user_starts_needs_the_rocksdb_store_in_the_deltas_layout(
    spark, tmp_path, asking, layout
):
    """Spark's default (HDFS-backed) store refuses transformWithStateInPandas only once
    the query runs, in a Java trace; to_dataframe() refuses it with the setting to make.
    The row layout (applyInPandasWithState) runs on any store."""
    hdfs = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    before = spark.conf.get(STATE_STORE_PROVIDER, None)
    spark.conf.set(STATE_STORE_PROVIDER, hdfs)
    try:
        asking(layout)
        if layout is None:  # the default: deltas, but the row layout for a window_all
            with pytest.raises(SessionSetupError, match=f"deltas.*{ROCKSDB_PROVIDER}"):
                _user_query(spark, tmp_path).to_dataframe()
            assert _all_query(spark, tmp_path).to_dataframe().isStreaming
        else:
            assert _user_query(spark, tmp_path).to_dataframe().isStreaming
    finally:
        spark.conf.set(STATE_STORE_PROVIDER, before or ROCKSDB_PROVIDER)


@pytest.mark.parametrize("first, then", [("true", "false"), ("false", "true")])
def test_a_restart_may_switch_the_packing_of_the_rows(spark, tmp_path, asking, first, then):
    """Packing only carries the rows to the operator: the state is the same either way."""
    asking("deltas", 200)
    scenario = dataclasses.replace(LATENESS, max_parallelism=2)
    try:
        spark.conf.set(PACK_INPUT.name, first)
        before = FileStream(spark, scenario, tmp_path).start()
        try:
            before.feed(2)
        finally:
            before.stop()
        spark.conf.set(PACK_INPUT.name, then)
        after = before.restarted()
        try:
            after.feed()
        finally:
            after.stop()
    finally:
        spark.conf.unset(PACK_INPUT.name)
    assert summarize(after.outputs) == engine_reference(scenario)


def _all_query(spark, directory):
    """A ``window_all``: the highest ``n`` per 50 ms window."""
    source = spark.readStream.schema("k string, n long, ts long").json(str(directory))
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(10)
    stream = tm.from_dataframe(source, timestamp="ts", watermark_strategy=strategy)
    return stream.window_all(tm.TumblingEventTimeWindows.of(50)).max("n")


def _write_json(directory, name: str, rows: list[tuple[str, int, int]]) -> None:
    directory.mkdir(exist_ok=True)
    lines = (f'{{"k": "{k}", "n": {n}, "ts": {ts}}}' for k, n, ts in rows)
    (directory / name).write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("asked", [None, "deltas"])
def test_a_window_all_takes_the_row_layout_unless_asked(spark, tmp_path, asking, asked):
    """A window_all's state is one key, written whole at every call in either layout:
    a new query takes the row layout, whose operator needs no Python process on the
    driver at its start and runs on any state store; asked, the deltas layout serves it
    too. Either way a restart keeps the layout and the results are BATCH's."""
    files = tmp_path / "in"
    _write_json(files, "1.json", [("a", 3, 1010), ("b", 7, 1020), ("a", 5, 1060)])
    _write_json(files, "2.json", [("b", 2, 1070), ("a", 9, 1130), ("b", 1, 1040)])  # late
    outputs: list[tuple] = []

    def run() -> list[str]:
        query = _all_query(spark, files).write_outputs(
            {"main": lambda df, b: outputs.extend(tuple(r) for r in df.collect())},
            checkpoint=str(tmp_path / "checkpoint"),
            trigger={"availableNow": True},
        )
        query.awaitTermination(300)
        return [op["operatorName"] for p in query.recentProgress for op in p["stateOperators"]]

    asking(asked)
    first = run()
    layout = asked or "row"
    assert read_records(spark, str(tmp_path / "checkpoint")).layout == layout
    asking(None)  # a restart keeps the recorded layout
    _write_json(files, "3.json", [("a", 4, 1140)])
    _write_json(files, "4.json", [("c", 0, END_OF_INPUT_MS)])  # ends the input
    operators = set(first + run())
    tws = "transformWithStateInPandasExec"
    assert operators == ({tws} if layout == "deltas" else {"applyInPandasWithState"})
    assert read_records(spark, str(tmp_path / "checkpoint")).layout == layout
    paths = [str(files / f"{n}.json") for n in (1, 2, 3)]
    bounded = spark.read.schema("k string, n long, ts long").json(paths)
    batch = tm.from_dataframe(bounded, timestamp="ts").window_all(
        tm.TumblingEventTimeWindows.of(50)
    )
    assert sorted(outputs) == sorted(tuple(r) for r in batch.max("n").to_dataframe().collect())
