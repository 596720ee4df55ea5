"""The one place that decides how a window operation runs on Spark.

:func:`mode_of` picks one of seven executions, each a separate implementation that
produces the same combined frame (:mod:`tidemark.spark.protocol.columns`):

=================== ===================================================================
STREAMING           a streaming source: ONE query for the window, or for a chain of
                    windows, its key groups run by Spark's stateful operator:
                    ``transformWithStateInPandas`` for a chain's window or the deltas
                    state layout (the keyed windows' default), ``applyInPandasWithState``
                    for the row layout (:mod:`tidemark.spark.streaming.driver.from_plan`)
SQL                 BATCH shorthand aggregations with a closed form: Spark's own aggregation,
                    the same as BATCH but faster (:mod:`tidemark.spark.batch.sql_plan`)
REPLAY              a bounded source with ``order_by``: the engine per partition, watermarks
                    as recorded (:class:`~tidemark.spark.batch.worker.ReplayDriver`)
VECTORIZED          a keyed BATCH ``aggregate_vectorized`` on tumbling or sliding windows:
                    columnar, the function called on array slices, the same as BATCH but
                    without a Row per element (:mod:`tidemark.spark.batch.columnar`)
VECTORIZED_COMBINED the same, of a function with a partial step: each input partition
                    pre-aggregated where it is, only the partials shuffled, the same results
                    (:mod:`tidemark.spark.batch.columnar_preaggregate`)
LOCAL_GLOBAL        a BATCH ``window_all`` whose function is declared order-insensitive: the
                    engine per input partition, the partials merged in one task, the same as
                    BATCH but on every core (:mod:`tidemark.spark.batch.local_global`)
BATCH               any other bounded source: Flink's BATCH semantics, the engine per
                    partition (:class:`~tidemark.spark.batch.worker.BatchDriver`)
=================== ===================================================================

What is computed for a plan node (its element frame, a window's combined frame) is
remembered per node, as long as the node lives: the outputs of one window operation come
from one run, and a replay's watermark scan runs once.

Remembering a DataFrame does not stop Spark from running its plan again at every action,
so the combined frame of a BATCH, LOCAL_GLOBAL or REPLAY run that has more than its results to give is
also *persisted* (Spark's default storage level, memory then disk) when its first
output is asked for: the first action that reads any output runs the engine and keeps
the rows, every later one reads them. A run has more to give when it is a replay (late
data, a dropped count), has a late-data tag, or calls a process window function (side
outputs); ``write_outputs`` with several sinks keeps any run. A BATCH reduce, aggregate
or shorthand without a late-data tag gives only its results (nothing is late in BATCH)
and is not kept: keeping costs a copy of every row. :func:`release` (the user's
``result.unpersist()``) gives the memory back, as does dropping the last reference to
the window operation; outputs read after that run the pipeline again at each action. A
replay's arrival-ordered input, persisted for its watermark scan, is released when the
source node is gone. The SQL fast path is not kept: Spark's own aggregation, it has
one output.
"""

from __future__ import annotations

import contextlib
import enum
import weakref
from typing import Any

from tidemark.functions import ProcessAllWindowFunction, ProcessWindowFunction
from tidemark.spark.batch import columnar, columnar_preaggregate, local_global, sql_plan
from tidemark.spark.batch.frames import ElementFrame, result_frame, source_frame
from tidemark.spark.batch.run import run_partitioned
from tidemark.spark.batch.worker import BatchDriver, ReplayDriver
from tidemark.spark.plan import PlanNode, Source, WindowOp
from tidemark.spark.runtime import confs
from tidemark.spark.runtime.preflight import check_state_store, ensure_workers_import_tidemark
from tidemark.spark.streaming.driver.from_plan import run_streaming_window
from tidemark.spark.streaming.driver.query import StreamingWindow
from tidemark.spark.streaming.driver.starting import observed_chain

__all__ = [
    "ExecutionMode",
    "mode_of",
    "combined_frame",
    "element_frame",
    "streaming_window",
    "release",
]


class ExecutionMode(enum.Enum):
    """How a window operation runs (see the module docstring)."""

    STREAMING = "streaming"
    SQL = "sql"
    REPLAY = "replay"
    LOCAL_GLOBAL = "local_global"
    VECTORIZED = "vectorized"
    VECTORIZED_COMBINED = "vectorized_combined"
    BATCH = "batch"


_combined: weakref.WeakKeyDictionary[WindowOp, Any] = weakref.WeakKeyDictionary()
_streaming: weakref.WeakKeyDictionary[WindowOp, dict[str | None, StreamingWindow]] = (
    weakref.WeakKeyDictionary()
)
_elements: weakref.WeakKeyDictionary[PlanNode, ElementFrame] = weakref.WeakKeyDictionary()
_engine_runs: weakref.WeakSet[WindowOp] = weakref.WeakSet()  # BATCH and REPLAY runs
_kept: weakref.WeakSet[WindowOp] = weakref.WeakSet()  # persisted, released or not


def mode_of(op: WindowOp, spark: Any) -> ExecutionMode:
    """The execution of ``op`` (for a bounded source, this builds its element frame)."""
    if op.source.streaming:
        return ExecutionMode.STREAMING
    frame = element_frame(op.upstream, spark)
    if frame.replay:
        return ExecutionMode.REPLAY
    if sql_plan.applies(op, frame, spark):
        return ExecutionMode.SQL
    if local_global.applies(op, frame, spark):
        return ExecutionMode.LOCAL_GLOBAL
    if columnar_preaggregate.applies(op, frame, spark):
        return ExecutionMode.VECTORIZED_COMBINED
    if columnar.applies(op, frame, spark):
        return ExecutionMode.VECTORIZED
    return ExecutionMode.BATCH


def combined_frame(op: WindowOp, spark: Any, keep: bool = False) -> Any:
    """Results and side outputs of one run of ``op``: its combined frame, computed once,
    and persisted where the module docstring says (``keep``: in any case)."""
    combined = _combined.get(op)
    if combined is None:
        combined = _combined[op] = _run(op, spark)
    if op in _engine_runs and op not in _kept and (keep or _gives_more_than_results(op)):
        _kept.add(op)
        combined = combined.persist()
        weakref.finalize(op, _unpersist, combined).atexit = False
    return combined


def _gives_more_than_results(op: WindowOp) -> bool:
    process = (ProcessWindowFunction, ProcessAllWindowFunction)
    calls_process = isinstance(op.function, process) or isinstance(op.window_function, process)
    return op.source.replay or op.late_tag is not None or calls_process


def _run(op: WindowOp, spark: Any) -> Any:
    if not op.source.streaming:  # a stream's: when its window is built, below
        confs.check_all(spark)  # a malformed conf of a path this run does not take, too
    ensure_workers_import_tidemark(spark)  # else a ModuleNotFoundError deep in a worker
    mode = mode_of(op, spark)
    if mode is ExecutionMode.STREAMING:  # observed: a query on it reports the figures
        window = streaming_window(op)
        if window.in_transform_with_state:
            why = (
                "a chain of windows"
                if window.chained
                else "the deltas state layout (the default for keyed windows)"
            )
            check_state_store(spark, why)
        return observed_chain(window.frame, window.depth)
    frame = element_frame(op.upstream, spark)
    if mode is ExecutionMode.SQL:
        return sql_plan.sql_window(op, frame)
    _engine_runs.add(op)
    if mode is ExecutionMode.LOCAL_GLOBAL:
        return local_global.run_preaggregated(op, frame)
    if mode is ExecutionMode.VECTORIZED_COMBINED:
        return columnar_preaggregate.run_preaggregated(op, frame)
    if mode is ExecutionMode.VECTORIZED:
        return columnar.run_columnar(op, frame)
    driver = ReplayDriver if mode is ExecutionMode.REPLAY else BatchDriver
    return run_partitioned(op, frame, spark, driver)


def streaming_window(op: WindowOp, checkpoint: str | None = None) -> StreamingWindow:
    """The streaming window of ``op`` on a streaming source: its combined frame and the
    settings its query starts with, built once for a query on ``checkpoint`` (whose
    recorded number of key groups is read first; None: the session's number)."""
    windows = _streaming.setdefault(op, {})
    window = windows.get(checkpoint)
    if window is None:
        spark = op.source.df.sparkSession
        confs.check_all(spark)
        # before the query: Spark's planner runs the processor in a Python process of the
        # workers' Python, which would fail there with a bare ModuleNotFoundError
        ensure_workers_import_tidemark(spark)
        window = windows[checkpoint] = run_streaming_window(op, checkpoint)
    return window


def _unpersist(df: Any) -> None:
    # called when a plan node is garbage-collected, possibly after its session
    # stopped: there is then nothing left to release
    with contextlib.suppress(Exception):
        df.unpersist()


def release(op: WindowOp) -> None:
    """Unpersist the combined frames that the runs of ``op`` and of the windows before it
    in its chain keep. Their outputs still read; each action then runs the pipeline
    again. (A replay's arrival-ordered input stays while its source lives: other
    pipelines on the same source may still need it, and the range partitioning of
    its watermark scan cannot be computed again reliably.)"""
    node: PlanNode = op
    while isinstance(node, WindowOp):
        combined = _combined.get(node)
        if combined is not None:
            combined.unpersist()
        node = node.upstream


def element_frame(node: PlanNode, spark: Any) -> ElementFrame:
    """The elements of a bounded node as a frame with internal columns, computed once:
    a source's rows, or an upstream window's results."""
    frame = _elements.get(node)
    if frame is None:
        if isinstance(node, Source):
            frame = source_frame(node, spark)
            for df in frame.kept:  # a replay's input, persisted for its two passes
                weakref.finalize(node, _unpersist, df).atexit = False
        else:
            parent = element_frame(node.upstream, spark)
            frame = result_frame(node.output_schema, parent, combined_frame(node, spark))
        _elements[node] = frame
    return frame
