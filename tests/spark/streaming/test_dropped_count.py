"""The dropped count of a stream is ONE row per micro-batch: Flink's counter's increment.

One file per micro-batch, windows of 10 s, no late-data tag::

    batch 0: a 20 s, b 21 s, c 22 s            -> watermark 21.999 s
    batch 1: a 1 s, b 2 s, c 3 s (late: [0, 10) is gone), a 25 s
    batch 2: the end-of-input marker           -> every window fires
    (batch 3: Spark's batch without data, for the final watermark)

The three late elements belong to three keys, so to different key groups: the count of
batch 1 must still be one row, 3, and the batches that drop nothing give a 0.
"""

from __future__ import annotations

import json
import os

import pytest

import tidemark as tm
from tidemark.spark.streaming import END_OF_INPUT_MS

pytestmark = pytest.mark.spark

BATCHES = [
    [("a", 20), ("b", 21), ("c", 22)],
    [("a", 1), ("b", 2), ("c", 3), ("a", 25)],
    [("_end", END_OF_INPUT_MS // 1000)],
]


def _write_files(directory):
    directory.mkdir()
    for n, batch in enumerate(BATCHES):
        path = directory / f"batch-{n:03d}.json"
        lines = [json.dumps({"k": k, "ts": s * 1000, "n": 1}) for k, s in batch]
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def test_a_streams_dropped_count_is_one_row_per_micro_batch(spark, tmp_path):
    _write_files(tmp_path / "in")
    source = (
        spark.readStream.schema("k string, ts long, n long")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
    )
    result = (
        tm.from_dataframe(source, timestamp="ts")
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(10)))
        .sum("n")
    )
    counts: dict[int, list] = {}

    def sink(df, batch_id):
        assert df.columns == ["num_late_records_dropped"]
        counts[batch_id] = [tuple(r) for r in df.collect()]

    query = result.write_outputs(
        {"__late_records_dropped": sink},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    # Spark adds a batch without data for the final watermark: it drops nothing either
    assert counts[1] == [(3,)]
    assert {b: rows for b, rows in counts.items() if b != 1} == {
        b: [(0,)] for b in counts if b != 1
    }
    assert len(counts) >= 3
