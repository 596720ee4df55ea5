"""Malformed records in a real topic, and results written back to Kafka.

A record that is bad JSON, has a field of the wrong type or lacks its timestamp is the
clear :class:`~tidemark.errors.InputDataError` naming its topic, partition and offset,
read in batch or by a streaming query; with ``on_malformed="side_output"`` it is in
``KafkaRecords.malformed`` instead, and never skipped silently.
"""

from __future__ import annotations

import json

import pytest
from conftest import read_keys
from partition_scenarios import _Count
from pyspark.errors import PySparkException

import tidemark as tm
from tidemark.errors import InputDataError, WindowSpecError
from tidemark.spark.io.kafka import read_kafka
from tidemark.spark.io.sinks import BATCH_HEADER, kafka_sink

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

GOOD = [(0, {"key": "a", "ts": 1_000}), (1, {"key": "b", "ts": 2_000})]


@pytest.mark.parametrize(
    "value, reason",
    [
        ("{not json", "its value is not a JSON object of the schema"),
        ('{"key": "c", "ts": "noon"}', "its value is not a JSON object of the schema"),
        ('{"key": "c"}', "it has no event time: field 'ts' is missing or null"),
        ("", "it has no value"),
        (
            '{"key": 123, "ts": 3000}',
            "its field 'key' is a string in the schema and a JSON BIGINT in the value",
        ),
        (
            '{"key": {"id": 7}, "ts": 3000}',
            "its field 'key' is a string in the schema and a JSON OBJECT<id: BIGINT> in the value",
        ),
    ],
    ids=[
        "bad_json",
        "wrong_type",
        "missing_timestamp",
        "empty",
        "number_in_string",
        "object_in_string",
    ],
)
def test_malformed_record_is_an_error_naming_partition_and_offset(
    spark, bootstrap, topic, produce, value, reason
):
    name = topic(2)
    produce(name, [*GOOD, (1, {"key": "b", "ts": 3_000}), (1, value)])
    records = read_keys(spark, bootstrap, name, streaming=False)
    with pytest.raises(InputDataError) as raised, tm.raising_tidemark_errors():
        records.rows.collect()
    message = str(raised.value)
    assert f"a Kafka record of topic {name} at partition=1, offset=2 is malformed: " in message
    assert reason in message and "on_malformed='side_output'" in message
    with pytest.raises(InputDataError) as plain:  # a plain action: tidemark's and Spark's
        records.rows.collect()
    assert str(plain.value) == message and isinstance(plain.value, PySparkException)


def test_malformed_record_fails_a_streaming_query(spark, bootstrap, topic, produce, tmp_path):
    name = topic(2)
    produce(name, [*GOOD, (0, '{"key": "c"}')])
    records = read_keys(spark, bootstrap, name)
    result = (
        tm.from_dataframe(
            records.rows,
            "ts",
            partition_column="partition",
            partitions=2,
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(1_000),
            shift_spark_clock=True,  # timestamps from the epoch on
        )  # fmt: skip
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(5_000))
        .process(_Count(), "key string, start long, end long, n long")
    )
    query = result.write_outputs(
        {"main": lambda df, b: df.collect()},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    with pytest.raises(InputDataError, match=r"partition=0, offset=1 is malformed: it has no"):
        query.awaitTermination(300)


def test_side_output_keeps_malformed_records_apart(spark, bootstrap, topic, produce):
    name = topic(2)
    produce(name, [*GOOD, (1, "{not json"), (0, '{"key": "c"}')])
    records = read_keys(spark, bootstrap, name, streaming=False, on_malformed="side_output")
    rows = sorted((r.key, r.ts, r.partition, r.offset) for r in records.rows.collect())
    assert rows == [("a", 1_000, 0, 0), ("b", 2_000, 1, 0)]
    bad = sorted(
        (r.partition, r.offset, r.value, r.error[:20]) for r in records.malformed.collect()
    )
    assert bad == [
        (0, 1, '{"key": "c"}', "it has no event time"),
        (1, 1, "{not json", "its value is not a J"),
    ]


def test_a_string_field_takes_only_json_strings(spark, bootstrap, topic, produce):
    """Spark's from_json reads any JSON value into a string field ('123', '{"id":7}'):
    such a record is malformed, nested string fields too; a JSON null is a null."""
    name = topic(1)
    values = [
        '{"who": {"name": "ann"}, "ts": 1}',
        '{"who": {"name": null}, "ts": 2}',
        '{"who": {"name": 7}, "ts": 3}',
        '{"who": {"name": "bob"}, "key": [1], "ts": 4}',
    ]
    produce(name, [(0, v) for v in values])
    records = read_kafka(
        spark, bootstrap_servers=bootstrap, topic=name, timestamp="ts", streaming=False,
        schema="who struct<name: string>, key string, ts long", on_malformed="side_output",
    )  # fmt: skip
    assert sorted((r.ts, r.who.name) for r in records.rows.collect()) == [(1, "ann"), (2, None)]
    assert sorted((r.offset, r.error) for r in records.malformed.collect()) == [
        (2, "its field 'who.name' is a string in the schema and a JSON BIGINT in the value"),
        (3, "its field 'key' is a string in the schema and a JSON ARRAY<BIGINT> in the value"),
    ]


def test_read_kafka_arguments_are_checked(spark):
    with pytest.raises(WindowSpecError, match="`timestamp` must name a field of `schema`"):
        read_kafka(spark, bootstrap_servers="x:1", topic="t", schema="a long", timestamp="ts")
    with pytest.raises(WindowSpecError, match=r"clash with the columns read_kafka adds"):
        read_kafka(spark, bootstrap_servers="x:1", topic="t", schema="offset long, ts long",
                   timestamp="ts")  # fmt: skip
    with pytest.raises(WindowSpecError, match="`on_malformed` must be one of"):
        read_kafka(spark, bootstrap_servers="x:1", topic="t", schema="ts long", timestamp="ts",
                   on_malformed="skip")  # fmt: skip


def test_kafka_sink_writes_results_with_their_batch_id(spark, bootstrap, topic, produce):
    name, results = topic(2), topic(1)
    produce(name, GOOD)
    records = read_keys(spark, bootstrap, name, streaming=False)
    sink = kafka_sink(bootstrap, results, key="key")
    sink(records.rows.select("key", "ts"), 7)
    back = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", results)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    got = sorted((r.key.decode(), json.loads(r.value)) for r in back)
    assert got == [("a", {"key": "a", "ts": 1_000}), ("b", {"key": "b", "ts": 2_000})]
    assert {(h.key, bytes(h.value)) for r in back for h in r.headers} == {(BATCH_HEADER, b"7")}
