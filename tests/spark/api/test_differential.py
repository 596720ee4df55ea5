"""Randomized differential suite: every Spark mode equals the engine harness.

Each scenario (:mod:`differential`) is a random pipeline over a random stream of many
keys. Replay and BATCH run many scenarios per Spark job (the union of their outputs is
collected once); the results, with the watermark before each firing, the late side
output and the dropped count, must equal the harness fed the same input under the
mode's semantics. A seeded sample runs in ``make test``; ``make test-slow`` runs several
hundred scenarios per mode, and a sample of every mode again on a session whose Python
workers are never reused (tests/support/fresh_worker_check.py). Set ``TIDEMARK_DIFFERENTIAL_SEED``
to hunt with other seeds.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import differential as d
import pytest
import spark_transcripts as st
from transcript import load_transcripts

from tidemark._engine.create import SlicedWindowOperator
from tidemark.spark.plan import FAST_PATHS_CONF

pytestmark = pytest.mark.spark

SEED = int(os.environ.get("TIDEMARK_DIFFERENTIAL_SEED", "12"))
QUICK = 12  # scenarios per mode in make test, one collect each
SLOW_CHUNKS, CHUNK = 8, 40  # 320 scenarios per mode in make test-slow
STREAM_QUICK = 3  # pipelines in the one streaming query of make test
# 300 streaming pipelines in make test-slow: a query runs many (Spark's cost per query
# and per micro-batch dominates); measured 4-8 min per 12-pipeline query on 2 cores
# shared with other Spark jobs
STREAM_QUERIES, STREAM_PIPELINES = 20, 15


def scenarios(seed: int, count: int) -> list[dict]:
    rng = random.Random(seed)
    return [d.random_scenario(rng, i) for i in range(count)]


def check(spark, chosen: list[dict], replay: bool) -> None:
    outcomes = d.run_spark(spark, chosen, replay)
    reference = d.reference_replay if replay else d.reference_batch
    failures = [
        diff
        for scenario, got in zip(chosen, outcomes)
        if (diff := d.describe_difference(scenario, reference(scenario), got)) is not None
    ]
    assert not failures, f"{len(failures)} of {len(chosen)} differ:\n" + "\n".join(failures)


def test_generator_covers_the_vocabulary():
    chosen = scenarios(SEED, QUICK * 20)
    assigners = {s["assigner"]["type"] for s in chosen}
    triggers = {(s["trigger"] or {}).get("type") for s in chosen}
    functions = {s["function"] for s in chosen}
    assert assigners == {"tumbling", "sliding", "session", "dynamic", "global", "count"}
    assert {"event", "count", "purging", "continuous", "delta", "custom", None} <= triggers
    assert functions == {
        "process",
        "reduce",
        "aggregate",
        "reduce_process",
        "aggregate_process",
        *d.SHORTHANDS,
    }
    keys = {json.dumps(s["key"]) for s in chosen}
    assert keys == {
        "null",
        *(json.dumps({"function": f}) for f in d.KEY_FUNCTIONS),
        *(json.dumps({"columns": c}) for c in (["key"], ["key", "v"], ["v", "key"])),
    }
    assert any(s["rows"][0][2] < 0 for s in chosen)
    assert any(s["assigner"].get("offset", 0) < 0 for s in chosen)


@pytest.fixture(params=[True, False], ids=["fast-paths", "no-fast-paths"])
def fast_paths(request, spark):
    """Spark runs with the fast paths (sliced sliding windows among them) on, then off
    (``spark.tidemark.fastPaths=false``: the general operator); the reference harness
    keeps them on, so the second run also checks the fast paths against the general
    operator on Spark."""
    spark.conf.set(FAST_PATHS_CONF, "true" if request.param else "false")
    yield request.param
    spark.conf.unset(FAST_PATHS_CONF)


def test_differential_replay_sample(spark, fast_paths):
    check(spark, scenarios(SEED, QUICK), replay=True)


def test_differential_batch_sample(spark, fast_paths):
    check(spark, scenarios(SEED + 1, QUICK), replay=False)


# ------------------------------------------------- sliced sliding windows

SLICED = 8  # scenarios per mode whose sliding windows the sliced operator serves


def is_sliced(scenario: dict) -> bool:
    """Sliding windows (size > slide) with the default or event-time trigger and no
    evictor, over all elements (a process function): the sliced operator's pipelines
    (incremental functions are sliced only with ``spark.tidemark.sliceIncremental``)."""
    assigner, trigger = scenario["assigner"], scenario["trigger"]
    return (
        assigner["type"] == "sliding"
        and assigner["size"] != assigner["slide"]
        and (trigger is None or trigger["type"] == "event")
        and scenario["evictor"] is None
        and scenario["function"] == "process"
    )


def sliced_scenarios(seed: int, count: int) -> list[dict]:
    rng, found, index = random.Random(seed), [], 0
    while len(found) < count:
        scenario = d.random_scenario(rng, index)
        index += 1
        if is_sliced(scenario):
            found.append(scenario)
    assert all(isinstance(d.harness(s).operator, SlicedWindowOperator) for s in found)
    return found


def test_differential_sliced_replay(spark, fast_paths):
    check(spark, sliced_scenarios(SEED * 7, SLICED), replay=True)


def test_differential_sliced_batch(spark, fast_paths):
    check(spark, sliced_scenarios(SEED * 7 + 1, SLICED), replay=False)


def test_differential_sliced_streaming(spark, tmp_path, fast_paths):
    """Sliced pipelines of one stream (their slices pickled with each key's state
    between micro-batches)."""
    (stream,), batches = d.random_streaming_scenarios(random.Random(SEED * 7 + 2), 1)
    picked = sliced_scenarios(SEED * 7 + 3, STREAM_QUICK)
    for scenario in picked:  # one stream, as random_streaming_scenarios makes them
        scenario["out_of_orderness"], scenario["rows"] = stream["out_of_orderness"], stream["rows"]
    check_streamed(spark, tmp_path, picked, batches)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_CHUNKS))
def test_differential_replay_many(spark, chunk):
    check(spark, scenarios(SEED * 1000 + chunk, CHUNK), replay=True)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_CHUNKS))
def test_differential_batch_many(spark, chunk):
    check(spark, scenarios(SEED * 2000 + chunk, CHUNK), replay=False)


def check_streaming(spark, tmp_path, seed: int, count: int) -> None:
    chosen, batches = d.random_streaming_scenarios(random.Random(seed), count)
    check_streamed(spark, tmp_path, chosen, batches)


def check_streamed(spark, tmp_path, chosen: list[dict], batches: list[list[tuple]]) -> None:
    """``chosen`` pipelines streamed in one query over ``batches`` equal the engine."""
    outcomes = d.run_streaming(spark, chosen, batches, tmp_path)
    failures = [
        diff
        for scenario, got in zip(chosen, outcomes)
        if (diff := d.describe_difference(scenario, d.reference_streaming(scenario, batches), got))
        is not None
    ]
    cut = f"micro-batches {[len(b) for b in batches]}"
    assert not failures, f"{len(failures)} of {len(chosen)} differ ({cut}):\n" + "\n".join(failures)


def test_differential_streaming_sample(spark, tmp_path, fast_paths):
    check_streaming(spark, tmp_path, SEED, STREAM_QUICK)


@pytest.mark.slow
@pytest.mark.parametrize("query", range(STREAM_QUERIES))
def test_differential_streaming_many(spark, tmp_path, query):
    check_streaming(spark, tmp_path, SEED * 3000 + query, STREAM_PIPELINES)


# ------------------------------------------------- fresh Python workers

FRESH_WORKERS = Path(__file__).parents[2] / "support/fresh_worker_check.py"


@pytest.mark.slow
def test_differential_with_fresh_python_workers(tmp_path):
    """Replay, BATCH and a streaming query on a session with ``spark.python.worker.reuse
    =false``: functions, triggers, key functions and accumulators restored in a fresh
    worker process for every task. A static conf: its own session, in a child process
    (measured: 5-8 min on 2 shared cores, most of it the streaming query)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(FRESH_WORKERS), str(tmp_path), str(SEED)],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("FRESH-WORKER-RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    failures = json.loads(lines[-1].removeprefix("FRESH-WORKER-RESULT "))
    assert failures == [], "\n".join(failures)


# ------------------------------------------------- what the suite found, as transcripts

FOUND = [c for c in load_transcripts() if c.file == "replay_timers.yaml"]


@pytest.mark.parametrize("case", FOUND, ids=[c.name for c in FOUND])
def test_found_transcript_on_spark_replay(spark, case):
    df = spark.createDataFrame(st.element_rows(case), st.SCHEMA)
    results, late = st.spark_results(st.spark_pipeline(case, df, replay=True), case)
    want_results, want_late, _ = st.engine_replay(case)
    assert results == want_results
    assert late == want_late
