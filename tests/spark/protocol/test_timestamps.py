"""One timestamp rule for every Spark mode (:mod:`tidemark.spark.protocol.timestamps`).

BATCH, replay and streaming read the event-time column the same way: integral columns
are milliseconds, timestamps (with or without time zone) are instants, strings are
parsed; any other type is refused when the pipeline is defined, with one message.
"""

from __future__ import annotations

import json
import os

import pytest
from pyspark.sql import functions as F
from streaming_scenarios import _spec

import tidemark as tm
from tidemark.spark.protocol.timestamps import timestamp_ms
from tidemark.spark.streaming import END_OF_INPUT_MS, StreamPlan, window_stream

pytestmark = pytest.mark.spark

NOON = 1590292800000  # 2020-05-24 04:00:00 UTC
TYPE_ERROR = "must be long milliseconds, a timestamp, a date or a timestamp string; got type double"


@pytest.mark.parametrize(
    "ddl, value",
    [
        pytest.param("ts long", NOON + 1, id="long"),
        pytest.param("ts int", 1234, id="int"),
        pytest.param("ts tinyint", 12, id="tinyint"),
        pytest.param("ts string", "2020-05-24 04:00:00.001", id="string"),
        pytest.param("ts string", "2020-05-24T04:00:00.001Z", id="iso-string"),
    ],
)
def test_each_accepted_type_becomes_milliseconds(spark, ddl, value):
    df = spark.createDataFrame([(value,)], ddl)
    expected = value if isinstance(value, int) else NOON + 1
    assert df.select(timestamp_ms(df.schema, "ts")).first()[0] == expected


@pytest.mark.parametrize("cast", ["timestamp", "timestamp_ntz"])
def test_timestamps_with_and_without_time_zone_are_instants(spark, cast):
    df = spark.createDataFrame([("2020-05-24 04:00:00.001",)], "s string")
    df = df.select(F.col("s").cast(cast).alias("ts"))
    assert df.select(timestamp_ms(df.schema, "ts")).first()[0] == NOON + 1


def test_an_unparseable_string_is_null_for_the_path_to_report(spark):
    df = spark.createDataFrame([("yesterday",)], "ts string")
    assert df.select(timestamp_ms(df.schema, "ts")).first()[0] is None


def test_a_bounded_source_refuses_another_type_when_defined(spark):
    df = spark.createDataFrame([(1.5, "a")], "ts double, k string")
    with pytest.raises(tm.WindowSpecError, match=f"`timestamp` column 'ts' {TYPE_ERROR}"):
        tm.from_dataframe(df, timestamp="ts")


def test_a_streaming_source_refuses_it_with_the_same_message(spark, tmp_path):
    (tmp_path / "in").mkdir()
    df = spark.readStream.schema("ts double, k string").json(str(tmp_path / "in"))
    with pytest.raises(tm.WindowSpecError, match=f"`timestamp` column 'ts' {TYPE_ERROR}"):
        tm.from_dataframe(df, timestamp="ts")
    with pytest.raises(tm.WindowSpecError, match=f"`timestamp_column` column 'ts' {TYPE_ERROR}"):
        window_stream(
            df,
            StreamPlan(
                key_columns=["k"],
                timestamp_column="ts",
                spec=_spec(tm.TumblingEventTimeWindows.of(10)),
                out_of_orderness_ms=0,
                value_columns=["k", "ts"],
                result_schema=df.schema,
                result_to_row=lambda value, ts: value,
            ),
        )


def _write_batches(directory, batches):
    directory.mkdir()
    for n, rows in enumerate(batches):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


@pytest.mark.parametrize("cast", ["string", "timestamp_ntz"])
def test_streaming_accepts_what_batch_accepts(spark, tmp_path, cast):
    def stamp(ms):
        return f"2020-05-24 04:00:{ms // 1000:02d}.{ms % 1000:03d}"

    end = "9999-12-31 23:59:59.999"
    assert tm.LONG_MAX > END_OF_INPUT_MS  # the marker below is the end of input
    _write_batches(
        tmp_path / "in",
        [
            [{"k": "a", "v": 1, "ts": stamp(1000)}, {"k": "a", "v": 2, "ts": stamp(4000)}],
            [{"k": "a", "v": 4, "ts": stamp(6000)}, {"k": "b", "v": 8, "ts": stamp(2000)}],
            [{"k": "_end", "v": 0, "ts": end}],
        ],
    )
    raw = spark.readStream.schema("k string, v long, ts string").option("maxFilesPerTrigger", 1)
    source = raw.json(str(tmp_path / "in")).withColumn("ts", F.col("ts").cast(cast))
    result = (
        tm.from_dataframe(source, timestamp="ts")
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
        .sum("v")
    )
    rows: list = []
    query = result.write_outputs(
        {"main": lambda df, _: rows.extend((r.k, r.v) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    bounded = spark.createDataFrame(
        [
            ("a", 1, stamp(1000)),
            ("a", 2, stamp(4000)),
            ("a", 4, stamp(6000)),
            ("b", 8, stamp(2000)),
        ],
        "k string, v long, ts string",
    )
    bounded = bounded.withColumn("ts", F.col("ts").cast(cast))
    batch = (
        tm.from_dataframe(bounded, timestamp="ts")
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
        .sum("v")
    )
    expected = sorted((r.k, r.v) for r in batch.to_dataframe().collect())
    assert sorted(rows) == expected == [("a", 3), ("a", 4), ("b", 8)]
