"""Watching a query: tidemark's figures from a listener, from ``lastProgress`` and from
a bounded run. The guide: ``docs/watching.md``.

Clicks per page, 5-second windows, read from JSON files, one file per micro-batch: a
late click, then the end-of-input row, which closes the last windows. A listener prints
each micro-batch's figures and the keys and windows in state; then the same clicks,
bounded and replayed in arrival order, give the run's summary.

Run: ``python docs/examples/watching_a_query.py`` (local Spark).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

import tidemark as tm
from tidemark.spark import StateTotals, metrics_of
from tidemark.spark.streaming import END_OF_INPUT_MS

NOON = 1590292800000
BATCHES = [
    [("home", 0), ("cart", 1), ("home", 4), ("home", 5), ("buy", 7)],
    [("buy", 3), ("cart", 6), ("buy", 8), ("home", 9)],  # buy at :03 comes too late
    [("_end", END_OF_INPUT_MS - NOON)],  # the end of the input
]


class Printer(StreamingQueryListener):
    """Prints tidemark's figures of every micro-batch, with the state they add up to."""

    def __init__(self):
        self.state = StateTotals()
        self.batches = 0

    def onQueryStarted(self, event):  # noqa: N802
        pass

    def onQueryProgress(self, event):  # noqa: N802
        figures = metrics_of(event.progress)
        if figures is None:
            return
        keys, windows = self.state.add(figures)
        self.batches += 1
        print(
            f"batch {event.progress.batchId}: watermark {figures['watermark']}, "
            f"{figures['num_records_in']} in, {figures['num_records_out']} out, "
            f"{figures['num_late_records_side_output']} late to the side output, "
            f"{figures['num_late_records_dropped']} dropped; in state: {keys} keys, "
            f"{windows} windows"
        )

    def onQueryIdle(self, event):  # noqa: N802
        pass

    def onQueryTerminated(self, event):  # noqa: N802
        pass


def write_files(directory: str) -> None:
    for n, batch in enumerate(BATCHES):
        path = os.path.join(directory, f"clicks-{n}.json")
        with open(path, "w") as f:
            f.writelines(json.dumps({"page": p, "ts": NOON + s * 1000}) + "\n" for p, s in batch)
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source reads by mtime


def clicks_per_page(stream, **source):
    return (
        tm.from_dataframe(
            stream,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
            **source,
        )
        .key_by("page")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
        .side_output_late_data(tm.OutputTag("late"))
        .sum("ts")
    )


def main(root: str) -> None:
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    os.makedirs(os.path.join(root, "in"), exist_ok=True)
    write_files(os.path.join(root, "in"))
    stream = spark.readStream.schema("page string, ts long").option("maxFilesPerTrigger", 1)
    printer = Printer()
    spark.streams.addListener(printer)
    query = clicks_per_page(stream.json(os.path.join(root, "in"))).write_outputs(
        {"main": lambda df, batch_id: df.collect()},
        checkpoint=os.path.join(root, "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination()
    deadline = time.monotonic() + 30  # the listener runs on Spark's listener thread
    while printer.batches < len(query.recentProgress) and time.monotonic() < deadline:
        time.sleep(0.1)
    spark.streams.removeListener(printer)
    print("last micro-batch:", query.lastProgress["observedMetrics"]["tidemark"])

    rows = [(p, NOON + s * 1000, n) for n, (p, s) in enumerate(sum(BATCHES[:2], []))]
    bounded = spark.createDataFrame(rows, "page string, ts long, arrival long")
    print("replayed:", clicks_per_page(bounded, order_by="arrival").metrics())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tidemark-watch-"))
