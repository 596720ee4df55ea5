"""What PySpark's Python stateful operators cost on Nexmark's streams before any window
logic: the floor under any per-element Python implementation, beside Spark's own query.

For each query's stream (``--queries``; parquet files of ``--batch-rows`` bids read one per
micro-batch, as ``run.py`` streams them), three queries run in one process, alternated:

* **Spark**: the query in Spark's own SQL (``queries.spark_query``);
* **floor**: the same bids through the Python stateful operator tidemark runs that
  query in, doing the least a per-element operator can: grouped by a key group of the
  query's key (two groups, as tidemark's default on two state partitions; one for a
  non-keyed window), each call reads its rows into Python once (a count per key from
  the key column and the timestamps), keeps one state row and emits one row. q7 and q11
  run in ``applyInPandasWithState``; q5, a chain in tidemark, in one
  ``transformWithStateInPandas`` (its first window only: tidemark runs two);
* **tidemark**: the query in tidemark (``queries.tidemark_query``).

It prints each one's events/s and its ratio to Spark's, the median of the rounds and
their range. A floor ratio near or under a target says what no Python window operator on
this operator can reach, whatever its engine does.

Usage::

    python benchmarks/nexmark/floor.py [--events 200000] [--batch-rows 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexmark.generator import GeneratorConfig  # noqa: E402
from nexmark.queries import spark_query, tidemark_query  # noqa: E402
from nexmark.run import CountingSink, write_inputs  # noqa: E402
from tidemark.spark.session import get_spark  # noqa: E402

KEYS = {"q5": "auction", "q7": None, "q11": "bidder"}
OUTPUT = "group int, rows long"


def count_rows(frames: Iterator[pd.DataFrame], key: str | None) -> int:
    """Each row read into Python once: a count per (key, 2 s of event time)."""
    counts: Counter[tuple[Any, int]] = Counter()
    for pdf in frames:
        keys = pdf[key].tolist() if key else [None] * len(pdf)
        counts.update(zip(keys, (t // 2_000 for t in pdf["date_time"].tolist())))
    return sum(counts.values())


def floor_function(key: str | None) -> Any:
    """The ``applyInPandasWithState`` function of the floor."""

    def call(group: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Any:
        rows = count_rows(frames, key) + (state.get[0] if state.exists else 0)
        state.update((rows,))
        state.setTimeoutTimestamp(max(state.getCurrentWatermarkMs(), 0) + 3_600_000)
        yield pd.DataFrame({"group": [group[0]], "rows": [rows]})

    return call


class FloorProcessor(StatefulProcessor):
    """The ``transformWithStateInPandas`` processor of the floor (q5)."""

    def __init__(self, key: str | None):
        self._key = key

    def init(self, handle: Any) -> None:
        self._rows = handle.getValueState("rows", "rows long")

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        seen = self._rows.get()
        total = count_rows(rows, self._key) + (seen[0] if seen else 0)
        self._rows.update((total,))
        yield pd.DataFrame({"group": [key[0]], "rows": [total]})

    def close(self) -> None:
        pass


def floor_query(query: str, stream: Any, disorder_ms: int) -> Any:
    """The floor's streaming DataFrame for ``query`` (see the module docstring)."""
    key = KEYS[query]
    events = stream.withColumn("ts", F.timestamp_millis("date_time")).withWatermark(
        "ts", f"{disorder_ms} milliseconds"
    )
    group = F.pmod(F.hash(key), F.lit(2)) if key else F.lit(0)
    grouped = events.withColumn("group", group.cast("int")).groupBy("group")
    if query == "q5":
        return grouped.transformWithStateInPandas(
            FloorProcessor(key), OUTPUT, "append", "EventTime"
        )
    return grouped.applyInPandasWithState(
        floor_function(key), OUTPUT, "rows long", "append", GroupStateTimeout.EventTimeTimeout
    )


def run_once(side: str, query: str, spark: Any, root: Path, disorder_ms: int) -> float:
    """Seconds for one streaming run of ``side`` over the stream files."""
    stream = (
        spark.readStream.schema(spark.read.parquet(str(root / "bids")).schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(root / "stream"))
    )
    checkpoint = tempfile.mkdtemp(prefix=f"ck-{side}-{query}-", dir=root)
    trigger = {"availableNow": True}
    started = time.perf_counter()
    if side == "tidemark":
        result = tidemark_query(query, stream, disorder_ms)
        handle = result.write_outputs({"main": CountingSink()}, checkpoint, trigger)
    else:
        frame = spark_query if side == "spark" else floor_query
        writer = frame(query, stream, disorder_ms).writeStream.outputMode("append")
        writer = writer.foreachBatch(CountingSink()).option("checkpointLocation", checkpoint)
        handle = writer.trigger(**trigger).start()
    handle.awaitTermination()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", default="q5,q7,q11")
    args = parser.parse_args()
    config = GeneratorConfig()
    spark = get_spark(master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    root = Path(tempfile.mkdtemp(prefix="nexmark-floor-"))
    write_inputs(root, args.events, args.batch_rows, config)
    sides = ("spark", "floor", "tidemark")
    print(f"{args.events:,} bids, {args.batch_rows:,} a micro-batch, {args.rounds} rounds")
    for query in args.queries.split(","):
        for side in sides:  # a warm-up of each
            run_once(side, query, spark, root, config.max_disorder_ms)
        seconds: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side in sides:
                seconds[side].append(run_once(side, query, spark, root, config.max_disorder_ms))
        cells = []
        for side in sides[1:]:
            ratios = [s / o for s, o in zip(seconds["spark"], seconds[side], strict=True)]
            cells.append(
                f"{side} {args.events / statistics.median(seconds[side]):>8,.0f} ev/s "
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            )
        spark_rate = args.events / statistics.median(seconds["spark"])
        print(f"{query:<4} Spark {spark_rate:>8,.0f} ev/s | " + " | ".join(cells))


if __name__ == "__main__":
    main()
