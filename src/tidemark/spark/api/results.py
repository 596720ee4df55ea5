"""Where a window operation's outputs go: its results, each side output and its dropped
count, all read from ONE run of the operator (:func:`tidemark.spark.execution.combined_frame`).

:class:`~tidemark.spark.api.streams.WindowResultStream` defines a pipeline; this module turns
the outputs a user asks of it into DataFrames and sinks: :func:`side_output_schema`
(what a side output decodes to), :class:`SideOutputStream` (one side output),
:class:`ExplainableResult` (a bounded result's ``explain``: why a window (not) fired),
:func:`named_sinks` (``write_outputs``' sinks by their ``__tm_output`` name, a chain's
earlier windows included), :func:`bounded_outputs` (the same sinks of a bounded run,
each with its output's DataFrame), :func:`late_records_dropped` (Flink's
``numLateRecordsDropped`` of a bounded run) and :func:`run_metrics` (the figures of a
bounded run, :mod:`tidemark.spark.protocol.figures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.outputs import OutputTag
from tidemark.spark import execution
from tidemark.spark.api.key_events import NO_KEY, explanation
from tidemark.spark.plan import WindowOp
from tidemark.spark.protocol import columns, figures
from tidemark.spark.protocol.schemas import parse_schema
from tidemark.spark.runtime.surfacing import raising_tidemark_errors
from tidemark.spark.streaming.driver.from_plan import chain_output_name
from tidemark.spark.streaming.driver.starting import check_sinks
from tidemark.spark.streaming.driver.starting import write_outputs as start_query

__all__ = [
    "ExplainableResult",
    "write_outputs",
    "SideOutputStream",
    "side_output_schema",
    "named_sinks",
    "bounded_outputs",
    "late_records_dropped",
    "run_metrics",
]


@dataclass(eq=False)
class SideOutputStream:
    """One side output of a window operation (hashable, so that it can key a sink in
    :meth:`~tidemark.spark.api.streams.WindowResultStream.write_outputs`)."""

    parent: Any  # the WindowResultStream it belongs to
    tag: OutputTag
    schema: Any

    def to_dataframe(self) -> Any:
        """The side output's rows, decoded into its schema (from the parent's one run)."""
        return columns.side_output(self.parent.combined_dataframe(), self.tag.tag_id, self.schema)


class ExplainableResult:
    """What a window result answers about itself (a base of
    :class:`~tidemark.spark.api.streams.WindowResultStream`, which has ``_plan`` and ``_spark``)."""

    _plan: WindowOp
    _spark: Any

    def explain(
        self, key: Any = NO_KEY, window: Any = None, timestamp: Any = None, time_range: Any = None
    ) -> Any:
        """Why a window of ``key`` fired, when, with what, or why not: the engine replays
        the key's input as this bounded run fed it (BATCH or replay), only that key's
        rows read back (``docs/why-no-result.md``, "On Spark: BATCH and replay").

        Parameters
        ----------
        key : optional
            The key as the window's functions see it (a tuple for several key columns; a
            timestamp as a naive UTC or an aware ``datetime``); left out for ``window_all``.
        window, time_range : (start, end), optional
            Int ms or ``datetime`` (naive: UTC): one window of the key, or the windows
            and elements of a time range.
        timestamp : int or datetime, optional
            The key's elements at this event time: where did they go?

        Returns
        -------
        tidemark.explain.Explanation
            The facts (``.to_dict()``), the answer in words (``.text()``) and the key's
            timeline (``.picture(path)``).

        Raises
        ------
        WindowSpecError
            On a stream (its windows are explained from its checkpoint:
            ``tidemark.spark.explain_checkpoint``), on BATCH processing time (the wall
            clock is not recorded), a key that does not fit the window's key or that no
            element has.
        ExplainError
            A ``window`` or ``timestamp`` that is not the key's.
        """
        return explanation(self._plan, self._spark, key, window, timestamp, time_range)


def side_output_schema(op: WindowOp, tag: Any, spark: Any) -> Any:
    """The schema side output ``tag`` of ``op`` decodes to: the input's for the late
    data, ``tag.type_info`` for what a process function emits."""
    if not isinstance(tag, OutputTag):
        raise WindowSpecError(f"`tag` must be an OutputTag; got {tag!r}")
    if tag == op.late_tag:
        late = op.upstream.schema
        given = None if tag.type_info is None else parse_schema(tag.type_info, spark)
        if given is not None and given.simpleString() != late.simpleString():
            raise WindowSpecError(
                f"side output {tag!r} is the late-data tag of side_output_late_data, whose "
                f"rows have the input's schema {late.simpleString()}; got type_info "
                f"{tag.type_info!r}. Give the function's side output a tag id of its own"
            )
        return late
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
        target, output, name = _sink_target(last, key)
        named[name] = sink
        if target is None or not isinstance(output, OutputTag):
            continue
        if output == target.late_tag:
            side_output_schema(target, output, last._spark)  # refuses another type_info
        elif output.type_info:
            schemas[name] = side_output_schema(target, output, last._spark)
    return named, schemas


def bounded_outputs(last: Any, sinks: dict[Any, Any]) -> list[tuple[Any, Any]]:
    """``write_outputs``' sinks of a bounded run of ``last``, each as ``(DataFrame of
    its output, sink)``, in the order given; keys as in :func:`named_sinks`. The
    DataFrames read the combined frames of ``last`` and of the windows before it, each
    computed once (:func:`tidemark.spark.execution.combined_frame`)."""
    check_sinks(sinks)
    outputs = []
    for key, sink in sinks.items():
        target, output, _ = _sink_target(last, key)
        assert target is not None  # a bounded chain's windows are all WindowOps
        df = _bounded_output(target, output, last._spark, keep=len(sinks) > 1)
        outputs.append((df, sink))
    return outputs


def _bounded_output(op: WindowOp, output: Any, spark: Any, keep: bool) -> Any:
    """The DataFrame of ``output`` (a name or an OutputTag) of a bounded run of ``op``
    (``keep``: persist the run, which several sinks read)."""
    late = op.late_tag
    if isinstance(output, str) and late is not None and output == late.tag_id:
        output = late
    combined = execution.combined_frame(op, spark, keep)
    if isinstance(output, OutputTag):
        schema = side_output_schema(op, output, spark)
        return columns.side_output(combined, output.tag_id, schema)
    if output == columns.DROPPED_OUTPUT:
        return columns.dropped_counts(combined)
    if output == columns.MAIN:
        return columns.main_output(combined, op.output_schema)
    raise WindowSpecError(
        f"`sinks` must name 'main', '__late_records_dropped' or a side output's OutputTag "
        f"(a process function's side outputs need their tag's schema); got {output!r}"
    )


def _sink_target(last: Any, key: Any) -> tuple[WindowOp | None, Any, str]:
    """The window a ``write_outputs`` key names, its output, and that output's name in
    ``last``'s streaming combined frame (:func:`chain_output_name`, which refuses a
    window that is not ``last`` or before it)."""
    if isinstance(key, SideOutputStream):
        stream, output = key.parent, key.tag
    elif isinstance(key, tuple) and len(key) == 2:
        stream, output = key
    else:
        stream, output = last, key
    target = getattr(stream, "plan", None)
    target = target if isinstance(target, WindowOp) else None
    return target, output, chain_output_name(last.plan, target, output)


def late_records_dropped(op: WindowOp, spark: Any) -> int:
    """Flink's ``numLateRecordsDropped`` of a bounded run of ``op``."""
    if op.source.streaming:
        raise WindowSpecError(
            "num_late_records_dropped() needs a bounded DataFrame; on a stream, give "
            "write_outputs a sink for '__late_records_dropped'"
        )
    with raising_tidemark_errors():
        return columns.num_late_records_dropped(execution.combined_frame(op, spark))


def run_metrics(op: WindowOp, spark: Any) -> dict[str, Any]:
    """The figures of a bounded run of ``op`` (:func:`tidemark.spark.protocol.figures.bounded_metrics`),
    read from its kept run: one aggregation over the kept rows, which runs the pipeline
    only when no output was read yet (the run is then kept for the outputs read next)."""
    if op.source.streaming:
        raise WindowSpecError(
            "metrics() needs a bounded DataFrame; on a stream, each micro-batch's progress "
            "carries them: query.lastProgress['observedMetrics']['tidemark'] (see "
            "docs/watching.md)"
        )
    with raising_tidemark_errors():
        engine_run = execution.mode_of(op, spark) is not execution.ExecutionMode.SQL
        combined = execution.combined_frame(op, spark, keep=True)
        return figures.bounded_metrics(combined, engine_run)


def write_outputs(
    last: Any, sinks: dict[Any, Any], checkpoint: str | None, trigger: dict[str, Any] | None
) -> Any:
    """What :meth:`~tidemark.spark.api.streams.WindowResultStream.write_outputs` does (its
    docstring is the contract): a stream's query is started by
    :func:`tidemark.spark.streaming.write_outputs`, a bounded run's sinks called here."""
    if not last.source.streaming:
        _write_bounded(last, sinks, trigger)
        return None
    if checkpoint is None:
        raise WindowSpecError(
            "`checkpoint` is needed on a streaming DataFrame: the query keeps its state, "
            "timers and offsets there; got checkpoint=None: give a directory, e.g. "
            "checkpoint='out/_checkpoint'"
        )
    named, schemas = named_sinks(last, sinks)
    window = execution.streaming_window(last.plan, checkpoint)
    return start_query(window, named, checkpoint, trigger, schemas=schemas)


def _write_bounded(last: Any, sinks: dict[Any, Any], trigger: dict[str, Any] | None) -> None:
    if trigger is not None:
        raise WindowSpecError(
            "`trigger` applies to a streaming query; this pipeline reads a bounded "
            f"DataFrame, which write_outputs runs once; got trigger={trigger!r}: drop it"
        )
    outputs = bounded_outputs(last, sinks)
    try:
        for df, sink in outputs:
            sink(df, 0)
    finally:
        last.unpersist()
