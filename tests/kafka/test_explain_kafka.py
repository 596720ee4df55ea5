"""Why did no window fire? An idle Kafka partition holds the watermark, and the answer
from the query's checkpoint names it (issue 50, docs/why-no-result.md).

Partitions 0-2 carry a click a second from 0 to 29 s; partition 3 from 0 to 3 s, then
nothing. Per partition (2 s out of orderness) the watermark stops at partition 3's
3 s - 2 s - 1 = 999 ms: no 5 s window closes, as in Flink without idleness.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lagging_topic import collecting, windows
from partition_scenarios import PARTITIONS, STRATEGY

from tidemark.explain import PartitionState
from tidemark.spark import explain_checkpoint, explain_query
from tidemark.spark.streaming.driver.batch_records import RECORDS_DIR
from tidemark.spark.streaming.driver.state_reader import state_batches

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _records_through(checkpoint: str, batch: int) -> None:
    """Wait for the listener to record ``batch`` (it runs after the micro-batch)."""
    deadline = time.monotonic() + 60
    while not (Path(checkpoint) / RECORDS_DIR / str(batch)).exists():
        assert time.monotonic() < deadline, f"no record of micro-batch {batch}"
        time.sleep(0.2)


def _idle_records():
    rows = [(p, {"key": f"k{p}", "ts": s * 1000}) for s in range(30) for p in range(3)]
    return rows + [(3, {"key": "k3", "ts": s * 1000}) for s in range(4)]


def test_an_idle_partition_holding_the_watermark_is_named(
    spark, bootstrap, topic, produce, tmp_path
):
    name = topic(PARTITIONS)
    produce(name, _idle_records())
    collected: dict[str, list] = {"main": [], "late": []}
    result, late = windows(spark, bootstrap, name, per_partition=True, strategy=STRATEGY)
    checkpoint = str(tmp_path / "checkpoint")
    query = result.write_outputs(
        {"main": collecting(collected, "main"), late: collecting(collected, "late")},
        checkpoint=checkpoint,
        trigger={"availableNow": True},
    )
    assert query.awaitTermination(300)
    assert collected == {"main": [], "late": []}
    last = state_batches(spark, checkpoint)[1]
    _records_through(checkpoint, last)

    x = explain_checkpoint(spark, checkpoint, "k0", result, window=(0, 5000))
    wait = x.window(0, 5000).waiting
    assert (wait.kind, wait.timer, wait.watermark) == ("event_time_timer", 4999, 999)
    assert x.holder == PartitionState(3, 3000, 999, False, 0)
    assert x.idleness is False
    text = x.text()
    assert "Partition 3 sets the watermark at 999" in text
    # k0's records read again from the topic, as Spark's offsets log says each
    # micro-batch read them: all 30 wait in open windows
    assert x.history_from == 0 and not x.notes
    assert [(e.timestamp, e.fate, e.batch) for e in x.elements] == [
        (s * 1000, "open", 0) for s in range(30)
    ]

    view = explain_query(spark, checkpoint)
    assert view.holder.partition == 3 and view.holder.max_event_time == 3000
    assert [p.watermark for p in view.partitions] == [26_999, 26_999, 26_999, 999]
    assert "3: 3000, watermark 999" in view.text()
