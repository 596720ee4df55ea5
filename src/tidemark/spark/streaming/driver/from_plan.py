"""The DataStream API on a streaming DataFrame: a window operation (a plan's
:class:`~tidemark.spark.plan.WindowOp`) becomes a :class:`~.stream_plan.StreamPlan`
for :func:`~.query.window_stream`, one streaming query (see :mod:`tidemark.spark.streaming`)."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from pyspark.sql import functions as F

from tidemark.errors import WindowSpecError
from tidemark.spark.plan import PlanNode, Source, WindowOp, source_of
from tidemark.spark.protocol.columns import (
    ALL_KEY,
    KEY,
    MAIN,
    TS,
    upstream_output_name,
    with_function_key,
)
from tidemark.spark.protocol.source_partitions import check_partitions
from tidemark.spark.protocol.timestamps import with_assigned_timestamps
from tidemark.spark.streaming.driver.checkpoint import (
    CheckpointRecords,
    checkpoint_clock,
    read_records,
)
from tidemark.spark.streaming.driver.keygroups import MAX_PARALLELISM_CONF
from tidemark.spark.streaming.driver.preaggregate import pre_aggregation
from tidemark.spark.streaming.driver.query import StreamingWindow, window_stream
from tidemark.spark.streaming.driver.stream_plan import StreamPlan
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS
from tidemark.spark.streaming.worker.config import decoded_key, no_key, result_row
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.time import TimeDomain

__all__ = [
    "run_streaming_window",
    "time_mode_of",
    "chain_depth",
    "chain_output_name",
    "MAX_PARALLELISM_CONF",
]


def time_mode_of(op: WindowOp) -> TimeMode:
    """Which engine timers the pipeline needs: the time domains its assigner (cleanup
    timers) and its trigger declare (``timer_domains()``), as a ``time_mode``.

    Both domains (e.g. an event-time window with a processing-time trigger, or a custom
    trigger declaring both) make a query that Spark runs in ProcessingTime mode, with a
    micro-batch at every trigger interval (the streaming guide, ``docs/streaming.md``). A custom trigger that does not
    declare (``Trigger.declares_timer_domains``) is taken to use the windows' clock, or
    both on ``GlobalWindows``: most such triggers time the window they are given, and a
    query of one domain ends with ``availableNow`` where a ProcessingTime one never does.
    """
    trigger, windows = _trigger_of(op), op.assigner.timer_domains()
    if windows and not trigger.declares_timer_domains():
        return TimeMode.serving(windows)
    return TimeMode.serving(windows | trigger.timer_domains())


def _trigger_of(op: WindowOp) -> Any:
    return op.trigger if op.trigger is not None else op.assigner.get_default_trigger()


def _served_time_mode(
    op: WindowOp, timestamp: str | None, out_of_orderness_ms: int | None
) -> TimeMode:
    """The time mode the stream can serve the pipeline.

    With event time and a watermark strategy, a pipeline without timers (count windows)
    still sees the stream's watermark in ``context.current_watermark()``, as in Flink.
    Without them, a trigger that declares both domains on windows of processing time
    (or GlobalWindows) may use processing time only: it runs without event time and
    fails at its first event-time timer, naming the watermark it needs. Event time that
    is certain (declared by the assigner, or by the trigger alone) stays, and
    :func:`window_stream` refuses it for want of a watermark.
    """
    mode = time_mode_of(op)
    if timestamp is not None and out_of_orderness_ms is not None:
        return TimeMode.EVENT_TIME if mode is TimeMode.NONE else mode
    trigger_domains = _trigger_of(op).timer_domains()
    if (
        mode is TimeMode.EVENT_AND_PROCESSING_TIME
        and not op.assigner.is_event_time()
        and TimeDomain.PROCESSING_TIME in trigger_domains
    ):
        return TimeMode.PROCESSING_TIME
    return mode


def run_streaming_window(op: WindowOp, checkpoint: str | None = None) -> StreamingWindow:
    """The combined streaming output (results and side outputs) of one window operation,
    built for the query that will start on ``checkpoint`` (its recorded number of key
    groups and Spark clock are read first; None: the session's number and the source's
    ``shift_spark_clock``).

    A window on an earlier window's results runs in the same query: the chain becomes
    one ``transformWithStateInPandas`` per window, each reading the one before in the
    same micro-batch, and the last one's combined frame carries every window's side
    outputs and dropped counts (see ``docs/streaming.md``). Spark's event-time clock
    runs 0 or :data:`~..worker.clock.SPARK_OFFSET_MS` ahead of the engine's
    (:mod:`..worker.clock`): the checkpoint's, else as ``shift_spark_clock`` says.
    """
    source = source_of(op)
    if checkpoint is None:
        spark_offset_ms = SPARK_OFFSET_MS if source.shift_spark_clock else 0
        return _window_frame(op, False, None, spark_offset_ms)
    recorded = read_records(source.df.sparkSession, checkpoint)
    spark_offset_ms = checkpoint_clock(recorded, source.shift_spark_clock)
    return _window_frame(op, False, recorded, spark_offset_ms)


def _window_frame(
    op: WindowOp,
    feeds_downstream: bool,
    recorded: CheckpointRecords | None,
    spark_offset_ms: int,
) -> StreamingWindow:
    source = _streaming_source(op)
    upstream = op.upstream
    earlier = None
    timestamp: str | None
    if isinstance(upstream, WindowOp):
        earlier = _window_frame(upstream, True, recorded, spark_offset_ms)
        df, values, timestamp = earlier.frame, list(upstream.output_schema.fieldNames()), TS
    else:
        df, values, timestamp = source.df, list(source.df.columns), source.timestamp
        if timestamp is None and source.strategy.timestamp_assigner is not None:
            df = with_assigned_timestamps(df, source.strategy.timestamp_assigner)
            timestamp = TS
    engine_key = None
    if op.key is None:
        df, keys, engine_key = df.withColumn(ALL_KEY, F.lit(0)), [ALL_KEY], no_key
    elif op.key.function is not None:
        df = with_function_key(df, values, op.key.function, combined=earlier is not None)
        keys, engine_key = [KEY], decoded_key
    else:
        keys = list(op.key.columns)
    mode = _served_time_mode(op, timestamp, source.strategy.out_of_orderness_ms)
    check_partitions(source.partitions, mode)
    # Flink's idleness only leaves an idle input out of a minimum over inputs; the
    # watermark of one input never moves for it. A stream not read by partition is one
    # input, so its idleness changes nothing (a stream read by partition refuses it,
    # sources.py): no idle clock, and the query keeps its time mode.
    idleness_ms = None
    pre_aggregated = pre_aggregation(
        op,
        time_mode=mode,
        reads_window=earlier is not None,
        idleness_ms=idleness_ms,
        partitions=source.partitions,
        spark_offset_ms=spark_offset_ms,
    )
    plan = StreamPlan(
        op.run_spec(),
        key_columns=tuple(keys),
        value_columns=tuple(values),
        timestamp_column=timestamp,
        result_schema=op.output_schema,
        result_to_row=functools.partial(result_row, op.output_schema.fieldNames()),
        out_of_orderness_ms=source.strategy.out_of_orderness_ms if mode.event_time else None,
        time_mode=mode,
        idleness_ms=idleness_ms,
        engine_key=engine_key,
        feeds_downstream=feeds_downstream,
        partitions=source.partitions if earlier is None else None,
        pre_aggregate=pre_aggregated,
    )
    window = window_stream(
        df if earlier is None else replace(earlier, frame=df),
        plan,
        checkpoint=recorded,
        spark_offset_ms=spark_offset_ms,
    )
    if window.watermarks is None or source.strategy.idleness_ms is None:
        return window
    # the strategy's idleness, recorded with each micro-batch: on a stream it moves no
    # watermark, and an explanation says so
    watermarks = replace(window.watermarks, idleness_ms=source.strategy.idleness_ms)
    return replace(window, watermarks=watermarks)


def chain_depth(node: PlanNode) -> int:
    """How many window operations lead from the source to ``node`` (1 = the first)."""
    depth = 0
    while isinstance(node, WindowOp):
        depth, node = depth + 1, node.upstream
    return depth


def chain_output_name(last: WindowOp, window: Any, output: Any) -> str:
    """The ``__tm_output`` name, in the combined frame of ``last`` (the last window of a
    chain), of ``output`` (a name or an OutputTag) of ``window``: ``last`` or an earlier
    window of its chain."""
    name = getattr(output, "tag_id", output)
    node: PlanNode = last
    while isinstance(node, WindowOp) and node is not window:
        node = node.upstream
    if node is not window or not isinstance(name, str):
        raise WindowSpecError(
            f"`sinks` must name outputs of this window or of an earlier window of its "
            f"chain; got {output!r} of a window that is not this one or an earlier window"
        )
    if window is last:
        return name
    if name == MAIN:
        raise WindowSpecError(
            "`sinks` cannot take the results of an earlier window of a chain: the query "
            "carries them into the next window only; write them from a query of their own"
        )
    return upstream_output_name(chain_depth(window), name)


def _streaming_source(op: WindowOp) -> Source:
    """The source of a window (or chain of windows) on a stream; what streaming cannot
    run is an error."""
    source = source_of(op)
    if source.replay or source.watermark is not None:
        raise WindowSpecError(
            "`order_by` and `watermark` describe a replay: a streaming "
            "DataFrame arrives in its own order; drop them"
        )
    return source
