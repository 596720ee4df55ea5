"""Structured Streaming: the window operator per key group in Spark's stateful operators.

:mod:`.query` builds the streaming query (:func:`window_stream`, :func:`write_outputs`),
:mod:`.processor` runs the engine for a key group, :mod:`.bindings` is the Spark
operator that calls it (``applyInPandasWithState``; ``transformWithStateInPandas`` in a
chain), :mod:`.state` how the
engine's state sits in Spark's state store, :mod:`.clock` how Spark's watermark and
processing time map to the engine's, and :mod:`.plan` turns a pipeline into a query.
"""

from tidemark.spark.streaming.query import (
    DROPPED_OUTPUT,
    END_OF_INPUT_MS,
    MAIN,
    STATE_NAME,
    select_output,
    window_stream,
    write_outputs,
)

__all__ = [
    "window_stream",
    "write_outputs",
    "select_output",
    "END_OF_INPUT_MS",
    "MAIN",
    "DROPPED_OUTPUT",
    "STATE_NAME",
]
