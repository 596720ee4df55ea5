"""A streaming window's elements folded per key and slice in each input partition before
the shuffle, the partials merged in the key groups (Spark's and Flink SQL's local-global
aggregation).

Without it, every element crosses the shuffle to its key group, where one Python call
reads it; a non-keyed window has one key, so one key group, one task and one Python
worker take every element of a micro-batch (Flink's ``windowAll`` at parallelism 1).
Where the split is exact (:func:`~tidemark._engine.partials.stream_serves`: an
``AggregateFunction`` with ``merge`` or a ``ReduceFunction`` declared
``order_insensitive = True``, tumbling or sliding windows of event or processing time
under their default trigger, no allowed lateness, no late side output),
:func:`pre_aggregation` adds a stateless step before the key groups
(:class:`~..worker.preaggregate.PartitionPreAggregation`, one ``add`` per element in the scan
tasks, one partial per key and slice), and the key groups merge each slice's partials
into its windows (:func:`~tidemark._engine.create.partials_operator`): the same
results, timestamps, figures and dropped counts as the one-task path, and the same
stored state, so a restart may switch either way. For the window reading the stream
itself (the first of a chain too, not a later one), in ``EventTime`` (or, for
processing-time windows, ``ProcessingTime``) mode on Spark's unshifted clock, without
idleness or per-partition watermarks; everything else runs as before.

A ``window_all`` folds so by default (``spark.tidemark.streaming.preAggregate``,
``false`` turns it off, as ``spark.tidemark.fastPaths=false`` does); a keyed window only
when ``spark.tidemark.streaming.preAggregateKeyed=true`` asks for it: its key groups
already run on every core, and on the Nexmark queries measured the fold in the scan
task cost what it saved them. The guide: ``docs/streaming.md`` ("Folding before the
shuffle").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, StructField, StructType

from tidemark._engine.partials import stream_serves
from tidemark._engine.spec import OperatorSpec
from tidemark.spark.plan import WindowOp, fast_paths_enabled
from tidemark.spark.protocol.columns import KEY_GROUP, PARTIAL
from tidemark.spark.runtime.confs import STREAMING_PRE_AGGREGATE, STREAMING_PRE_AGGREGATE_KEYED
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.spark.streaming.worker.preaggregate import PartitionPreAggregation

__all__ = ["CONF", "KEYED_CONF", "PreAggregation", "pre_aggregation"]

CONF = STREAMING_PRE_AGGREGATE.name
KEYED_CONF = STREAMING_PRE_AGGREGATE_KEYED.name


@dataclass(frozen=True)
class PreAggregation:
    """How a streaming window folds its elements before its key groups: ``spec``, the
    window's run spec, whose windows and function the step folds with."""

    spec: OperatorSpec

    def apply(
        self, prepared: DataFrame, config: ProcessorConfig
    ) -> tuple[DataFrame, ProcessorConfig]:
        """``prepared`` (the key groups' input) folded per input partition, and
        ``config`` reading its partials and merging them."""
        # a partial's row has nulls where an element has values, but always a key group:
        # the key group keeps its nullability, which Spark 4.1 and 4.2 keep in the state's
        # key schema and compare at a restart (one that switches the step must restart)
        fields = [
            StructField(f.name, f.dataType, f.nullable or f.name != KEY_GROUP, f.metadata)
            for f in prepared.schema
        ]
        schema = StructType([*fields, StructField(PARTIAL, BinaryType(), True)])
        pre_aggregated = prepared.mapInPandas(PartitionPreAggregation(config, self.spec), schema)
        return pre_aggregated, replace(config, partial_position=len(fields))


def pre_aggregation(
    op: WindowOp,
    *,
    time_mode: TimeMode,
    reads_window: bool,
    idleness_ms: int | None,
    partitions: Any,
    spark_offset_ms: int,
) -> PreAggregation | None:
    """The pre-aggregation of ``op`` on a stream, or None where its key groups fold
    every element (a keyed window unless asked for, a window reading an earlier window's
    results, ``reads_window``, another time mode, idleness, per-partition watermarks,
    Spark's shifted clock, a pipeline the split does not serve, or the switches off)."""
    spark = op.source.df.sparkSession
    if not fast_paths_enabled(spark) or not STREAMING_PRE_AGGREGATE.enabled(spark):
        return None
    if op.key is not None and not STREAMING_PRE_AGGREGATE_KEYED.enabled(spark):
        return None
    if reads_window or idleness_ms is not None or partitions is not None or spark_offset_ms != 0:
        return None
    spec = op.run_spec()
    mode = TimeMode.EVENT_TIME if spec.is_event_time else TimeMode.PROCESSING_TIME
    return PreAggregation(spec) if time_mode is mode and stream_serves(spec) else None
