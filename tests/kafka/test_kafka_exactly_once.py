"""kill -9 of the driver mid-stream, reading Kafka: every result in the tables exactly once.

The docs' example (``docs/examples/kafka_sessions.py``: sessions per user on
per-partition watermarks, each output to a Parquet table by batch id) runs in a driver
process of its own (``kafka_job.py``) over 20,000 users in a topic of four partitions,
several micro-batches; after the clicks the topic holds 200 late ones (event times of the
first second, behind the watermark from the second micro-batch on) and the end of input.
The test kills the driver with SIGKILL right after the main table's sink wrote batch 1
and before Spark recorded that batch, then restarts it from the checkpoint to the end.
The tables then hold every session once (0 lost, 0 duplicated), every late click once
in the late table, and one dropped-count row per micro-batch.

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

import pytest

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


def _job(bootstrap: str, topic: str, out: Path, pause: str) -> subprocess.Popen:
    script = Path(__file__).with_name("kafka_job.py")
    log = open(out.parent / f"job-{pause}-{time.monotonic_ns()}.log", "w")
    return subprocess.Popen(
        [sys.executable, str(script), bootstrap, topic, str(out), pause],
        env=dict(os.environ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _finish(job: subprocess.Popen) -> None:
    assert job.wait(timeout=600) == 0, f"the job failed; see {job.args[4]}/../job-*.log"


def test_driver_killed_mid_stream_restarts_exactly_once(spark, bootstrap, topic, produce, tmp_path):
    name = topic(PARTITIONS)
    late = [(p, {"user": f"u{u}", "page": "late", "ts": T0 + u}) for p in range(PARTITIONS)
            for u in range(p, LATE_CLICKS, PARTITIONS)]  # fmt: skip
    produce(name, [*_clicks(), *late, (0, {"user": "_end", "page": "", "ts": END_OF_INPUT_MS})])
    out = tmp_path / "out"
    first = _job(bootstrap, name, out, pause="1")
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
    assert (out / "sessions" / "batch_id=1").exists()  # written, not committed: run again
    _finish(_job(bootstrap, name, out, pause="none"))

    sessions = spark.read.parquet(str(out / "sessions"))
    got = Counter(tuple(r)[:5] for r in sessions.drop("batch_id").collect())
    expected = _expected_sessions()
    assert sum(got.values()) == sum(expected.values()) == USERS + USERS // 10
    assert got - expected == Counter(), "duplicated or unexpected sessions"
    assert expected - got == Counter(), "lost sessions"
    late_rows = spark.read.parquet(str(out / "late")).collect()
    assert sorted(r.ts - T0 for r in late_rows) == list(range(LATE_CLICKS))  # each once
    dropped = spark.read.parquet(str(out / "dropped")).collect()
    batches = [r.batch_id for r in dropped]
    assert len(batches) == len(set(batches)) >= 4  # one row per micro-batch
    assert sum(r.num_late_records_dropped for r in dropped) == 0
