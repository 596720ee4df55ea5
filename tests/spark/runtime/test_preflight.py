"""Checks of the user's session: workers that cannot import tidemark, the state store."""

from __future__ import annotations

import pytest

from tidemark.errors import SessionSetupError
from tidemark.spark.runtime.preflight import (
    ROCKSDB_PROVIDER,
    STATE_STORE_PROVIDER,
    ensure_workers_import_tidemark,
    streaming_settings,
)

pytestmark = pytest.mark.spark

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def test_workers_that_cannot_import_get_one_clear_message(spark):
    with pytest.raises(SessionSetupError) as info:
        ensure_workers_import_tidemark(spark, module="tidemark_not_installed_anywhere")
    message = str(info.value)
    assert "Spark's Python workers cannot import 'tidemark_not_installed_anywhere'" in message
    assert "ModuleNotFoundError" in message
    assert "--py-files" in message and "addArtifacts" in message and "wheel" in message
    assert "make dist" in message and "tidemark.ship_to_executors(spark)" in message


def test_workers_without_a_dependency_are_told_which_python_to_use(spark):
    # A worker Python that lacks pyarrow cannot run an Arrow job, so the check itself is
    # a plain UDF; what is missing is named, with the setting that picks the Python.
    with pytest.raises(SessionSetupError) as info:
        ensure_workers_import_tidemark(spark, dependencies=("no_such_dependency_here",))
    message = str(info.value)
    assert "cannot import 'no_such_dependency_here'" in message
    assert "PYSPARK_PYTHON" in message and "spark.pyspark.python" in message


def test_workers_with_a_version_outside_the_pin_are_told_theirs_and_the_pin(spark):
    import pandas

    with pytest.raises(SessionSetupError) as info:
        ensure_workers_import_tidemark(spark, dependencies=("pyarrow>=15", "pandas>=99,<100"))
    message = str(info.value)
    assert f"Spark's Python workers have pandas {pandas.__version__} (tidemark" in message
    assert "needs pandas<100,>=99)" in message or "needs pandas>=99,<100)" in message
    assert "pyarrow" not in message.split("(worker Python")[0]
    assert "pip install 'pandas" in message


def test_a_streaming_query_checks_its_workers_before_it_starts(spark, tmp_path, monkeypatch):
    """write_outputs checks the workers before Spark plans the query, whose planner runs
    the window's processor in a process of the workers' Python."""
    import tidemark as tm
    from tidemark.spark import execution

    def refuse(session):
        raise SessionSetupError("Spark's Python workers cannot import 'tidemark'")

    monkeypatch.setattr(execution, "ensure_workers_import_tidemark", refuse)
    (tmp_path / "in").mkdir()
    source = spark.readStream.schema("k string, ts long").json(str(tmp_path / "in"))
    result = (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(0),
        )
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(1_000))
        .sum("ts")
    )
    with pytest.raises(SessionSetupError, match="cannot import 'tidemark'"):
        result.write_outputs({"main": lambda df, b: None}, checkpoint=str(tmp_path / "ck"))
    assert spark.streams.active == []


def test_workers_that_import_tidemark_pass(spark):
    ensure_workers_import_tidemark(spark)
    ensure_workers_import_tidemark(spark)  # cached: no second job


def test_streaming_settings_set_rocksdb_for_the_start_only(spark):
    before = spark.conf.get(STATE_STORE_PROVIDER)
    spark.conf.set(STATE_STORE_PROVIDER, HDFS_PROVIDER)
    try:
        with streaming_settings(spark):
            assert spark.conf.get(STATE_STORE_PROVIDER) == ROCKSDB_PROVIDER
        assert spark.conf.get(STATE_STORE_PROVIDER) == HDFS_PROVIDER
    finally:
        spark.conf.set(STATE_STORE_PROVIDER, before)


class _RefusingConf:
    def get(self, key, default=None):
        return HDFS_PROVIDER

    def set(self, key, value):
        raise RuntimeError("[CANNOT_MODIFY_CONFIG] Cannot modify the value of a config")


class _Session:
    conf = _RefusingConf()


def test_streaming_settings_fail_at_once_naming_setting_and_value():
    with pytest.raises(SessionSetupError) as info, streaming_settings(_Session()):
        pytest.fail("the query must not start")
    message = str(info.value)
    assert f"{STATE_STORE_PROVIDER}={ROCKSDB_PROVIDER}" in message
    assert HDFS_PROVIDER in message and "CANNOT_MODIFY_CONFIG" in message
