"""The one place that decides how a window operation runs on Spark.

:func:`mode_of` picks one of four executions, each a separate implementation that
produces the same combined frame (:mod:`tidemark.spark.columns`):

========== ============================================================================
STREAMING  a streaming source: one ``applyInPandasWithState`` query
           (:mod:`tidemark.spark.streaming.from_plan`)
SQL        BATCH shorthand aggregations with a closed form: Spark's own aggregation,
           the same as BATCH but faster (:mod:`tidemark.spark.batch.sql_plan`)
REPLAY     a bounded source with ``order_by``: the engine per partition, watermarks as
           recorded (:class:`~tidemark.spark.batch.worker.ReplayDriver`)
BATCH      any other bounded source: Flink's BATCH semantics, the engine per partition
           (:class:`~tidemark.spark.batch.worker.BatchDriver`)
========== ============================================================================

What is computed for a plan node (its element frame, a window's combined frame) is
remembered per node, as long as the node lives: the outputs of one window operation come
from one run, and a replay's watermark scan runs once.
"""

from __future__ import annotations

import enum
import weakref
from typing import Any

from tidemark.spark.batch import sql_plan
from tidemark.spark.batch.frames import ElementFrame, result_frame, source_frame
from tidemark.spark.batch.run import run_partitioned
from tidemark.spark.batch.worker import BatchDriver, ReplayDriver
from tidemark.spark.plan import PlanNode, Source, WindowOp
from tidemark.spark.preflight import ensure_workers_import_tidemark
from tidemark.spark.streaming.from_plan import run_streaming_window
from tidemark.spark.streaming.query import StreamingWindow

__all__ = ["ExecutionMode", "mode_of", "combined_frame", "element_frame", "streaming_window"]


class ExecutionMode(enum.Enum):
    """How a window operation runs (see the module docstring)."""

    STREAMING = "streaming"
    SQL = "sql"
    REPLAY = "replay"
    BATCH = "batch"


_combined: weakref.WeakKeyDictionary[WindowOp, Any] = weakref.WeakKeyDictionary()
_streaming: weakref.WeakKeyDictionary[WindowOp, StreamingWindow] = weakref.WeakKeyDictionary()
_elements: weakref.WeakKeyDictionary[PlanNode, ElementFrame] = weakref.WeakKeyDictionary()


def mode_of(op: WindowOp, spark: Any) -> ExecutionMode:
    """The execution of ``op`` (for a bounded source, this builds its element frame)."""
    if op.source.streaming:
        return ExecutionMode.STREAMING
    frame = element_frame(op.upstream, spark)
    if frame.replay:
        return ExecutionMode.REPLAY
    if sql_plan.applies(op, frame, spark):
        return ExecutionMode.SQL
    return ExecutionMode.BATCH


def combined_frame(op: WindowOp, spark: Any) -> Any:
    """Results and side outputs of one run of ``op``: its combined frame, computed once."""
    combined = _combined.get(op)
    if combined is None:
        combined = _combined[op] = _run(op, spark)
    return combined


def _run(op: WindowOp, spark: Any) -> Any:
    ensure_workers_import_tidemark(spark)  # else a ModuleNotFoundError deep in a worker
    mode = mode_of(op, spark)
    if mode is ExecutionMode.STREAMING:
        return streaming_window(op).frame
    frame = element_frame(op.upstream, spark)
    if mode is ExecutionMode.SQL:
        return sql_plan.sql_window(op, frame)
    driver = ReplayDriver if mode is ExecutionMode.REPLAY else BatchDriver
    return run_partitioned(op, frame, spark, driver)


def streaming_window(op: WindowOp) -> StreamingWindow:
    """The streaming window of ``op`` on a streaming source: its combined frame and the
    settings its query starts with, built once."""
    window = _streaming.get(op)
    if window is None:
        window = _streaming[op] = run_streaming_window(op)
    return window


def element_frame(node: PlanNode, spark: Any) -> ElementFrame:
    """The elements of a bounded node as a frame with internal columns, computed once:
    a source's rows, or an upstream window's results."""
    frame = _elements.get(node)
    if frame is None:
        if isinstance(node, Source):
            frame = source_frame(node, spark)
        else:
            parent = element_frame(node.upstream, spark)
            frame = result_frame(node.output_schema, parent, combined_frame(node, spark))
        _elements[node] = frame
    return frame
