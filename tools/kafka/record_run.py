"""Record the run that ``docs/kafka.md`` draws: a real Kafka topic, a real streaming query.

Three sensors, one per partition of a topic; partition 2 lags the others by 10 s, more
than the 2-second bound. Each micro-batch is one production followed by a query run
(``availableNow`` from the checkpoint), the same stream read twice: with per-partition
watermarks (Flink's Kafka source) and with Spark's one watermark. What the runs gave (the
rows each batch read, the results and late rows the sinks got, the watermark tidemark's
figures report for each batch) becomes a timeline trace per run, in
``docs/examples/kafka_runs.json``, which the docs build draws. Each partition's own
watermark is computed from the rows it delivered (``max_ts(p) - bound - 1``), which is
what the query's branch for that partition holds.

    make kafka-setup && .venv/bin/python tools/kafka/record_run.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import tidemark as tm
from tidemark.spark.io.kafka import read_kafka
from tidemark.spark.runtime.session import get_spark
from tidemark.spark.streaming import END_OF_INPUT_MS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE)]
import broker  # noqa: E402
import jars  # noqa: E402  (tools/kafka/jars.py)

BOUND_MS, WINDOW_MS = 2_000, 10_000
OUT = ROOT / "docs" / "examples" / "kafka_runs.json"
# (partition, event time in s) per micro-batch; sensor s<p> writes to partition p
BATCHES = [
    [(0, 2), (1, 3), (0, 6), (1, 7)],
    [(0, 11), (1, 12), (2, 1), (0, 15), (1, 16), (2, 5)],
    [(0, 21), (1, 22), (2, 8), (0, 25), (1, 26), (2, 13)],
    [(0, 31), (1, 32), (2, 18), (2, 24)],
]


class Count(tm.ProcessWindowFunction):
    """``(sensor, start, end, elements, the watermark it fired at)`` per window."""

    def process(self, key, context, elements):
        w = context.window()
        yield (key, w.start, w.end, len(list(elements)), context.current_watermark())


def _run(spark: Any, address: str, topic: str, per_partition: bool, work: Path) -> dict:
    records = read_kafka(spark, bootstrap_servers=address, topic=topic,
                         schema="sensor string, ts long", timestamp="ts")  # fmt: skip
    extra = {"partition_column": "partition", "partitions": 3} if per_partition else {}
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(BOUND_MS)
    late = tm.OutputTag("late")
    result = (
        tm.from_dataframe(records.rows, "ts", watermark_strategy=strategy, **extra)
        .key_by("sensor")
        .window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
        .side_output_late_data(late)
        .process(Count(), "sensor string, start long, end long, n long, wm long")
    )
    got: dict[str, list] = {"main": [], "late": [], "watermarks": [], "runs": []}

    def sink(name: str) -> Any:
        return lambda df, b: got[name].extend((b, tuple(r)) for r in df.collect())

    sinks = {"main": sink("main"), late: sink("late")}
    checkpoint = str(work / f"checkpoint-{per_partition}")
    for batch in range(len(BATCHES)):
        query = result.write_outputs(sinks, checkpoint, {"availableNow": True})
        query.awaitTermination()
        got["runs"].append([progress["batchId"] for progress in query.recentProgress])
        for progress in query.recentProgress:
            figures = progress["observedMetrics"].get("tidemark")
            watermark = None if figures is None else figures["watermark_ms"]
            got["watermarks"].append((progress["batchId"], watermark))
        if batch + 1 < len(BATCHES):
            _produce(spark, address, topic, batch + 1)
    return got


def _produce(spark: Any, address: str, topic: str, batch: int) -> None:
    """Batch ``batch``'s rows; the last batch ends with the end-of-input record."""
    values = [(p, json.dumps({"sensor": f"s{p}", "ts": s * 1000})) for p, s in BATCHES[batch]]
    if batch == len(BATCHES) - 1:
        values.append((0, json.dumps({"sensor": "end", "ts": END_OF_INPUT_MS})))
    (
        spark.createDataFrame(values, "partition int, value string").coalesce(1)
        .write.format("kafka").option("kafka.bootstrap.servers", address)
        .option("topic", topic).save()
    )  # fmt: skip


def _trace(got: dict, per_partition: bool) -> dict:
    """The run as a timeline trace (``tools/TRACE.md``): each production's rows in the
    order produced. A query run reads them in its first micro-batch, which fires at the
    watermark from before them; its later, no-data micro-batches fire after them."""
    elements, last_of_batch = [], []
    late = {(row[0], row[1]) for _, row in got["late"]}  # (sensor, ts) of the late rows
    for rows in BATCHES:
        for p, s in rows:
            status = "side_output" if (f"s{p}", s * 1000) in late else "on_time"
            elements.append({"key": f"s{p}", "ts": s * 1000, "arrival": len(elements),
                             "label": f"s{p}@{s}", "status": status})  # fmt: skip
        last_of_batch.append(len(elements) - 1)
    n = len(elements)
    placed = {}  # micro-batch id -> the arrival after which it ran (-1: before any)
    for run, batch_ids in enumerate(got["runs"]):
        for k, batch_id in enumerate(batch_ids):
            placed[batch_id] = last_of_batch[run - 1] if k == 0 and run else last_of_batch[run]
        placed[batch_ids[0]] = last_of_batch[run - 1] if run else -1

    def after(batch_id: int) -> int:
        return placed[batch_id]

    watermarks, seen = [], None
    for batch_id, ms in sorted(got["watermarks"]):
        if ms is not None and ms != seen:
            watermarks.append({"arrival": after(batch_id), "ts": ms})
            seen = ms
    firings, windows = [], set()
    for batch_id, (sensor, start, end, count, wm) in sorted(got["main"]):
        windows.add((sensor, start, end))
        firings.append({"key": sensor, "start": start, "end": end, "kind": "on_time",
                        "arrival": n if wm == 2**63 - 1 else after(batch_id),
                        "watermark": wm, "result": str(count)})  # fmt: skip
    for e in elements:
        start = e["ts"] - e["ts"] % WINDOW_MS
        windows.add((e["key"], start, start + WINDOW_MS))
    how = "per-partition watermarks" if per_partition else "Spark's one watermark"
    trace = {
        "title": f"Kafka, 3 partitions, partition 2 lagging 10 s: {how}",
        "elements": elements,
        "watermarks": watermarks,
        "windows": [{"key": k, "start": s, "end": e} for k, s, e in sorted(windows)],
        "firings": firings,
    }
    if per_partition:
        trace["partition_watermarks"] = _partition_watermarks(last_of_batch)
    return trace


def _partition_watermarks(last_of_batch: list[int]) -> list[dict]:
    out, highest = [], {}
    for batch, rows in enumerate(BATCHES):
        for p, s in rows:
            highest[p] = max(highest.get(p, s), s)
        for p in sorted(highest):
            out.append({"partition": p, "arrival": last_of_batch[batch],
                        "ts": highest[p] * 1000 - BOUND_MS - 1})  # fmt: skip
    return _changes(out)


def _changes(marks: list[dict]) -> list[dict]:
    """Only the marks where a partition's watermark changed."""
    last: dict[Any, int] = {}
    kept = []
    for m in marks:
        if last.get(m["partition"]) != m["ts"]:
            kept.append(m)
            last[m["partition"]] = m["ts"]
    return kept


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_spark(master="local[2]", conf={
        "spark.jars": ",".join(jars.classpath(["connector"])),
        "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        address = broker.start(work / "broker", broker.free_port())
        try:
            traces = {}
            for per_partition in (True, False):
                topic = f"sensors-{per_partition}".lower()
                broker.create_topic(address, topic, 3)
                _produce(spark, address, topic, 0)
                got = _run(spark, address, topic, per_partition, work)
                traces["per_partition" if per_partition else "global"] = _trace(got, per_partition)
        finally:
            broker.stop(work / "broker")
    OUT.write_text(json.dumps(traces, indent=1) + "\n")
    print(f"record_run: wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
