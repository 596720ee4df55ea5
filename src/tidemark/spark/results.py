"""Where a window operation's outputs go: its results, each side output and its dropped
count, all read from ONE run of the operator (:func:`tidemark.spark.execution.combined_frame`).

:class:`~tidemark.spark.api.WindowResultStream` defines a pipeline; this module turns
the outputs a user asks of it into DataFrames and sinks: :func:`side_output_schema`
(what a side output decodes to), :class:`SideOutputStream` (one side output),
:func:`named_sinks` (``write_outputs``' sinks by their ``__tm_output`` name, a chain's
earlier windows included) and :func:`late_records_dropped` (Flink's
``numLateRecordsDropped`` of a bounded run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.outputs import OutputTag
from tidemark.spark import columns, execution
from tidemark.spark.codec import parse_schema
from tidemark.spark.plan import WindowOp
from tidemark.spark.streaming.from_plan import chain_output_name
from tidemark.spark.surfacing import raising_tidemark_errors

__all__ = ["SideOutputStream", "side_output_schema", "named_sinks", "late_records_dropped"]


@dataclass(eq=False)
class SideOutputStream:
    """One side output of a window operation (hashable, so that it can key a sink in
    :meth:`~tidemark.spark.api.WindowResultStream.write_outputs`)."""

    parent: Any  # the WindowResultStream it belongs to
    tag: OutputTag
    schema: Any

    def to_dataframe(self) -> Any:
        """The side output's rows, decoded into its schema (from the parent's one run)."""
        return columns.side_output(self.parent.combined_dataframe(), self.tag.tag_id, self.schema)


def side_output_schema(op: WindowOp, tag: Any, spark: Any) -> Any:
    """The schema side output ``tag`` of ``op`` decodes to: the input's for the late
    data, ``tag.type_info`` for what a process function emits."""
    if not isinstance(tag, OutputTag):
        raise WindowSpecError(f"`tag` must be an OutputTag; got {tag!r}")
    if tag == op.late_tag:
        return op.upstream.schema
    if tag.type_info is not None:
        return parse_schema(tag.type_info, spark)
    raise WindowSpecError(
        f"side output {tag!r} needs a schema: create it as OutputTag({tag.tag_id!r}, "
        "'col type, ...')"
    )


def named_sinks(last: Any, sinks: dict[Any, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``write_outputs``' sinks under their ``__tm_output`` names in the combined frame
    of ``last`` (a WindowResultStream), and the schemas of the side outputs among them.

    A key is an output of ``last`` (``"main"``, an OutputTag, ``"__late_records_dropped"``),
    a :class:`SideOutputStream`, or a pair ``(earlier, output)`` for an earlier window
    of ``last``'s chain."""
    named: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for key, sink in sinks.items():
        if isinstance(key, SideOutputStream):
            stream, output = key.parent, key.tag
        elif isinstance(key, tuple) and len(key) == 2:
            stream, output = key
        else:
            stream, output = last, key
        target = getattr(stream, "plan", None)
        target = target if isinstance(target, WindowOp) else None
        # refuses a target that is not ``last`` or an earlier window of its chain
        name = chain_output_name(last.plan, target, output)
        named[name] = sink
        if target is None or not isinstance(output, OutputTag):
            continue
        if output != target.late_tag and output.type_info:
            schemas[name] = side_output_schema(target, output, last._spark)
    return named, schemas


def late_records_dropped(op: WindowOp, spark: Any) -> int:
    """Flink's ``numLateRecordsDropped`` of a bounded run of ``op``."""
    if op.source.streaming:
        raise WindowSpecError(
            "num_late_records_dropped() needs a bounded DataFrame; on a stream, give "
            "write_outputs a sink for '__late_records_dropped'"
        )
    with raising_tidemark_errors():
        return columns.num_late_records_dropped(execution.combined_frame(op, spark))
