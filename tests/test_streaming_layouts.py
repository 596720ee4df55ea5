"""State layouts in a real query: the deltas layout equals the engine, is recorded beside
the checkpoint at the first start and kept by restarts; another layout on an existing
checkpoint (or an old checkpoint, the row layout) is refused before the query starts.
(``make test-deltas`` runs every streaming test through the deltas layout.)"""

from __future__ import annotations

import dataclasses

import pytest
from streaming_scenarios import LATENESS, PANES, FileStream, engine_reference, summarize

import tidemark as tm
from tidemark.errors import SessionSetupError, WindowSpecError
from tidemark.spark.confs import STREAMING_PACK_INPUT as PACK_INPUT
from tidemark.spark.preflight import ROCKSDB_PROVIDER, STATE_STORE_PROVIDER
from tidemark.spark.streaming.driver.checkpoint import (
    LAYOUT_CONF,
    check_checkpoint_groups,
    state_layout,
    stored_layout,
)
from tidemark.spark.streaming.driver.state_reader import read_group_rows
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
    assert stored_layout(spark, first.checkpoint) == "deltas"
    assert _keys(spark, first.checkpoint) == {"a", "b"}
    operators = {
        op["operatorName"] for p in first.query.recentProgress for op in p["stateOperators"]
    }
    assert operators == {"transformWithStateInPandasExec"}
    asking(None)  # a window built with the checkpoint (as write_outputs of a pipeline) keeps it
    assert state_layout(spark, first.checkpoint).name == "deltas"
    asking("deltas", 200)  # FileStream builds its window without the checkpoint
    second = first.restarted()
    try:
        second.feed()
    finally:
        second.stop()
    assert summarize(second.outputs) == engine_reference(scenario)
    assert read_group_rows(spark, second.checkpoint) == []  # every key gone at the end


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
    assert stored_layout(spark, checkpoint) is None
    check_checkpoint_groups(spark, checkpoint, 4)
    assert stored_layout(spark, checkpoint) == "row"
    asking(None)
    assert state_layout(spark, checkpoint).name == "row"
    asking("deltas")
    with pytest.raises(WindowSpecError, match="its state is in the 'row' layout"):
        state_layout(spark, checkpoint)


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
        if layout is None:  # the default: deltas
            with pytest.raises(SessionSetupError, match=f"deltas.*{ROCKSDB_PROVIDER}"):
                _user_query(spark, tmp_path).to_dataframe()
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
