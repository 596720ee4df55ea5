"""Records onto a topic of the local broker, each in the partition you choose.

The topic is made with the broker's own tool (``tools/kafka/broker.py topic``, Kafka's
``TopicCommand``); the records are written with Spark's own Kafka sink, whose
``partition`` column puts each record in its partition. ``docs/kafka.md`` shows it;
``tests/kafka`` writes every topic it reads this way. On the local broker
(``make kafka-start``)::

    python tools/kafka/broker.py topic clicks 4
    python docs/examples/kafka_fill.py 127.0.0.1:19092 clicks 4
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def produce(spark, bootstrap_servers, topic, records):
    """Write ``records``, ``[(partition, value), ...]``, to ``topic``: a dict as JSON, a
    str as it is. One task writes them, so each partition's keep the order given."""
    rows = [(p, v if isinstance(v, str) else json.dumps(v)) for p, v in records]
    (
        spark.createDataFrame(rows, "partition int, value string")
        .coalesce(1)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic)
        .save()
    )


def clicks(partitions, users=8, per_user=5):
    """Sample clicks for ``docs/examples/kafka_sessions.py``: each user's in one
    partition, a click every 10 s from 2024-01-01 00:00 UTC."""
    start = 1_704_067_200_000
    return [
        (u % partitions, {"user": f"u{u}", "page": f"p{i % 3}", "ts": start + 10_000 * i})
        for u in range(users)
        for i in range(per_user)
    ]


if __name__ == "__main__":
    servers, topic_name, count = sys.argv[1:4]
    # The connector's jars: `make kafka-setup` caches them (tools/kafka/jars.py).
    sys.path.insert(0, "tools/kafka")
    import jars  # noqa: E402

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(jars.classpath(["connector"])))
        .getOrCreate()
    )
    produce(session, servers, topic_name, clicks(int(count)))
    print(f"kafka: {len(clicks(int(count)))} clicks on {topic_name}")
