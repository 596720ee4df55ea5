"""``window_all`` on every core: a non-keyed BATCH window whose function is declared
order-insensitive, aggregated per Spark partition and merged in one task.

Flink runs ``windowAll`` at parallelism 1, and so does tidemark's BATCH run
(:mod:`.run`): one task sees every element. Where the function declares
``order_insensitive = True`` (see :mod:`tidemark._engine.partials`, which says where the
split is exact), the run is Flink SQL's local-global aggregation instead:

1. **local**: every partition of the element frame, where it is (no shuffle, no sort),
   runs one engine operator of :func:`~tidemark._engine.partials.local_spec` through
   the BATCH driver (:class:`LocalDriver`: each Arrow batch sorted by time, which the
   declared function allows, so a window's elements fold in one run): one
   ``(window start, window end, contents)`` row per window it holds (``__tm_start``,
   ``__tm_end``, ``__tm_partial``: the accumulator or reduced value, cloudpickled), and
   its figures row (elements in);
2. **global**: those rows, in one partition, run one operator of
   :func:`~tidemark._engine.partials.global_spec` (:class:`MergeDriver`): each partial
   into its window, merged with the function's ``merge`` (or reduce), every window
   fired at the end of the input with the user's window function. Its figures are the
   one-task run's: the elements in (summed from the local rows), the results out.

Only the few partials (windows times partitions) cross the shuffle. The input checks
(null or out-of-range timestamps) and the errors of user code are the BATCH driver's,
in the local step. Set the Spark conf ``spark.tidemark.preAggregate=false`` (or
``spark.tidemark.fastPaths=false``) to run every ``window_all`` in one task. A replay
keeps the one-task run: its firings, late firings and late elements depend on the
arrival order the one task replays. The guide: ``docs/concepts/functions.md``.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow.compute as pc
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from tidemark._engine.contract import OperatorHandle
from tidemark._engine.partials import global_spec, local_spec, serves
from tidemark.spark.batch.frames import ElementFrame
from tidemark.spark.batch.run import run_in_place, runner_config
from tidemark.spark.batch.worker import BatchDriver, _Output
from tidemark.spark.plan import WindowOp, fast_paths_enabled
from tidemark.spark.protocol.columns import (
    MAIN,
    OUTPUT,
    PARTIAL,
    SIDE,
    STATS_OUTPUT,
    WINDOW_END,
    WINDOW_START,
    decode_side,
    encode_side,
)
from tidemark.spark.runtime.confs import PRE_AGGREGATE

__all__ = [
    "applies",
    "run_preaggregated",
    "LocalDriver",
    "MergeDriver",
    "CONF",
    "PARTIALS_SCHEMA",
]

CONF = PRE_AGGREGATE.name

PARTIALS_SCHEMA = StructType(
    [
        StructField(WINDOW_START, LongType(), False),
        StructField(WINDOW_END, LongType(), False),
        StructField(PARTIAL, BinaryType(), False),
    ]
)
"""The results of the local step: a window and what a partition holds for it."""


def applies(op: WindowOp, frame: ElementFrame, spark: Any) -> bool:
    """Whether ``op`` runs pre-aggregated: non-keyed, BATCH, a spec the split serves
    (:func:`~tidemark._engine.partials.serves`), the switches on."""
    if op.key is not None or frame.replay or not serves(op.spec):
        return False
    return fast_paths_enabled(spark) and PRE_AGGREGATE.enabled(spark)


def run_preaggregated(op: WindowOp, frame: ElementFrame) -> Any:
    """The combined frame of ``op`` over ``frame``: local partials, merged in one task."""
    spec = op.run_spec()
    partials = run_in_place(frame, local_spec(spec, encode_side), PARTIALS_SCHEMA, LocalDriver)
    config = runner_config(frame, global_spec(spec), op.output_schema)
    return partials.repartition(1).mapInArrow(MergeDriver(config), config.output_schema)


class LocalDriver(BatchDriver):
    """``mapInArrow`` function of the local step: the BATCH driver, each Arrow batch
    sorted by time first (in Arrow, not Python). The declared function lets the order
    of elements go, and a run in time order folds a window at a time."""

    def __call__(self, batches: Any) -> Any:
        column = self.config.timestamps_in
        return super().__call__(_by_time(batch, column) for batch in batches)


def _by_time(batch: Any, column: str) -> Any:
    # the array's own sort: a sixth of the time of sorting the batch by a sort key
    return batch.take(pc.array_sort_indices(batch.column(batch.schema.get_field_index(column))))


class MergeDriver(BatchDriver):
    """``mapInArrow`` function of the global step: the local step's rows (partials and
    figures) into one operator of the global spec, then the end of the input, as a
    BATCH task's key ends."""

    def _run(self, batches: Any) -> Any:
        config = self.config
        op = config.make_operator()
        out = _Output(config)
        records_in = 0
        for batch in batches:
            records_in += _feed_partials(op, batch)
        self._finish_key(op, None, out)
        out.stats(records_in, op.num_late_records_dropped)
        yield from out.batches(config.output_schema)


def _feed_partials(op: OperatorHandle, batch: Any) -> int:
    """Feed one Arrow batch of the local step's rows: each partial at its window's
    ``max_timestamp()``; returns the elements the local tasks' figures counted in."""
    columns = batch.to_pydict()
    records_in = 0
    rows = zip(columns[OUTPUT], columns[WINDOW_START], columns[WINDOW_END], columns[PARTIAL])
    for output, start, end, partial in rows:
        if output == MAIN:
            op.process_element(None, (start, end, decode_side(partial)), end - 1)
    for output, side in zip(columns[OUTPUT], columns[SIDE]):
        if output == STATS_OUTPUT:
            records_in += json.loads(side)["num_records_in"]
        elif output != MAIN:  # the local step judges nothing late and has no side output
            raise AssertionError(f"a pre-aggregating task emitted a {output!r} row")
    return records_in
