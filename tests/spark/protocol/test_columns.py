"""The internal column protocol (:mod:`tidemark.spark.protocol.columns`) is one protocol: batch,
the SQL fast path and streaming produce the same combined frame."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

import tidemark as tm
from tidemark.spark.protocol import columns

pytestmark = pytest.mark.spark

RESULT = StructType([StructField("k", StringType()), StructField("n", LongType(), False)])


def test_side_values_of_classes_no_worker_can_import_survive():
    # A class defined in a driver script is not importable by module path on a
    # worker; plain pickle refuses such a class, cloudpickle carries it by value.
    class Seen:
        def __init__(self, n):
            self.n = n

    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(Seen(1))
    assert columns.decode_side(columns.encode_side(Seen(3))).n == 3


def test_equal_keys_encode_to_equal_bytes():
    assert columns.encode_key(("a", 1)) == columns.encode_key(("a", 1))
    assert columns.decode_key(columns.encode_key(("a", 1))) == ("a", 1)


@pytest.mark.parametrize("replay", [False, True], ids=["batch", "replay"])
def test_the_combined_schema_frames_the_results(replay):
    names = columns.combined_schema(RESULT, replay).fieldNames()
    placement = ["__tm_order", "__tm_seq", "__tm_wm"] if replay else []
    assert names == ["__tm_output", "__tm_ts", *placement, "k", "n", "__tm_side", "__tm_dropped"]
    assert all(f.nullable for f in columns.combined_schema(RESULT, replay).fields[1:])


def _late_pipeline(df, sql_fast_path):
    stream = tm.from_dataframe(
        df,
        timestamp="ts",
        watermark_strategy=(tm.WatermarkStrategy.for_bounded_out_of_orderness(0)),
    )
    windowed = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(10))
    return windowed.sum("n") if sql_fast_path else windowed.reduce(lambda a, b: a)


@pytest.mark.parametrize("sql_fast_path", [True, False], ids=["sql", "engine"])
def test_batch_paths_and_streaming_share_one_combined_schema(spark, tmp_path, sql_fast_path):
    bounded = spark.createDataFrame([("a", 1, 5)], "k string, n long, ts long")
    batch = _late_pipeline(bounded, sql_fast_path).combined_dataframe()
    (tmp_path / "in").mkdir()
    stream = spark.readStream.schema("k string, n long, ts long").json(str(tmp_path / "in"))
    streaming = _late_pipeline(stream, sql_fast_path).combined_dataframe()
    assert batch.schema.fieldNames() == streaming.schema.fieldNames()
    assert [f.dataType for f in batch.schema] == [f.dataType for f in streaming.schema]


def test_a_replay_counts_dropped_records_in_the_dropped_column(spark):
    # Arrival order: ts 20, then ts 1 (late for [0, 10), no side output): dropped.
    df = spark.createDataFrame(
        [("a", 1, 20, 0), ("a", 1, 1, 1)], "k string, n long, ts long, arrival long"
    )
    result = (
        tm.from_dataframe(
            df,
            timestamp="ts",
            order_by="arrival",
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(0),
        )
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(10))
        .reduce(lambda a, b: a)
    )
    rows = result.combined_dataframe().where("__tm_output = '__late_records_dropped'").collect()
    assert [(r["__tm_dropped"], r["__tm_side"]) for r in rows] == [(1, None)]
    assert result.num_late_records_dropped() == 1
