"""Structured Streaming: the window operator per key group in Spark's stateful operators.

What a query computes is stated in the streaming guide (``docs/streaming.md``). Following
one micro-batch through the package:

- :mod:`.from_plan` turns a pipeline's window operation into :func:`window_stream`'s
  arguments; :mod:`.query` builds the :class:`StreamingWindow` (the combined frame and
  its settings, as values) and :func:`write_outputs` starts its query;
- Spark calls a binding (:mod:`.bindings`) once per key group (:mod:`.keygroups`) and
  micro-batch; the binding is a :class:`~.groups.GroupStore` of its operator's state;
- :class:`~.groups.WindowGroups` runs the call: rows by key (:mod:`.inputs`), each
  key's clocks (:mod:`.time_advance`, on Spark's clock: :mod:`.clock`), one engine
  operator, output rows (:mod:`.outputs`), the group's row back (:mod:`.state`).

Chains of windows (:mod:`.chain`) and the time modes a query serves (:mod:`.modes`)
are the remaining pieces; :class:`~.config.ProcessorConfig` is what a worker is given.
"""

from tidemark.spark.streaming.query import (
    DROPPED_OUTPUT,
    END_OF_INPUT_MS,
    MAIN,
    STATE_NAME,
    StreamingWindow,
    select_output,
    window_stream,
    write_outputs,
)

__all__ = [
    "StreamingWindow",
    "window_stream",
    "write_outputs",
    "select_output",
    "END_OF_INPUT_MS",
    "MAIN",
    "DROPPED_OUTPUT",
    "STATE_NAME",
]
