"""The driver of tests/spark/runtime/test_cluster.py: tidemark shipped to executors whose Python lacks
tidemark, on a standalone cluster or over Spark Connect. Prints one JSON line
``CLUSTER-RESULT {...}``: the failures found (none when everything holds) and notes
(what was killed, durations).

``python tests/support/cluster_check.py <master> <dist zip> <workdir> <worker pids as JSON>``, or
``python tests/support/cluster_check.py connect``; ``PYSPARK_PYTHON`` is the workers' (bare)
Python. tidemark is imported from this checkout's ``src`` through ``sys.path``, not
``PYTHONPATH``: a local Connect server's JVM would hand that on to its Python workers.

The window function is defined here, in ``__main__``, so it is pickled by value: the
workers need nothing of this file, only tidemark (for the base class and the engine).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import tidemark as tm  # noqa: E402
from tidemark.errors import SessionSetupError  # noqa: E402
from tidemark.spark.runtime.preflight import ensure_workers_import_tidemark  # noqa: E402
from tidemark.spark.runtime.session import get_spark  # noqa: E402
from tidemark.spark.streaming import END_OF_INPUT_MS  # noqa: E402

USERS = ("ann", "bob", "cyd")
FILES = 10
WINDOW_MS = 10_000
SCHEMA = "user string, ts long"
OUTPUT = "user string, start long, end long, n long"
QUERY_TIMEOUT_S = 600


class CountPerWindow(tm.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[tuple]:
        window = context.window()
        yield (key, window.start, window.end, sum(1 for _ in elements))


def batch_rows(index: int) -> list[tuple[str, int]]:
    """File ``index``: 12 events in ``[5000 * index, 5000 * (index + 1))``, in order."""
    return [(USERS[(index + n) % 3], 5000 * index + 400 * n) for n in range(12)]


def expected() -> set[tuple]:
    counts: dict[tuple, int] = {}
    for index in range(FILES):
        for user, ts in batch_rows(index):
            start = ts - ts % WINDOW_MS
            counts[(user, start)] = counts.get((user, start), 0) + 1
    return {(u, s, s + WINDOW_MS, n) for (u, s), n in counts.items()}


def session(master: str, name: str) -> Any:
    conf = {
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.driver.memory": "768m",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    return get_spark(master=master, app_name=name, conf=conf)


def probe_fails(spark: Any) -> list[str]:
    try:
        ensure_workers_import_tidemark(spark)
    except SessionSetupError as exc:
        ok = "cannot import 'tidemark'" in str(exc) and "ship_to_executors" in str(exc)
        return [] if ok else [f"the probe failed with another message: {exc}"]
    return ["the probe passed before tidemark was shipped: the workers' Python has it"]


def run_batch(spark: Any, what: str) -> tuple[list[str], set[tuple]]:
    rows = [r for i in range(FILES) for r in batch_rows(i)]
    stream = tm.from_dataframe(spark.createDataFrame(rows, SCHEMA), timestamp="ts")
    result = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
    got = {tuple(r) for r in result.process(CountPerWindow(), OUTPUT).to_dataframe().collect()}
    return ([] if got == expected() else [f"BATCH ({what}): {sorted(got ^ expected())}"]), got


def write_inputs(directory: Path) -> None:
    """One JSON file per micro-batch; the last also holds the end-of-input row."""
    directory.mkdir(parents=True)
    for index in range(FILES):
        rows = batch_rows(index) + ([("ann", END_OF_INPUT_MS)] if index == FILES - 1 else [])
        tmp = directory.parent / f".tmp-{index}.json"
        tmp.write_text("".join(json.dumps({"user": u, "ts": t}) + "\n" for u, t in rows))
        stamp = time.time() - 3600 + index  # the file source takes files by mtime
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, directory / f"batch-{index:03d}.json")


def executors_of(worker_pid: int) -> list[int]:
    """The executor JVMs a worker JVM started (its children running the backend)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == worker_pid and b"CoarseGrainedExecutorBackend" in cmdline:
            found.append(int(entry.name))
    return found


def kill_an_executor_mid_stream(query: Any, worker_pid: int, notes: dict[str, Any]) -> None:
    """Once the query has finished two micro-batches, ``kill -9`` the executor of one
    worker (its Python workers die with it)."""
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while time.monotonic() < deadline and query.isActive:
        progress = query.lastProgress
        if progress and progress["batchId"] >= 2:
            for pid in executors_of(worker_pid):
                os.kill(pid, signal.SIGKILL)
                notes.setdefault("killed", []).append(pid)
            notes["killed_after_batch"] = progress["batchId"]
            notes["trigger_active_at_kill"] = query.status["isTriggerActive"]
            return
        time.sleep(0.2)


def run_streaming(spark: Any, workdir: Path, worker_pid: int, notes: dict) -> list[str]:
    write_inputs(workdir / "in")
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(0)
    stream = tm.from_dataframe(
        source.json(str(workdir / "in")), timestamp="ts", watermark_strategy=strategy
    )
    windowed = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
    result = windowed.process(CountPerWindow(), OUTPUT)
    out = str(workdir / "out")

    def sink(df: Any, batch_id: int) -> None:  # overwritten when a batch is retried
        df.write.mode("overwrite").parquet(f"{out}/batch={batch_id}")

    query = result.write_outputs(
        {"main": sink}, str(workdir / "checkpoint"), trigger={"availableNow": True}
    )
    killer = threading.Thread(target=kill_an_executor_mid_stream, args=(query, worker_pid, notes))
    killer.start()
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        if query.isActive:
            query.stop()
        killer.join(timeout=60)
    if not finished:
        return [f"the streaming query did not end in {QUERY_TIMEOUT_S} s"]
    if query.exception() is not None:
        return [f"the streaming query failed: {query.exception()}"]
    failures = [] if notes.get("killed") else ["no executor was killed mid-stream"]
    rows = spark.read.parquet(out).drop("batch").collect()
    # the end-of-input row's own window (9999-12-31) is not data
    got = sorted(tuple(r) for r in rows if r["start"] < END_OF_INPUT_MS - WINDOW_MS)
    if got != sorted(expected()):
        failures.append(f"streaming after a lost executor: got {got}, want {sorted(expected())}")
    return failures


def main(master: str, dist_zip: str, workdir: str, worker_pids: list[int]) -> None:
    failures: list[str] = []
    notes: dict[str, Any] = {}
    begin = time.monotonic()
    spark = session(master, "tidemark-cluster-dist-zip")
    failures += probe_fails(spark)
    notes["probe_s"] = round(time.monotonic() - begin)
    spark.sparkContext.addPyFile(dist_zip)  # what `--py-files dist/...zip` does
    ensure_workers_import_tidemark(spark)
    failures += run_batch(spark, "make dist's zip, addPyFile")[0]
    tm.ship_to_executors(spark)  # as well: its zip must not clash with the one added
    failures += run_batch(spark, "make dist's zip and tm.ship_to_executors")[0]
    spark.stop()
    notes["dist_zip_s"] = round(time.monotonic() - begin)

    begin = time.monotonic()
    spark = session(master, "tidemark-cluster-helper")
    failures += probe_fails(spark)
    notes["shipped"] = os.path.basename(tm.ship_to_executors(spark))
    failures += run_batch(spark, "tm.ship_to_executors")[0]
    notes["helper_s"] = round(time.monotonic() - begin)
    begin = time.monotonic()
    failures += run_streaming(spark, Path(workdir), worker_pids[0], notes)
    notes["streaming_s"] = round(time.monotonic() - begin)
    spark.stop()
    print("CLUSTER-RESULT " + json.dumps({"failures": failures, "notes": notes}))


def main_connect() -> None:
    """A local Spark Connect server whose Python workers lack tidemark: the helper ships
    it as a Python artifact of the session."""
    from pyspark.sql import SparkSession

    from tidemark.spark.runtime._java import ensure_java

    ensure_java()
    builder = SparkSession.builder.remote("local[2]")
    spark = builder.config("spark.sql.shuffle.partitions", "2").getOrCreate()
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    failures = probe_fails(spark)
    shipped = tm.ship_to_executors(spark)
    failures += [] if tm.ship_to_executors(spark) == shipped else ["shipped twice"]
    failures += run_batch(spark, "Spark Connect, tm.ship_to_executors")[0]
    spark.stop()
    print("CLUSTER-RESULT " + json.dumps({"failures": failures, "notes": {}}))


if __name__ == "__main__":
    if sys.argv[1:] == ["connect"]:
        main_connect()
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
