"""The streaming runtime's per-call cost in the worker, without Spark: one key group's
calls through :class:`~tidemark.spark.streaming.worker.bindings.WindowGroupFunction`
(``applyInPandasWithState``'s path: rows by key, the keys' clocks, the engine, the
output rows, the group's state row pickled and back), Spark's ``GroupState`` played by
the test suite's stand-in (``tests/spark_state_fakes.py``).

10 micro-batches of 20,000 rows over 2,000 keys, 10-second tumbling event-time windows
summing ``v``, the watermark advancing 4 s per batch, the
call's figures row on. Prints the CPU time (``time.process_time``, so a busy machine
slows it less than the wall clock) of the best of ``--runs`` runs of the 10 calls, and
the output rows (the same on every version of the runtime).

Usage: ``python benchmarks/streaming_group_call.py [--runs 7]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql.types import LongType, StructField, StructType

from tidemark import AggregateFunction, TumblingEventTimeWindows
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.spark.streaming.worker.bindings import WindowGroupFunction
from tidemark.spark.streaming.worker.clock import spark_watermark
from tidemark.spark.streaming.worker.config import ProcessorConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from spark_state_fakes import GroupState  # noqa: E402

BATCHES, ROWS, KEYS, ADVANCE_MS = 10, 20_000, 2_000, 4_000


class Sum(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + value.v

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return a + b


SPEC = OperatorSpec(TumblingEventTimeWindows.of(10_000), window_logic(Sum()))


def config() -> ProcessorConfig:
    return ProcessorConfig(
        spec=SPEC,
        time_mode="EventTime",
        value_names=("key", "v"),
        value_types=("StringType", "LongType"),
        value_positions=(0, 1),
        result_schema=StructType([StructField("total", LongType())]),
        result_to_row=lambda value, ts: (value,),
        key_positions=(0,),
        key_types=("StringType",),
        timestamp_position=2,
        max_parallelism=1,
        metrics=True,
    )


def batches() -> list[pd.DataFrame]:
    frames = []
    for b in range(BATCHES):
        rows = [(f"k{i % KEYS}", i, b * ADVANCE_MS + (i * 7) % ADVANCE_MS) for i in range(ROWS)]
        frames.append(pd.DataFrame(rows, columns=["key", "v", "ts"]))
    return frames


def run(frames: list[pd.DataFrame]) -> tuple[float, int]:
    """CPU seconds of the calls, and the output rows they gave."""
    function = WindowGroupFunction(config())
    row, out = None, 0
    start = time.process_time()
    for b, pdf in enumerate(frames):
        watermark = spark_watermark(b * ADVANCE_MS - 1) if b else 0
        state = GroupState(row, watermark, False)
        for frame in function(("g",), iter([pdf]), state):
            out += len(frame)
        row = state.row
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    frames = batches()
    seconds, out = min(run(frames) for _ in range(args.runs))
    print(f"{seconds:.3f} s CPU for {BATCHES} calls of {ROWS:,} rows ({out} output rows)")


if __name__ == "__main__":
    main()
