"""The Python worker's call of a streaming Nexmark query, timed without the JVM: the
key groups' calls (:class:`~tidemark.spark.streaming.worker.groups.WindowGroups`) of
each micro-batch of ``--batch-rows`` bids, fed the pandas frames Spark would hand them
(Arrow batches of 10,000 rows), with the watermark moved as Spark's would be. Prints
the CPU milliseconds of each micro-batch's calls and their median after the first.

The processor's configuration is the one tidemark builds for the query on a file
stream (captured where the driver hands it to Spark's operator); the key groups here
are the key column modulo 16 (a task's share of 32), not Spark's hash: the work per
row is the same. Compare trees with ``PYTHONPATH=<tree>/src``.

A query that folds its bids before its key groups (q7, ``spark.tidemark.streaming.preAggregate``,
on by default, ``--one-task`` turns it off; q5's first window and q12 with
``--fold-keyed``, ``spark.tidemark.streaming.preAggregateKeyed``)
is timed as both of its Python steps: the folding step over the micro-batch's frames
(one input partition, as a micro-batch of one file is), then the key groups' calls on
the partials it emits. Python's garbage collector runs as in a Spark worker
(:func:`tidemark.spark.worker_gc.fewer_gc_passes`).

Usage::

    python benchmarks/nexmark/worker_call.py --query q7 --batch-rows 100000 --batches 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexmark.generator import GeneratorConfig, generate_bids  # noqa: E402
from nexmark.queries import tidemark_query  # noqa: E402

ARROW_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch's default
GROUPS = 16


class Store:
    """A key group's row and clocks, as ``applyInPandasWithState`` keeps them."""

    def __init__(self, max_parallelism: int):
        self.now, self.spark_watermark, self.row = 0, 0, None
        self._max_parallelism = max_parallelism

    def watermark(self) -> int:
        return self.spark_watermark

    def read(self) -> Any:
        from tidemark.spark.streaming.worker.state import StoredGroup

        return StoredGroup.decode(self.row, self._max_parallelism)

    def save(self, group: Any, timers: Any, clock: Any) -> None:
        self.row = group.encode(self._max_parallelism) if group.keys else None


def captured_processor(
    query: str, one_task: bool, fold_keyed: bool = False
) -> tuple[list[str], Any, Any]:
    """The input columns and the ``ProcessorConfig`` tidemark builds for ``query``, and
    its folding step (``(input columns, PartitionPreAggregation)``; None: it has none)."""
    import tidemark.spark.streaming.driver.preaggregate as combine
    import tidemark.spark.streaming.driver.query as driver
    from tidemark.spark.session import get_spark
    from tidemark.spark.streaming.worker.preaggregate import PartitionPreAggregation

    spark = get_spark(master="local[1]")
    spark.conf.set(combine.CONF, str(not one_task).lower())
    spark.conf.set(combine.KEYED_CONF, str(fold_keyed).lower())
    captured: list[Any] = []
    folding: list[Any] = []
    build, apply = driver.key_group_operator, combine.PreAggregation.apply

    def capture(prepared: Any, config: Any, *args: Any) -> Any:
        captured.append((prepared.columns, config))
        return build(prepared, config, *args)

    def capture_folding(self: Any, prepared: Any, config: Any) -> Any:
        folding.append((prepared.columns, PartitionPreAggregation(config, self.spec)))
        return apply(self, prepared, config)

    driver.key_group_operator = capture  # type: ignore[assignment]
    combine.PreAggregation.apply = capture_folding  # type: ignore[method-assign]
    root = Path(tempfile.mkdtemp(prefix="nexmark-call-"))
    generate_bids(10, GeneratorConfig()).to_parquet(root / "bids.parquet")
    source = spark.readStream.schema(spark.read.parquet(str(root)).schema).parquet(str(root))
    try:
        tidemark_query(query, source, GeneratorConfig().max_disorder_ms).to_dataframe()
    finally:
        driver.key_group_operator = build  # type: ignore[assignment]
        combine.PreAggregation.apply = apply  # type: ignore[method-assign]
    columns, config = captured[0]
    return columns, config, folding[0] if folding else None


def frames(columns: list[str], bids: pd.DataFrame, group: int) -> list[pd.DataFrame]:
    """``bids`` as the processor's input frames of one key group."""
    data = {}
    for name in columns:
        if name == "__tm_ts":
            data[name] = bids["date_time"].to_numpy()
        elif name.startswith("__tm_") and name not in bids:  # the key group (unless
            # folded_calls gave each bid its own), or window_all's one key
            data[name] = np.full(len(bids), group if "group" in name else 0, dtype=np.int32)
        else:
            data[name] = bids[name].to_numpy()
    whole = pd.DataFrame(data)
    return [whole.iloc[s : s + ARROW_ROWS] for s in range(0, len(whole), ARROW_ROWS)]


def calls_of(columns: list[str], config: Any, batch: pd.DataFrame) -> list[list[pd.DataFrame]]:
    """A micro-batch's calls: one for window_all, else one per key group."""
    if columns[0] == "__tm_all":
        return [frames(columns, batch, 0)]
    groups = (batch[columns[config.key_positions[0]]] % GROUPS).to_numpy()
    return [frames(columns, batch[groups == g], g) for g in range(GROUPS)]


def folded_calls(folding: Any, columns: list[str], batch: pd.DataFrame) -> list[Any]:
    """The calls of a micro-batch folded in one input partition: the partials (and rows
    passed) split by key group (one call for window_all)."""
    out = list(folding(frames(columns, batch, 0)))
    if columns[0] == "__tm_all":
        return [out]
    whole = pd.concat(out, ignore_index=True)
    groups = whole["__tm_key_group"].to_numpy()
    return [[whole[groups == g]] for g in range(GROUPS)]


def run(
    query: str, batch_rows: int, batches: int, one_task: bool = False, fold_keyed: bool = False
) -> tuple[list[float], list[float]]:
    """CPU seconds of each micro-batch's folding step (0 where it has none) and of its
    key groups' calls."""
    from tidemark.spark.streaming.worker.groups import WindowGroups
    from tidemark.spark.worker_gc import _set_once

    columns, config, folding = captured_processor(query, one_task, fold_keyed)
    # the collector's setting in a Spark worker (worker_gc.fewer_gc_passes): without it
    # the default collector walked every Row built here, doubling some calls' time
    _set_once()
    bids = generate_bids(batch_rows * batches, GeneratorConfig())
    parts = [bids.iloc[i * batch_rows : (i + 1) * batch_rows] for i in range(batches)]
    if folding is None:
        prepared = [calls_of(columns, config, part) for part in parts]
    elif folding[0][0] == "__tm_all":
        prepared = parts
    else:  # keyed: the key column's value is its group, as in calls_of
        key = folding[0][config.key_positions[0]]
        prepared = [part.assign(__tm_key_group=part[key] % GROUPS) for part in parts]
    groups = WindowGroups(config)
    stores = [Store(config.max_parallelism) for _ in range(GROUPS)]
    watermark, folds, seconds = 0, [], []
    for n, (part, calls) in enumerate(zip(parts, prepared)):
        started = time.process_time()
        if folding is not None:
            calls = folded_calls(folding[1], folding[0], calls)
        folded = time.process_time()
        folds.append(folded - started)
        for store, call in zip(stores, calls):
            store.spark_watermark = watermark + config.spark_offset_ms if n else 0
            store.now = int(time.time() * 1000)
            for _ in groups.call(store, call):
                pass
        seconds.append(time.process_time() - folded)
        watermark = int(part["date_time"].max()) - GeneratorConfig().max_disorder_ms
    return folds, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="q7", help="q5 (its first window), q7, q11, q12")
    parser.add_argument("--batch-rows", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument(
        "--one-task",
        action="store_true",
        help="without the folding step (spark.tidemark.streaming.preAggregate=false)",
    )
    parser.add_argument(
        "--fold-keyed",
        action="store_true",
        help="a keyed query folded too (spark.tidemark.streaming.preAggregateKeyed=true)",
    )
    args = parser.parse_args()
    folds, seconds = run(args.query, args.batch_rows, args.batches, args.one_task, args.fold_keyed)
    print(" ".join(f"{s * 1000:.0f}" for s in folds), "ms CPU folding per micro-batch")
    print(" ".join(f"{s * 1000:.0f}" for s in seconds), "ms CPU of the calls per micro-batch")
    fold, calls = (statistics.median(x[1:] or x) * 1000 for x in (folds, seconds))
    print(
        f"{args.query}: median {fold + calls:.0f} ms CPU per {args.batch_rows:,} bids after "
        f"the first (folding {fold:.0f}, calls {calls:.0f})"
    )


if __name__ == "__main__":
    main()
