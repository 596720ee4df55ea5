"""The table sinks' one rule and the exactly-once Parquet table.

A table belongs to one output of one query: ``write_outputs`` refuses two outputs naming
one table, and each table sink claims its table (an owner record, created atomically)
before the query starts, so that a second query on the table is refused whether it
starts later or at the same time. A batch written again replaces its own rows, even
with none, and a table of empty batches reads back. (Delta and Iceberg need their jars
and the Kafka sink a broker: ``tests/kafka``.)
"""

from __future__ import annotations

import json
import os
import threading
from types import SimpleNamespace

import pytest

import tidemark as tm
from tidemark.errors import SessionSetupError, WindowSpecError
from tidemark.spark.io.sinks import (
    check_delta,
    check_iceberg,
    delta_table,
    iceberg_table,
    kafka_sink,
    parquet_table,
)
from tidemark.spark.streaming import END_OF_INPUT_MS
from tidemark.spark.streaming.driver.tables import OWNER_RECORD, owner_of

pytestmark = pytest.mark.spark

SCHEMA = "k string, v long"
LATE = tm.OutputTag("late")


def _claimed(spark, path, checkpoint, output="main"):
    table = parquet_table(str(path))
    frame = spark.createDataFrame([], SCHEMA)
    table.claim(spark, owner_of(spark, str(checkpoint), output), frame.schema)
    return table


def _rows(spark, path):
    return sorted(tuple(r) for r in spark.read.parquet(str(path)).collect())


def test_a_batch_written_again_replaces_its_rows(spark, tmp_path):
    table = _claimed(spark, tmp_path / "t", tmp_path / "ck")
    table(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    table(spark.createDataFrame([("b", 2), ("c", 3)], SCHEMA), 1)
    again = _claimed(spark, tmp_path / "t", tmp_path / "ck")  # a restarted driver
    again(spark.createDataFrame([("b", 2), ("c", 3)], SCHEMA), 1)
    assert _rows(spark, tmp_path / "t") == [("a", 1, 0), ("b", 2, 1), ("c", 3, 1)]
    assert again.batches(spark) == [0, 1]


def test_a_batch_written_again_with_no_rows_replaces_its_rows(spark, tmp_path):
    table = _claimed(spark, tmp_path / "t", tmp_path / "ck")
    table(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    table(spark.createDataFrame([("b", 2)], SCHEMA), 1)
    again = _claimed(spark, tmp_path / "t", tmp_path / "ck")
    again(spark.createDataFrame([], SCHEMA), 1)  # the replay found nothing to emit
    assert _rows(spark, tmp_path / "t") == [("a", 1, 0)]


def test_a_table_of_empty_batches_reads_back(spark, tmp_path):
    table = _claimed(spark, tmp_path / "t", tmp_path / "ck")
    table(spark.createDataFrame([], SCHEMA), 0)
    read = spark.read.parquet(str(tmp_path / "t"))
    assert read.columns == ["k", "v", "batch_id"] and read.count() == 0


def test_a_table_with_later_batches_is_refused(spark, tmp_path):
    """A table written before tables had owner records, by another checkpoint."""
    first = _claimed(spark, tmp_path / "t", tmp_path / "ck")
    for batch in range(3):
        first(spark.createDataFrame([("a", batch)], SCHEMA), batch)
    _remove_tree(tmp_path / "t" / OWNER_RECORD)
    other = _claimed(spark, tmp_path / "t", tmp_path / "ck2")
    with pytest.raises(WindowSpecError, match="holds batch 2, later than batch 0 this query"):
        other(spark.createDataFrame([("z", 9)], SCHEMA), 0)
    assert _rows(spark, tmp_path / "t") == [("a", 0, 0), ("a", 1, 1), ("a", 2, 2)]


def test_another_query_or_output_is_refused_and_a_restart_accepted(spark, tmp_path):
    _claimed(spark, tmp_path / "t", tmp_path / "ck")
    _claimed(spark, tmp_path / "t", tmp_path / "ck")  # the same query, restarted
    with pytest.raises(WindowSpecError) as refused:
        _claimed(spark, tmp_path / "t", tmp_path / "ck2")
    message = str(refused.value)
    assert f"parquet table '{tmp_path / 't'}' belongs to output 'main' of the query" in message
    assert f"on checkpoint 'file:{tmp_path / 'ck'}'" in message
    assert f"this query (checkpoint 'file:{tmp_path / 'ck2'}')" in message
    assert "Give this output a table of its own" in message
    with pytest.raises(WindowSpecError, match="belongs to output 'main'"):
        _claimed(spark, tmp_path / "t", tmp_path / "ck", output="late")


def test_a_sink_writes_only_when_claimed(spark, tmp_path):
    table = parquet_table(str(tmp_path / "t"))
    with pytest.raises(WindowSpecError, match=r"writes only for the query that claimed"):
        table(spark.createDataFrame([("a", 1)], SCHEMA), 0)


def _write_files(directory):
    directory.mkdir()
    batches = [[("a", 1_000), ("b", 12_000)], [("a", 500), ("_end", END_OF_INPUT_MS)]]
    for n, batch in enumerate(batches):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("".join(json.dumps({"k": k, "ts": ts, "v": 1}) + "\n" for k, ts in batch))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def _window(spark, source_dir):
    source = (
        spark.readStream.schema("k string, ts long, v long")
        .option("maxFilesPerTrigger", 1)
        .json(str(source_dir))
    )
    return (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(10)))
        .side_output_late_data(LATE)
        .sum("v")
    )


def test_two_outputs_naming_one_table_are_refused(spark, tmp_path):
    _write_files(tmp_path / "in")
    table = tmp_path / "t"
    sinks = {"main": parquet_table(str(table)), LATE: parquet_table(f"{table}/../t/")}
    with pytest.raises(WindowSpecError, match=r"outputs \['main', 'late'\] write one table"):
        _window(spark, tmp_path / "in").write_outputs(sinks, checkpoint=str(tmp_path / "ck"))
    assert not table.exists()  # refused before anything was claimed or run


def test_two_queries_started_together_on_one_table_one_is_refused(spark, tmp_path):
    _write_files(tmp_path / "in")
    table = str(tmp_path / "t")
    started, refused = [], []

    def start(n):
        sinks = {"main": parquet_table(table)}
        try:
            query = _window(spark, tmp_path / "in").write_outputs(
                sinks, checkpoint=str(tmp_path / f"ck{n}"), trigger={"availableNow": True}
            )
        except WindowSpecError as exc:
            refused.append(str(exc))
        else:
            started.append(query)

    threads = [threading.Thread(target=start, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(started) == 1 and len(refused) == 1, (started, refused)
    assert "belongs to output 'main' of the query on checkpoint" in refused[0]
    started[0].awaitTermination(300)
    assert started[0].exception() is None
    got = {(r.k, r.v) for r in spark.read.parquet(table).collect()}
    assert got == {("a", 1), ("b", 1)}  # a@500 came late


def test_sink_arguments_are_checked(spark, tmp_path):
    with pytest.raises(WindowSpecError, match="`path` must be a directory path"):
        parquet_table("")
    with pytest.raises(WindowSpecError, match="`path` must be a directory path"):
        delta_table(None)
    with pytest.raises(WindowSpecError, match="`name` must be a table name"):
        iceberg_table("")
    table = parquet_table(str(tmp_path / "t"))
    with pytest.raises(WindowSpecError, match="has a column 'batch_id'"):
        table.claim(spark, owner_of(spark, str(tmp_path / "ck"), "main"),
                    spark.createDataFrame([(1,)], "batch_id long").schema)  # fmt: skip
    sink = kafka_sink("127.0.0.1:1", "t", key="user")
    with pytest.raises(WindowSpecError, match=r"`key` names columns the output does not have"):
        sink(spark.createDataFrame([(1,)], "v long"), 0)


def test_a_session_without_the_table_format_is_refused(spark):
    """This session has neither Delta's nor Iceberg's jars (``tests/kafka`` has them)."""
    if spark.version.startswith(("4.0", "4.1", "4.2")):
        with pytest.raises(SessionSetupError, match=r"delta_table needs Delta Lake on the session"):
            check_delta(spark)
    if spark.version.startswith(("4.0", "4.1")):
        with pytest.raises(SessionSetupError, match=r"spark.sql.catalog.lake=org.apache.iceberg"):
            check_iceberg(spark, "lake.db.t")
    newer = SimpleNamespace(version="4.3.0")
    with pytest.raises(SessionSetupError, match=r"no release for Spark 4.3.0: .* 4.0, 4.1, 4.2"):
        check_delta(newer)
    with pytest.raises(SessionSetupError, match=r"no runtime for Spark 4.3.0: .* 4.0, 4.1 only"):
        check_iceberg(newer, "lake.db.t")


def _remove_tree(path):
    import shutil

    shutil.rmtree(path)
