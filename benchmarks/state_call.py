"""The Python side of ``state_growth.py``'s tidemark query, timed without the JVM: each
micro-batch's key-group calls in the deltas layout (``WindowStatefulProcessor`` on a
stand-in for Spark's state handle, :mod:`spark_state_fakes`), fed the pandas frames
Spark would hand them, the watermark moved as Spark's would be. What the JVM does
(reading files, the shuffle, Arrow, RocksDB, the socket round trips) is not here: this
measures tidemark's own Python per micro-batch as live keys pile up, and where it goes.

The processor's configuration is the one tidemark builds for ``state_growth.py``'s query
(captured where the driver hands it to Spark's operator); the key group of a row is its
key modulo the query's key groups (Spark hashes: the work per row is the same). Every
group's entry stays in the one process's cache unless ``--cold-share`` drops a share of
them before each call (a call landing on the other worker, whose copy is behind).

Usage::

    python benchmarks/state_call.py                       # 4M key space, 100,000 x 24
    python benchmarks/state_call.py --batches 8 --profile /tmp/call.prof
"""

from __future__ import annotations

import argparse
import cProfile
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "tests"))

import state_growth  # noqa: E402
from spark_state_fakes import StateHandle, TimerValues  # noqa: E402

ARROW_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch's default


def captured_config() -> tuple[list[str], Any]:
    """The input columns and ``ProcessorConfig`` of state_growth's tidemark query."""
    import tidemark.spark.streaming.driver.query as driver
    from tidemark.spark.session import get_spark

    spark = get_spark(master="local[1]")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set("spark.tidemark.streaming.stateLayout", "deltas")
    captured: list[Any] = []
    build = driver.key_group_operator

    def capture(prepared: Any, config: Any, *args: Any) -> Any:
        captured.append((prepared.columns, config))
        return build(prepared, config, *args)

    driver.key_group_operator = capture  # type: ignore[assignment]
    try:
        stream = state_growth.tm.from_dataframe(
            spark.readStream.schema("key long, v long, ts long").parquet(str(_HERE)),
            timestamp="ts",
            watermark_strategy=state_growth.tm.WatermarkStrategy.for_bounded_out_of_orderness(
                state_growth.OUT_OF_ORDERNESS_MS
            ),
            shift_spark_clock=True,
        )
        stream.key_by("key").window(
            state_growth.tm.TumblingEventTimeWindows.of(state_growth.WINDOW_MS)
        ).aggregate(
            state_growth.CountSum(),
            state_growth.KeyedResult(),
            output_schema=state_growth.RESULT_SCHEMA,
        ).to_dataframe()
    finally:
        driver.key_group_operator = build  # type: ignore[assignment]
    return captured[0]


def batches(key_space: int, events: int, count: int) -> list[pd.DataFrame]:
    """state_growth.py's input, batch by batch (the same draws)."""
    rng = np.random.default_rng(31)
    span = state_growth.WINDOW_MS // count
    return [
        pd.DataFrame(
            {
                "key": rng.integers(0, key_space, events),
                "v": rng.integers(0, 1_000, events),
                "ts": b * span + rng.integers(0, span, events),
            }
        )
        for b in range(count)
    ]


def calls(columns: list[str], batch: pd.DataFrame, groups: int) -> list[list[pd.DataFrame]]:
    """A micro-batch's frames per key group, in Arrow-batch-sized pieces."""
    out = []
    for group in range(groups):
        part = batch[batch["key"] % groups == group]
        data = {}
        for name in columns:
            if name == "__tm_ts":
                data[name] = part["ts"].to_numpy()
            elif name.startswith("__tm_"):
                data[name] = np.full(len(part), group, dtype=np.int32)
            else:
                data[name] = part[name].to_numpy()
        whole = pd.DataFrame(data)
        out.append([whole.iloc[s : s + ARROW_ROWS] for s in range(0, len(whole), ARROW_ROWS)])
    return out


def run(args: argparse.Namespace) -> list[float]:
    """CPU seconds of each micro-batch's calls."""
    from tidemark.spark.streaming.worker.deltas import CACHE
    from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
    from tidemark.spark.worker_gc import _set_once

    columns, config = captured_config()
    _set_once()  # the collector's setting in a Spark worker (worker_gc.fewer_gc_passes)
    groups = config.max_parallelism
    processors = []
    for _ in range(groups):
        processor, handle = WindowStatefulProcessor(config), StateHandle()
        processor.init(handle)  # type: ignore[arg-type]
        processors.append((processor, handle))
    data = batches(args.key_space, args.events, args.batches)
    rng = random.Random(7)
    profiler = cProfile.Profile() if args.profile else None
    watermark, seconds = None, []
    for n, batch in enumerate(data):
        frames = calls(columns, batch, groups)
        values = TimerValues(0 if watermark is None else watermark + config.spark_offset_ms, n)
        started = time.process_time()
        if profiler and n >= args.batches // 2:
            profiler.enable()
        for (processor, handle), call in zip(processors, frames):
            meta = handle.values.get("meta")
            if meta is not None and meta.row is not None and rng.random() < args.cold_share:
                CACHE.take(meta.row[1])
            for _ in processor.handleInputRows((0,), iter(call), values):  # type: ignore[arg-type]
                pass
        if profiler:
            profiler.disable()
        seconds.append(time.process_time() - started)
        latest = int(batch["ts"].max()) - state_growth.OUT_OF_ORDERNESS_MS
        watermark = latest if watermark is None else max(watermark, latest)
        print(f"micro-batch {n}: {seconds[-1] * 1000:.0f} ms CPU", flush=True)
    if profiler:
        profiler.dump_stats(args.profile)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key-space", type=int, default=4_000_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--cold-share", type=float, default=0.0)
    parser.add_argument("--profile", help="cProfile the second half's calls into this file")
    args = parser.parse_args()
    seconds = run(args)
    quarter = max(1, len(seconds) // 4)
    first = statistics.median(seconds[:quarter]) * 1000
    last = statistics.median(seconds[-quarter:]) * 1000
    print(f"first quarter {first:.0f} ms CPU, last quarter {last:.0f} ms CPU a micro-batch")


if __name__ == "__main__":
    main()
