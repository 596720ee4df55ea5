"""The differential suite on a session whose Python workers are never reused
(``spark.python.worker.reuse=false``): every task runs in a fresh worker process, which
must rebuild the pipeline (assigner, trigger, evictor, key function, window function and
accumulators) from what Spark ships it alone, with nothing left in a module's globals by
an earlier task. Replay, BATCH and one streaming query (its state restored in a fresh
worker at every micro-batch) must each equal the engine harness.

The setting is a static Spark conf (``spark.conf.set`` refuses it with
CANNOT_MODIFY_CONFIG), so the session is a new one, in a process of its own, as
tests/support/connect_check.py does. Prints one JSON line ``FRESH-WORKER-RESULT [...]``: the
failures found (an empty list when every mode agrees).

Run by tests/spark/api/test_differential.py; by hand:
``python tests/support/fresh_worker_check.py <workdir> [seed]``.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import search_path  # noqa: E402

# Workers import the test modules by name (see conftest.py): before the JVM starts.
search_path.put_on_path()

import differential as d  # noqa: E402

BOUNDED = 20  # scenarios per bounded mode, one collect each
STREAMING = 6  # pipelines in the one streaming query
TASKS = 6


def fresh_worker_session() -> Any:
    from tidemark.spark.runtime.session import get_spark

    return get_spark(
        master="local[2]",
        app_name="tidemark-fresh-workers",
        conf={
            "spark.python.worker.reuse": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        },
    )


def workers_are_fresh(spark: Any) -> list[str]:
    """Each of ``TASKS`` tasks must have run in a process of its own."""
    pids = (
        spark.sparkContext.parallelize(range(TASKS), TASKS)
        .mapPartitions(lambda _: [os.getpid()])
        .collect()
    )
    if len(set(pids)) == TASKS:
        return []
    return [f"worker reuse is still on: {TASKS} tasks ran in processes {sorted(set(pids))}"]


def bounded(spark: Any, seed: int) -> list[str]:
    failures = []
    rng = random.Random(seed)
    for replay in (True, False):
        chosen = [d.random_scenario(rng, i) for i in range(BOUNDED)]
        reference = d.reference_replay if replay else d.reference_batch
        for scenario, got in zip(chosen, d.run_spark(spark, chosen, replay)):
            diff = d.describe_difference(scenario, reference(scenario), got)
            if diff:
                failures.append(("replay " if replay else "BATCH ") + diff)
    return failures


def streaming(spark: Any, workdir: Path, seed: int) -> list[str]:
    chosen, batches = d.random_streaming_scenarios(random.Random(seed), STREAMING)
    outcomes = d.run_streaming(spark, chosen, batches, workdir / "stream")
    return [
        "streaming " + diff
        for scenario, got in zip(chosen, outcomes)
        if (diff := d.describe_difference(scenario, d.reference_streaming(scenario, batches), got))
        is not None
    ]


def main() -> None:
    workdir = Path(sys.argv[1])
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    spark = fresh_worker_session()
    try:
        failures = workers_are_fresh(spark)
        failures += bounded(spark, seed)
        failures += streaming(spark, workdir, seed)
    finally:
        spark.stop()
    print("FRESH-WORKER-RESULT " + json.dumps(failures), flush=True)


if __name__ == "__main__":
    main()
