"""What explaining a streaming query costs it (issue 50): its micro-batch durations
with the per-micro-batch watermark records on and off (``record``), and with a reader
asking its checkpoint in a loop beside it (``reader``: another process that runs
``tidemark explain`` again and again, the query's view then one key's answer).

A stream of 5,000 clicks a file, 500 keys, two partitions (per-partition watermarks),
10 s tumbling sums, one file per micro-batch, ``processingTime`` 0; the first
micro-batch (planning) is not counted. Each variant runs twice, interleaved, so that a
machine's drift shows as a difference between the two runs of one variant.

    python benchmarks/explain_cost.py record [BATCHES]
    python benchmarks/explain_cost.py reader [BATCHES]

Results: ``benchmarks/README.md``, "Explaining a checkpoint".
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import tidemark as tm
from tidemark.spark.runtime.session import get_spark
from tidemark.spark.streaming.driver import batch_records as records_module
from tidemark.spark.streaming.driver import starting as sinks_module

ROOT = Path(os.environ.get("EXPLAIN_COST_DIR", "/tmp/tidemark-explain-cost"))
ROWS, KEYS = 5000, 500
READER = """
import sys
from tidemark.cli import main
answers = 0
while True:
    answers += main(["explain", "--checkpoint", sys.argv[1]]) == 0
    answers += main(["explain", "--checkpoint", sys.argv[1], "--key", "k7"]) == 0
    open(sys.argv[2], "w").write(str(answers))
"""


class _NoRecording:
    def attach(self, query):
        pass


def _write_file(directory: Path, number: int) -> None:
    rows = [
        {"k": f"k{i % KEYS}", "ts": 1_000_000 + number * 1000 + i % 1000, "n": 1, "p": i % 2}
        for i in range(ROWS)
    ]
    staged = directory / f".f{number}.tmp"
    staged.write_text("".join(json.dumps(row) + "\n" for row in rows))
    staged.rename(directory / f"f{number:04d}.json")


def _run(spark, name: str, batches: int, reader: bool = False) -> tuple[list[int], int]:
    """The micro-batch durations (ms) of one query, and the reader's answers."""
    directory = ROOT / name / "in"
    directory.mkdir(parents=True)
    source = (
        spark.readStream.schema("k string, ts long, n long, p int")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )
    result = (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(500),
            partition_column="p",
            partitions=2,
        )
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(10_000))
        .sum("n")
    )
    checkpoint = str(ROOT / name / "checkpoint")
    query = result.write_outputs(
        {"main": lambda df, _: df.count()},
        checkpoint=checkpoint,
        trigger={"processingTime": "0 seconds"},
    )
    _write_file(directory, 0)
    query.processAllAvailable()  # planning and the workers' start, not counted
    counted = ROOT / name / "answers"
    process = None
    if reader:
        command = [sys.executable, "-c", READER, checkpoint, str(counted)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(20)  # its JVM up and asking
    seen = len(query.recentProgress)
    for number in range(1, batches + 1):
        _write_file(directory, number)
        query.processAllAvailable()
    progress = [p for p in query.recentProgress[seen:] if p["numInputRows"] > 0]
    query.stop()
    if process is not None:
        process.terminate()
        process.wait()
    answers = int(counted.read_text() or 0) if counted.exists() else 0
    return [p["durationMs"]["triggerExecution"] for p in progress], answers


def main(mode: str, batches: int) -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    spark = get_spark(
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    )
    recording = (records_module.observe_input, sinks_module.record_batches)
    variants = (
        ("off", "on", "off2", "on2")
        if mode == "record"
        else ("alone", "reader", "alone2", "reader2")
    )
    for label in variants:
        if label.startswith("off"):
            records_module.observe_input = lambda rows, index, ts: rows
            sinks_module.record_batches = lambda *args, **kwargs: _NoRecording()
        else:
            records_module.observe_input, sinks_module.record_batches = recording
        durations, answers = _run(spark, label, batches, reader=label.startswith("reader"))
        print(
            f"{label}: median {statistics.median(durations)} ms, mean "
            f"{round(statistics.mean(durations))} ms, max {max(durations)} ms"
            + (f", {answers} answers beside it" if label.startswith("reader") else "")
            + f"; {durations}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12)
