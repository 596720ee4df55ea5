"""docs/kafka.md's way to put records on the local broker (issue 47): a topic of N
partitions with ``tools/kafka/broker.py topic NAME N``, records in the partitions chosen
with ``docs/examples/kafka_fill.py``'s ``produce`` (Spark's own Kafka sink)."""

from __future__ import annotations

import json
import os

import broker as kafka_broker
import kafka_fill
import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_the_documented_commands_make_a_topic_and_fill_its_partitions(spark, bootstrap, capsys):
    name = f"fill-{os.getpid()}"
    port = bootstrap.rsplit(":", 1)[1]
    kafka_broker.main(["topic", name, "3", "--port", port])
    assert capsys.readouterr().out == f"kafka: topic {name} with 3 partitions\n"
    records = kafka_fill.clicks(3, users=4, per_user=3)
    kafka_fill.produce(spark, bootstrap, name, records)
    read = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", name)
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .collect()
    )
    assert {r.partition for r in read} == {0, 1, 2}
    by_partition = {
        p: [json.loads(r.value) for r in sorted(read, key=lambda r: r.offset) if r.partition == p]
        for p in range(3)
    }
    # each partition holds its records, in the order given
    assert by_partition == {p: [v for q, v in records if q == p] for p in range(3)}
