"""Real Flink 1.20 reads the same Kafka topic as tidemark's streaming run: equal results.

The lagging topic of ``partition_scenarios`` (four partitions, partition 3 ten seconds
behind, bound two seconds) is produced to the real broker and read by tidemark's two
streaming queries (``lagging_topic``), then by a real Flink job
(``tools/flinkref/flink_kafka.py``): Flink's Kafka source, bounded at the topic's latest
offsets, ``WatermarkStrategy.forBoundedOutOfOrderness`` on the source (one generator per
partition), the same tumbling count per key with late data to a side output.

- Flink's windows and late elements equal tidemark's per-partition run: nothing late.
  Flink's end of input is its final watermark; tidemark's is the end-of-input record,
  which Flink counts as an element of its own window, left out here.
- tidemark's run with Spark's one watermark differs from Flink's exactly by its late
  elements, all of the lagging partition: each window of Flink's counts what tidemark's
  counted plus the elements tidemark sent to the side output.

What this does not show: that Flink needed its per-partition watermarks to put nothing
late. Flink's watermarks are periodic (every 200 ms), and its reader takes this small
bounded topic in one poll, before the first one: a Flink job with the strategy after the
source (``flink_kafka.py`` MODE ``after-source``, one generator over the partitions as
the reader interleaves them) gave nothing late either, in the one run tried (2026-11-26).
Its late elements depend on Kafka's fetches and the wall clock, so that job is not
compared, and the per-partition rule itself is shown against the engine
(``test_kafka_watermarks.py``).

Needs Flink (``tools/flinkref/setup.sh``, Java 17) and Flink's Kafka connector
(``python tools/kafka/jars.py flink``) beside the Kafka set-up; skipped without them,
except under ``make test-flink-kafka`` (``TIDEMARK_REQUIRE_FLINK=1``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from lagging_topic import END_KEY, stream_lagging_topic
from partition_scenarios import BOUND_MS, PARTITIONS, WINDOW_MS, engine_counts, lagging_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "flinkref"))
import flink_kafka  # noqa: E402  (tools/flinkref/flink_kafka.py)

from tidemark.spark.streaming import END_OF_INPUT_MS  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.spark]


@pytest.fixture(scope="session")
def flink() -> None:
    """Flink's jars, its Kafka connector and Java, or a skip (a failure when required),
    before the session's broker and Spark start."""
    reason = flink_kafka.missing()
    if reason is None and shutil.which(flink_kafka.run_flink.java_bin("java")) is None:
        reason = "Java 17 (`java`)"
    if reason is not None:
        if os.environ.get("TIDEMARK_REQUIRE_FLINK") == "1":
            pytest.fail(f"needs {reason}; `make test-flink-kafka` needs it")
        pytest.skip(f"needs {reason}")


def _window_counts(rows) -> Counter:
    """``{(key, start, end): n}`` of ``(key, start, end, n)`` rows, one per window."""
    counts = Counter({tuple(r[:3]): r[3] for r in rows})
    assert len(counts) == len(rows), "a window fired twice"
    return counts


def _window_of(ts: int) -> tuple[int, int]:
    start = ts - ts % WINDOW_MS
    return start, start + WINDOW_MS


def test_flink_reads_the_lagging_topic_as_the_per_partition_run(
    flink, spark, bootstrap, topic, produce, tmp_path
):
    name = topic(PARTITIONS)
    tidemark = stream_lagging_topic(spark, bootstrap, name, produce, tmp_path)
    got = flink_kafka.run(bootstrap, name, BOUND_MS, WINDOW_MS, "per-partition")
    flink_main = sorted(tuple(r) for r in got["main"] if r[0] != END_KEY)
    assert [r for r in got["main"] if r[0] == END_KEY] == [
        [END_KEY, *_window_of(END_OF_INPUT_MS), 1]
    ]
    # the per-partition run: the same windows and counts, and no late element, as Flink
    assert flink_main == sorted(tidemark[True]["main"])
    assert got["late"] == [] and tidemark[True]["late"] == []
    assert flink_main == engine_counts(lagging_batches(), per_partition=True)[0]
    # Spark's one watermark: Flink's counts are tidemark's plus tidemark's late elements
    late = tidemark[False]["late"]
    assert late and {r[2] for r in late} == {PARTITIONS - 1}
    late_by_window = Counter((r[0], *_window_of(r[1])) for r in late)  # (key, ts, partition, ...)
    assert _window_counts(flink_main) == _window_counts(tidemark[False]["main"]) + late_by_window
