"""kill -9 of the driver mid-stream, reading Kafka: every result in the tables exactly once,
for each table sink: Parquet, Delta Lake (Spark 4.0-4.2) and Apache Iceberg (4.0, 4.1).

The docs' example (``docs/examples/kafka_sessions.py``: sessions per user on
per-partition watermarks, each output to a table: ``parquet_table`` by batch id as the
example has it, or ``delta_table`` / ``iceberg_table``) runs in a driver
process of its own (``kafka_job.py``) over 20,000 users in a topic of four partitions,
several micro-batches; after the clicks the topic holds 200 late ones (event times of the
first second, behind the watermark from the second micro-batch on) and the end of input.
The test kills the driver with SIGKILL right after the main table's sink wrote batch 1
and before Spark recorded that batch, then restarts it from the checkpoint to the end.
The tables then hold every session once (0 lost, 0 duplicated), every late click once
in the late table, and one dropped-count row per micro-batch. Batch 1, written before
the kill, is written again by the restart: the Parquet table replaces its partition,
Delta skips it (the same ``txnAppId`` and ``txnVersion``), the Iceberg sink finds it in
a snapshot's summary and skips it.

Each user's clicks sit in one partition in event-time order, so no click is late for
its partition's watermark: the sessions are those of the whole input (BATCH), whatever
the micro-batches, and the expectation below needs no engine run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyspark
import pytest
from conftest import require_format
from kafka_job import iceberg_name
from pyspark.sql import functions as F

from tidemark.spark.io.sinks import BATCH_ID
from tidemark.spark.streaming import END_OF_INPUT_MS

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

USERS = 20_000
PARTITIONS = 4
STEP_MS = 100  # users' first clicks are this far apart in each partition
GAP_MS = 30_000  # the example's session gap
LATE_CLICKS = 200
T0 = 1_704_067_200_000  # 2024-01-01T00:00Z: real clicks are after the epoch


def _clicks() -> list[tuple[int, dict]]:
    """Per user: two clicks 5 s apart (one session); every tenth user a third click a
    minute later (a second session). Each partition's clicks in event-time order."""
    by_partition: dict[int, list[dict]] = {p: [] for p in range(PARTITIONS)}
    for user in range(USERS):
        base = T0 + (user // PARTITIONS) * STEP_MS
        clicks = [(base, "home"), (base + 5_000, "cart")]
        if user % 10 == 0:
            clicks.append((base + 60_000, "buy"))
        for ts, page in clicks:
            by_partition[user % PARTITIONS].append({"user": f"u{user}", "page": page, "ts": ts})
    return [(p, c) for p, rows in by_partition.items() for c in sorted(rows, key=_ts)]


def _ts(click: dict) -> int:
    return click["ts"]


def _expected_sessions() -> Counter:
    sessions: Counter = Counter()
    for user in range(USERS):
        base = T0 + (user // PARTITIONS) * STEP_MS
        sessions[(f"u{user}", base, base + 5_000 + GAP_MS, 2, 2)] += 1
        if user % 10 == 0:
            sessions[(f"u{user}", base + 60_000, base + 60_000 + GAP_MS, 1, 1)] += 1
    return sessions


def _job(bootstrap, topic, out: Path, pause: str, fmt: str, warehouse: str) -> subprocess.Popen:
    script = Path(__file__).with_name("kafka_job.py")
    log = out.parent / f"job-{pause}-{time.monotonic_ns()}.log"
    job = subprocess.Popen(
        [sys.executable, str(script), bootstrap, topic, str(out), pause, fmt, warehouse],
        env=dict(os.environ),
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    job.log = log  # type: ignore[attr-defined]
    return job


def _restart(bootstrap, topic, out: Path, fmt: str, warehouse: str) -> None:
    """Restart the killed job and let it finish. Spark 4.1's Kafka connector fails the
    first micro-batch after such a restart in its progress report, once the batch is
    committed (SPARK-55271): tidemark says so (``SessionSetupError``, the way out: start
    again), and the test takes that way out once, on that version only."""
    job = _job(bootstrap, topic, out, "none", fmt, warehouse)
    if job.wait(timeout=600) != 0 and pyspark.__version__.startswith("4.1."):
        said = job.log.read_text()
        assert "tidemark.errors.SessionSetupError" in said and "SPARK-55271" in said, job.log
        job = _job(bootstrap, topic, out, "none", fmt, warehouse)
    _finish(job)


def _finish(job: subprocess.Popen) -> None:
    assert job.wait(timeout=600) == 0, f"the job failed; see {job.args[4]}/../job-*.log"


def _table(spark, fmt: str, out: Path, topic: str, table: str):
    if fmt == "parquet":
        return spark.read.parquet(str(out / table))
    if fmt == "delta":
        return spark.read.format("delta").load(str(out / table))
    return spark.table(iceberg_name(topic, table))


def _batch_written(spark, fmt: str, out: Path, topic: str, batch: int) -> bool:
    """Whether the sessions table holds batch ``batch``."""
    if fmt == "parquet":
        return (out / "sessions" / f"batch_id={batch}").exists()
    if fmt == "delta":  # the commit's txn action: {"txn":{"appId":...,"version":1,...}}
        log = (out / "sessions" / "_delta_log").glob("*.json")
        return any(f'"version":{batch},' in line for f in log for line in
                   f.read_text().splitlines() if line.startswith('{"txn"'))  # fmt: skip
    snapshots = spark.table(f"{iceberg_name(topic, 'sessions')}.snapshots")
    return snapshots.where(F.col("summary")[BATCH_ID] == str(batch)).count() == 1


@pytest.mark.parametrize("fmt", ["parquet", "delta", "iceberg"])
def test_driver_killed_mid_stream_restarts_exactly_once(
    spark, bootstrap, topic, produce, tmp_path, warehouse, fmt
):
    require_format(fmt)
    name = topic(PARTITIONS)
    late = [(p, {"user": f"u{u}", "page": "late", "ts": T0 + u}) for p in range(PARTITIONS)
            for u in range(p, LATE_CLICKS, PARTITIONS)]  # fmt: skip
    produce(name, [*_clicks(), *late, (0, {"user": "_end", "page": "", "ts": END_OF_INPUT_MS})])
    out = tmp_path / "out"
    first = _job(bootstrap, name, out, "1", fmt, warehouse)
    try:
        deadline = time.monotonic() + 600
        while not (out / "_paused").exists():
            assert first.poll() is None, "the job ended before it was killed"
            assert time.monotonic() < deadline, "the job never reached batch 1"
            time.sleep(0.5)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    checkpoint = out / "checkpoint"
    assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    assert _batch_written(spark, fmt, out, name, 1)  # written, not committed: run again
    _restart(bootstrap, name, out, fmt, warehouse)

    sessions = _table(spark, fmt, out, name, "sessions")
    got = Counter(tuple(r)[:5] for r in sessions.collect())
    expected = _expected_sessions()
    assert sum(got.values()) == sum(expected.values()) == USERS + USERS // 10
    assert got - expected == Counter(), "duplicated or unexpected sessions"
    assert expected - got == Counter(), "lost sessions"
    late_rows = _table(spark, fmt, out, name, "late").collect()
    assert sorted(r.ts - T0 for r in late_rows) == list(range(LATE_CLICKS))  # each once
    dropped = _table(spark, fmt, out, name, "dropped").collect()
    committed = [int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()]
    assert len(dropped) == len(committed) >= 4  # one row per micro-batch
    assert sum(r.num_late_records_dropped for r in dropped) == 0
    if fmt == "parquet":
        assert sorted(r.batch_id for r in dropped) == sorted(committed)
