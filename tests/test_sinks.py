"""The exactly-once Parquet table sink: a batch written again replaces its own rows, and a
table written by another query is refused before it is overwritten. (The Kafka sink
needs a broker: ``tests/kafka``.)"""

from __future__ import annotations

import pytest

from tidemark.errors import WindowSpecError
from tidemark.spark.sinks import kafka_sink, parquet_table

pytestmark = pytest.mark.spark


def _rows(table, spark):
    return sorted(tuple(r) for r in spark.read.parquet(table.path).collect())


def test_a_batch_written_again_replaces_its_rows(spark, tmp_path):
    table = parquet_table(str(tmp_path / "t"))
    table(spark.createDataFrame([("a", 1)], "k string, v long"), 0)
    table(spark.createDataFrame([("b", 2), ("c", 3)], "k string, v long"), 1)
    again = parquet_table(str(tmp_path / "t"))  # a restarted driver
    again(spark.createDataFrame([("b", 2), ("c", 3)], "k string, v long"), 1)
    assert _rows(table, spark) == [("a", 1, 0), ("b", 2, 1), ("c", 3, 1)]
    assert again.batches(spark) == [0, 1]


def test_a_table_with_later_batches_is_refused(spark, tmp_path):
    first = parquet_table(str(tmp_path / "t"))
    for batch in range(3):
        first(spark.createDataFrame([("a", batch)], "k string, v long"), batch)
    other = parquet_table(str(tmp_path / "t"))  # a query on a new checkpoint
    with pytest.raises(WindowSpecError, match="holds batch 2, later than batch 0 this query"):
        other(spark.createDataFrame([("z", 9)], "k string, v long"), 0)
    assert _rows(first, spark) == [("a", 0, 0), ("a", 1, 1), ("a", 2, 2)]


def test_sink_arguments_are_checked(spark, tmp_path):
    with pytest.raises(WindowSpecError, match="`path` must be a directory path"):
        parquet_table("")
    table = parquet_table(str(tmp_path / "t"))
    with pytest.raises(WindowSpecError, match="has a column 'batch_id'"):
        table(spark.createDataFrame([(1,)], "batch_id long"), 0)
    sink = kafka_sink("127.0.0.1:1", "t", key="user")
    with pytest.raises(WindowSpecError, match=r"`key` names columns the output does not have"):
        sink(spark.createDataFrame([(1,)], "v long"), 0)
