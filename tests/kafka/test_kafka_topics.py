"""What a topic is, checked when it is read (issue 47).

``read_kafka`` asks the brokers for the topic's partitions with Kafka's own client: a
missing topic is a short :class:`~tidemark.errors.WindowSpecError` naming it (Spark's
own failure was 7,000 characters of plan that never named it), brokers that do not
answer are an :class:`~tidemark.errors.InputDataError` after a time limit (Spark's
source, ``availableNow`` included, waited without end), and ``partitions=`` must be the
topic's: ``partitions=8`` on a topic of four left partitions 4-7 holding the watermark
at its minimum, so that no window ever fired.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import read_keys

import tidemark as tm
from tidemark.errors import InputDataError, WindowSpecError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "kafka"))
import broker as kafka_broker  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BOUNDED = tm.WatermarkStrategy.for_bounded_out_of_orderness(0)


@pytest.mark.parametrize(
    "partitions, listed",
    [
        pytest.param(8, "lists [4, 5, 6, 7] it does not have", id="more"),
        pytest.param([0, 1], "lists not its [2, 3] (their rows would fail", id="fewer"),
    ],
)
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "replay"])
def test_partitions_other_than_the_topics_are_refused(
    spark, bootstrap, topic, partitions, listed, streaming
):
    name = topic(4)
    rows = read_keys(spark, bootstrap, name, streaming=streaming).rows
    with pytest.raises(WindowSpecError) as info:
        tm.from_dataframe(
            rows,
            "ts",
            order_by=None if streaming else ["partition", "offset"],
            watermark_strategy=BOUNDED,
            partition_column="partition",
            partitions=partitions,
        )
    message = str(info.value)
    assert message.startswith(f"`partitions` must be the partitions topic {name!r} has, 0..3")
    assert listed in message and message.endswith("give partitions=4")


def test_the_topics_partitions_fire_windows(spark, bootstrap, topic, produce, tmp_path):
    """partitions=4 on a topic of four: each partition's watermark rises, windows fire."""
    name = topic(4)
    produce(name, [(p, {"key": "k", "ts": ts}) for p in range(4) for ts in (1_000, 12_000)])
    rows = read_keys(spark, bootstrap, name).rows
    stream = tm.from_dataframe(
        rows,
        "ts",
        watermark_strategy=BOUNDED,
        partition_column="partition",
        partitions=4,
        shift_spark_clock=True,
    )
    result = stream.key_by("key").window(tm.TumblingEventTimeWindows.of(10_000)).sum("ts")
    fired: list[tuple] = []
    query = result.write_outputs(
        {"main": lambda df, _: fired.extend((r.key, r.ts) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    assert query.awaitTermination(300)
    assert fired == [("k", 4_000)]  # [0, 10 s) of every partition; [10 s, 20 s) open


def test_a_missing_topic_is_named(spark, bootstrap):
    with pytest.raises(WindowSpecError) as info:
        read_keys(spark, bootstrap, "no-such-topic")
    assert str(info.value) == (
        f"`topic` 'no-such-topic' does not exist on the brokers at {bootstrap}: create it, "
        "or name a topic that exists"
    )


def test_brokers_that_do_not_answer_fail_after_the_time_limit(spark):
    nowhere = f"127.0.0.1:{kafka_broker.free_port()}"
    started = time.monotonic()
    with pytest.raises(InputDataError) as info:
        read_keys(spark, nowhere, "clicks", options={"kafka.default.api.timeout.ms": "3000"})
    assert time.monotonic() - started < 60
    assert str(info.value) == (
        f"Kafka's brokers at {nowhere} did not answer within 3000ms when asked for topic "
        "'clicks': check `bootstrap_servers` and that the brokers are up (the limit is "
        "option kafka.default.api.timeout.ms)"
    )
