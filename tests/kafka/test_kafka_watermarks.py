"""Per-partition watermarks through a real Kafka topic of four partitions.

One partition lags the others by more than the out-of-orderness bound
(``partition_scenarios``). Each micro-batch is one production: the records of a batch are
written, then the query runs with ``availableNow`` from its checkpoint, so Spark's
micro-batches are the scenario's and the results are compared with the engine fed the
same batches and the watermark after each: per partition (Flink's Kafka source) nothing
is late; with Spark's one watermark the lagging partition's elements are late.

An idle partition holds the watermark, as in Flink without idleness; ``with_idleness``
on a stream read by partition is refused (Spark cannot leave one input out of its
minimum), and a replay of the recorded topic gives Flink's idleness.
"""

from __future__ import annotations

import pytest
from lagging_topic import collecting, stream_lagging_topic, windows
from partition_scenarios import (
    BOUND_MS,
    PARTITIONS,
    STRATEGY,
    WINDOW_MS,
    _CountAt,
    count_by_partition,
    engine_counts,
    engine_replay,
    lagging_batches,
)
from pyspark.sql import functions as F

import tidemark as tm
from tidemark.spark.io.kafka import read_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_lagging_partition_late_only_on_the_global_watermark(
    spark, bootstrap, topic, produce, tmp_path
):
    """Both queries read the same topic, side by side, one production per batch."""
    batches = lagging_batches()
    collected = stream_lagging_topic(spark, bootstrap, topic(PARTITIONS), produce, tmp_path)
    for per_partition, outputs in collected.items():
        expected_main, expected_late = engine_counts(batches, per_partition)
        assert sorted(outputs["main"]) == expected_main
        got_late = sorted((r[2], r[0], r[1]) for r in outputs["late"])  # (partition, key, ts)
        assert got_late == expected_late
    assert collected[True]["late"] == []  # Flink's per-partition watermark: none late
    late_global = [(r[2], r[0], r[1]) for r in collected[False]["late"]]
    assert count_by_partition(late_global) == {PARTITIONS - 1: 10}


def _idle_records():
    """Partitions 0-2: a click a second from 0 to 29 s; partition 3: 0 to 3 s, then
    nothing. Per partition, the watermark stops at 3 s - 2 s - 1 = 999 ms."""
    rows = [(p, {"key": f"k{p}", "ts": s * 1000}) for s in range(30) for p in range(3)]
    return rows + [(3, {"key": "k3", "ts": s * 1000}) for s in range(4)]


def test_idle_partition_holds_the_watermark_and_idleness_is_refused(
    spark, bootstrap, topic, produce, tmp_path
):
    """A topic whose partition 3 went quiet: without idleness it holds the watermark and
    no window closes, as in Flink. ``with_idleness`` on the stream read by partition is
    refused, naming the fix: Spark cannot leave one input out of its minimum, and
    tidemark's former wall-clock advance made rows late that Flink keeps (issue 47)."""
    name = topic(PARTITIONS)
    produce(name, _idle_records())
    with pytest.raises(tm.WindowSpecError, match=r"^`with_idleness` on a stream read by"):
        windows(spark, bootstrap, name, per_partition=True, strategy=STRATEGY.with_idleness(2_000))
    collected: dict[str, list] = {"waiting": [], "late": []}
    result, late = windows(spark, bootstrap, name, per_partition=True, strategy=STRATEGY)
    query = result.write_outputs(
        {"main": collecting(collected, "waiting"), late: collecting(collected, "late")},
        checkpoint=str(tmp_path / "checkpoint-waiting"),
        trigger={"availableNow": True},
    )
    assert query.awaitTermination(120)
    # partition 3 holds the watermark at 3 s - 2 s - 1 = 999 ms: nothing closes, as in Flink
    assert BOUND_MS == 2_000 and collected == {"waiting": [], "late": []}


def test_replay_of_the_recorded_topic_equals_the_engine(spark, bootstrap, topic, produce):
    """The lagging topic read back in batch and replayed in the order its records were
    stamped (Kafka's record timestamp, then partition and offset), per partition: the
    engine fed each row after the watermark in force when it arrived gives the same."""
    name = topic(PARTITIONS)
    for rows in lagging_batches():
        produce(name, [(p, {"key": k, "ts": ts}) for p, k, ts in rows])
    records = read_kafka(
        spark, bootstrap_servers=bootstrap, topic=name, schema="key string, ts long",
        timestamp="ts", streaming=False,
    )  # fmt: skip
    order = ["kafka_timestamp", "partition", "offset"]
    strategy = STRATEGY.with_idleness(60_000)
    result = (
        tm.from_dataframe(
            records.rows,
            "ts",
            order_by=order,
            processing_time="kafka_timestamp",
            watermark_strategy=strategy,
            partition_column="partition",
        )  # fmt: skip
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
        .process(_CountAt(), "key string, start long, end long, n long, wm long")
    )
    got = sorted(tuple(r) for r in result.to_dataframe().collect())
    rows = records.rows.withColumn("arrival", F.unix_millis("kafka_timestamp"))
    arrived = sorted(rows.collect(), key=lambda r: tuple(r[c] for c in order))
    sequence = [(r.partition, r.key, r.ts, r.arrival) for r in arrived]
    assert got == engine_replay(sequence, strategy, list(range(PARTITIONS)))
    assert sum(r[3] for r in got) == sum(len(b) for b in lagging_batches())
