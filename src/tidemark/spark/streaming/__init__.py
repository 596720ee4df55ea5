"""Structured Streaming: the window operator per key group in Spark's stateful operators.

What a query computes is stated in the streaming guide (``docs/streaming.md``); how one
micro-batch runs, in ``docs/internals.md``. The package has two parts:

- :mod:`.driver`: what runs on the driver: a pipeline's window operation as a
  :class:`StreamingWindow` (:func:`window_stream` of a :class:`StreamPlan`), its key groups, the records kept
  beside the checkpoint, and :func:`write_outputs`, which starts the query;
- :mod:`.worker`: what runs in Spark's Python workers: the bindings Spark calls once per
  key group and micro-batch, and what they use (rows by key, each key's clocks, output
  rows, the group's state row, the call's figures), with the values the driver hands
  them (:class:`~.worker.config.ProcessorConfig`, the time mode, Spark's clock).

The driver imports the worker's modules (it builds what the workers run), never the
reverse: a worker loads no driver module, so the driver's names below are loaded on
first use, and so are the names that would load pandas and pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidemark.spark.streaming.worker.variables import STATE_NAME

if TYPE_CHECKING:
    from tidemark.spark.protocol.columns import DROPPED_OUTPUT, MAIN
    from tidemark.spark.streaming.driver.query import StreamingWindow, window_stream
    from tidemark.spark.streaming.driver.starting import select_output, write_outputs
    from tidemark.spark.streaming.driver.stream_plan import StreamPlan
    from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS

__all__ = [
    "StreamingWindow",
    "StreamPlan",
    "window_stream",
    "write_outputs",
    "select_output",
    "END_OF_INPUT_MS",
    "MAIN",
    "DROPPED_OUTPUT",
    "STATE_NAME",
]

_LAZY_NAMES = {
    "StreamingWindow": "tidemark.spark.streaming.driver.query",
    "window_stream": "tidemark.spark.streaming.driver.query",
    "StreamPlan": "tidemark.spark.streaming.driver.stream_plan",
    "select_output": "tidemark.spark.streaming.driver.starting",
    "write_outputs": "tidemark.spark.streaming.driver.starting",
    "END_OF_INPUT_MS": "tidemark.spark.streaming.worker.clock",
    "MAIN": "tidemark.spark.protocol.columns",
    "DROPPED_OUTPUT": "tidemark.spark.protocol.columns",
}


def __getattr__(name: str) -> Any:
    # Loaded on first use: a worker importing this package (to reach .worker) loads no
    # driver module, and the processor Spark's planner unpickles loads neither pandas
    # nor pyarrow (worker/processor.py).
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
