"""The lagging topic of ``partition_scenarios`` through tidemark's streaming queries.

``stream_lagging_topic`` produces ``lagging_batches()`` to a topic of four partitions one
micro-batch at a time (then tidemark's end-of-input record) and, after each production,
runs two queries from their checkpoints with ``availableNow``: one with per-partition
watermarks (Flink's Kafka source), one with Spark's one watermark. Spark's micro-batches
are then the scenario's. Used by ``test_kafka_watermarks.py`` (against the engine) and
``test_kafka_flink.py`` (against real Flink on the same topic).
"""

from __future__ import annotations

from partition_scenarios import PARTITIONS, STRATEGY, WINDOW_MS, _Count, lagging_batches

import tidemark as tm
from tidemark.spark.io.kafka import read_kafka
from tidemark.spark.streaming import END_OF_INPUT_MS

RESULT = "key string, start long, end long, n long"
END_KEY = "_end"  # the key of the end-of-input record, a marker rather than data


def windows(spark, bootstrap, topic, per_partition, strategy=STRATEGY):
    """A count per key and tumbling window of the topic, late data to ``late``."""
    records = read_kafka(
        spark, bootstrap_servers=bootstrap, topic=topic, schema="key string, ts long",
        timestamp="ts",
    )  # fmt: skip
    extra = {"partition_column": "partition", "partitions": PARTITIONS} if per_partition else {}
    late = tm.OutputTag("late")
    result = (
        # timestamps from the epoch on: Spark runs its clock shifted (docs/streaming.md)
        tm.from_dataframe(
            records.rows, "ts", watermark_strategy=strategy, shift_spark_clock=True, **extra
        )
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
        .side_output_late_data(late)
        .process(_Count(), RESULT)
    )
    return result, late


def collecting(collected, name):
    """A ``foreachBatch`` sink appending the rows to ``collected[name]``."""
    return lambda df, batch_id: collected[name].extend(tuple(r) for r in df.collect())


def stream_lagging_topic(spark, bootstrap, topic, produce, checkpoints):
    """``{per_partition: {"main": rows, "late": rows}}`` of the two queries on ``topic``
    (see the module docstring); ``checkpoints`` is a directory."""
    variants = {per: windows(spark, bootstrap, topic, per) for per in (True, False)}
    collected = {per: {"main": [], "late": []} for per in variants}
    productions = [[(p, {"key": k, "ts": ts}) for p, k, ts in rows] for rows in lagging_batches()]
    # the end-of-input record in the last batch: every window fires after it
    productions[-1].append((0, {"key": END_KEY, "ts": END_OF_INPUT_MS}))
    for rows in productions:
        produce(topic, rows)
        queries = [
            result.write_outputs(
                {
                    "main": collecting(collected[per], "main"),
                    late: collecting(collected[per], "late"),
                },
                checkpoint=str(checkpoints / f"checkpoint-{per}"),
                trigger={"availableNow": True},
            )  # fmt: skip
            for per, (result, late) in variants.items()
        ]
        for query in queries:
            query.awaitTermination(300)
    return collected
