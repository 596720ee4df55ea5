"""What a micro-batch costs Spark's stateful operators that do nothing: the fixed cost
under any streaming query on this machine, and what PySpark's Python operators add per
row before any window logic.

Each side streams parquet files of ``--rows`` rows (``k`` long, ``ts`` long; one file a
micro-batch, 16 groups over 2 state partitions, as tidemark's key groups) through:

* **spark**: Spark's own ``groupBy(group, window).count()`` with a watermark;
* **apply**: ``applyInPandasWithState`` (tidemark's row layout), reading each call's
  frames and returning one row, no state;
* **tws**: ``transformWithStateInPandas`` (the deltas layout and chains), the same.

It prints each side's median micro-batch time after the first (the first is printed
apart: ``transformWithStateInPandas`` starts a Python process on the driver for it) and
its ratio to Spark's, alternating the sides ``--rounds`` times. The figures and what they
say: ``benchmarks/README.md`` ("Where target 5 stands").

Usage::

    python benchmarks/nexmark/operator_cost.py --rows 1000 --rounds 2
    python benchmarks/nexmark/operator_cost.py --rows 100000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

SIDES = ("spark", "apply", "tws")
FILES = 8


class Nothing(StatefulProcessor):
    """Reads a call's frames, returns one row, keeps no state."""

    def init(self, handle: Any) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        for _ in rows:
            pass
        yield pd.DataFrame({"g": [int(key[0])], "n": [0]})

    def close(self) -> None:
        pass


def nothing(key: Any, frames: Any, state: Any) -> Any:
    for _ in frames:
        pass
    yield pd.DataFrame({"g": [int(key[0])], "n": [0]})


def query(side: str, source: Any) -> Any:
    grouped = source.withColumn("g", (F.col("k") % 16).cast("int"))
    if side == "tws":
        return grouped.groupBy("g").transformWithStateInPandas(
            Nothing(), "g int, n long", "append", "None"
        )
    if side == "apply":
        return grouped.groupBy("g").applyInPandasWithState(
            nothing, "g int, n long", "n long", "append", GroupStateTimeout.NoTimeout
        )
    timed = grouped.withColumn("t", F.timestamp_millis("ts")).withWatermark("t", "1 second")
    return timed.groupBy("g", F.window("t", "10 seconds")).count()


def run_once(spark: Any, side: str, directory: str) -> tuple[int, list[int]]:
    """The first micro-batch's milliseconds and the others'."""
    source = spark.readStream.schema("k long, ts long").option("maxFilesPerTrigger", 1)
    writer = query(side, source.parquet(directory)).writeStream.foreachBatch(
        lambda df, batch_id: df.count()
    )
    handle = writer.option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True)
    running = handle.start()
    running.awaitTermination()
    progress = sorted(running.recentProgress, key=lambda p: p["batchId"])
    times = [p["durationMs"]["triggerExecution"] for p in progress if p["numInputRows"]]
    return times[0], times[1:]


def main() -> None:
    from tidemark.spark.session import get_spark

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000, help="rows per micro-batch")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    spark = get_spark(master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    directory = tempfile.mkdtemp(prefix="operator-cost-")
    for n in range(FILES):
        path = os.path.join(directory, f"{n:03d}.parquet")
        pd.DataFrame({"k": range(args.rows), "ts": [n * 1000] * args.rows}).to_parquet(path)
        stamp = time.time() - 100 + n  # the file source reads files in mtime order
        os.utime(path, (stamp, stamp))
    for side in SIDES:  # a warm-up of each
        run_once(spark, side, directory)
    medians: dict[str, list[float]] = {side: [] for side in SIDES}
    firsts: dict[str, list[int]] = {side: [] for side in SIDES}
    for _ in range(args.rounds):
        for side in SIDES:
            first, later = run_once(spark, side, directory)
            firsts[side].append(first)
            medians[side].append(statistics.median(later))
    print(f"{args.rows:,} rows a micro-batch, {FILES} micro-batches, {args.rounds} rounds")
    for side in SIDES:
        ratios = [s / t for s, t in zip(medians["spark"], medians[side], strict=True)]
        print(
            f"{side:<6} micro-batch {statistics.median(medians[side]):5.0f} ms "
            f"({min(medians[side]):.0f}-{max(medians[side]):.0f}), Spark's ÷ it "
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}); "
            f"first micro-batch {statistics.median(firsts[side]):.0f} ms"
        )


if __name__ == "__main__":
    main()
