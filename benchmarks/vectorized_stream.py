"""The stream of ``benchmarks/vectorized.py --stream``: a keyed mean per 1-minute window,
tidemark's streaming ``aggregate_vectorized(np.mean)`` beside Spark's own
``withWatermark`` + ``groupBy(window).agg(avg)``, same parquet files (one micro-batch
each, ``availableNow``), alternated.

The events are ``vectorized.py``'s, BATCHES x ROWS of them (5 s of disorder: the
watermark is the largest timestamp minus 5 s, so none is late). Both queries leave the
last windows open (no end-of-input marker). Before timing, the windows each query
emitted are checked equal to Spark's BATCH ``avg`` over the same events (exact: integer
amounts). Prints events/s over each query's wall time (start-up included) and the ratio.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import tidemark as tm
from tidemark.spark.runtime.session import get_spark

# Spark's Python workers import this module by name (its `mean`): give them its directory
_HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_HERE, os.environ.get("PYTHONPATH")) if p)

DISORDER_MS = 5_000


def mean(values: np.ndarray) -> float:
    return float(np.mean(values))


def write_files(spark: Any, events: Any, directory: Path, batches: int, rows: int) -> None:
    """One parquet file per micro-batch, in time order (the file source reads the
    oldest first)."""
    staging = directory.parent / (directory.name + "-staging")
    directory.mkdir()
    for n in range(batches):
        events(spark, rows, first=n * rows).coalesce(1).write.parquet(str(staging / str(n)))
        (written,) = (staging / str(n)).glob("*.parquet")
        target = directory / f"batch-{n:04d}.parquet"
        shutil.move(str(written), target)
        os.utime(target, (1_000_000 + n, 1_000_000 + n))
    shutil.rmtree(staging, ignore_errors=True)


def _source(spark: Any, directory: Path) -> Any:
    reader = spark.readStream.schema("user string, amount long, ts long")
    return reader.option("maxFilesPerTrigger", 1).parquet(str(directory))


def start_spark(spark: Any, directory: Path, checkpoint: Path, sink: Any) -> Any:
    from pyspark.sql import functions as F

    events = _source(spark, directory).withColumn("event_time", F.timestamp_millis("ts"))
    aggregated = (
        events.withWatermark("event_time", f"{DISORDER_MS + 1} milliseconds")
        .groupBy("user", F.window("event_time", "1 minute"))
        .agg(F.avg("amount").alias("value"))
        .select("user", F.unix_millis("window.start").alias("window_start"), "value")
    )
    writer = aggregated.writeStream.outputMode("append").foreachBatch(sink)
    writer = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    return writer.start()


def start_tidemark(spark: Any, directory: Path, checkpoint: Path, sink: Any) -> Any:
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(DISORDER_MS)
    stream = tm.from_dataframe(  # the events start at the epoch: a shifted clock
        _source(spark, directory),
        timestamp="ts",
        watermark_strategy=strategy,
        shift_spark_clock=True,
    )
    windows = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(60_000))
    result = windows.aggregate_vectorized(mean, fields=["amount"])
    return result.write_outputs(
        {"main": sink}, checkpoint=str(checkpoint), trigger={"availableNow": True}
    )


def run_once(spark: Any, start: Any, directory: Path, keep: bool) -> tuple[float, list[Any]]:
    """Wall time of one query over the files, and its rows when ``keep``."""
    rows: list[Any] = []

    def sink(df: Any, batch_id: int) -> None:
        if keep:
            rows.extend(df.select("user", "window_start", "value").collect())
        else:
            df.write.format("noop").mode("overwrite").save()

    checkpoint = Path(tempfile.mkdtemp(prefix="tm-vec-ckpt-"))
    try:
        began = time.perf_counter()
        query = start(spark, directory, checkpoint, sink)
        query.awaitTermination()
        return time.perf_counter() - began, rows
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def run_stream(batches: int, rounds: int, rows: int, events: Any) -> None:
    spark = get_spark()
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="tm-vec-stream-"))
    directory = root / "in"
    try:
        write_files(spark, events, directory, batches, rows)
        total = batches * rows
        print(f"stream: {batches} micro-batches x {rows:,} events, 2,000 keys, 1-minute windows")
        expected = _expected(spark, events, total)
        sides = {"Spark": start_spark, "tidemark": start_tidemark}
        for name, start in sides.items():
            _, emitted = run_once(spark, start, directory, keep=True)
            _check(name, emitted, expected)
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(rounds):
            for name, start in sides.items():
                times[name].append(run_once(spark, start, directory, keep=False)[0])
        for name, runs in times.items():
            shown = ", ".join(f"{t:.1f}" for t in runs)
            print(f"  {name:9} best {min(runs):6.1f} s  {total / min(runs):9,.0f} ev/s  ({shown})")
        best = min(times["Spark"]) / min(times["tidemark"])
        median = statistics.median(times["Spark"]) / statistics.median(times["tidemark"])
        print(f"  tidemark events/s / Spark's: best {best:.2f}x, median {median:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _expected(spark: Any, events: Any, total: int) -> dict[tuple[str, int], float]:
    from pyspark.sql import functions as F

    grouped = events(spark, total).groupBy("user", F.window(F.timestamp_millis("ts"), "1 minute"))
    rows = grouped.agg(F.avg("amount").alias("value")).select(
        "user", F.unix_millis("window.start").alias("window_start"), "value"
    )
    return {(r.user, r.window_start): r.value for r in rows.collect()}


def _check(name: str, emitted: list[Any], expected: dict[tuple[str, int], float]) -> None:
    got = {(r.user, r.window_start): r.value for r in emitted}
    wrong = [k for k, v in got.items() if expected.get(k) != v]
    if wrong or len(got) != len(emitted) or not got:
        raise SystemExit(f"{name}: {len(wrong)} of {len(got)} windows differ from BATCH avg")
    print(f"  checked {name}: {len(got):,} windows emitted, each equal to Spark's BATCH avg")
