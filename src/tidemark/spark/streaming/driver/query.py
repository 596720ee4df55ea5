"""Structured Streaming: a window operation as ONE streaming query.

:func:`window_stream` turns a streaming DataFrame into a :class:`StreamingWindow`: ONE
streaming frame that carries the window results and every side output (the late data,
what process functions emit with ``ctx.output``, and the count of dropped late records),
with the settings its query starts with; :func:`~.sinks.write_outputs` starts the query
and sends each output to its own sink with ``foreachBatch``, so the operator runs once
per micro-batch.

The number of key groups is decided first (:class:`~.keygroups.KeyGroups`: given, the
session's, or at a restart the one recorded beside the ``checkpoint``), then the frame
is built once for it (:mod:`.frame`).

Contract: the query emits exactly what the engine emits when fed each micro-batch's
elements followed by the watermark Spark moved to (and the final watermark after an
end-of-input row); tidemark, not Spark, decides what is late. The statement, with key
groups, end of input, chains, processing time and idleness, is the streaming guide:
``docs/streaming.md``.

Examples
--------
A sink per output, written idempotently by batch id::

    window = window_stream(df, key_columns=["user"], timestamp_column="ts", ...)
    query = write_outputs(window, {
        "main": lambda d, b: d.write.mode("overwrite").parquet(f"{out}/main/batch={b}"),
        "late": lambda d, b: d.write.mode("overwrite").parquet(f"{out}/late/batch={b}"),
    }, checkpoint=f"{out}/_checkpoint", trigger={"availableNow": True})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from tidemark._engine.operator import WindowOperator
from tidemark.outputs import OutputTag
from tidemark.spark.streaming.driver.chain import (
    check_chain_mode,
    prepare_upstream,
    upstream_schemas,
)
from tidemark.spark.streaming.driver.checkpoint import describe_window, stored_groups
from tidemark.spark.streaming.driver.checks import check_arguments, check_time_mode
from tidemark.spark.streaming.driver.frame import input_names, key_group_operator, source_input
from tidemark.spark.streaming.driver.keygroups import KeyGroups
from tidemark.spark.streaming.worker.config import ProcessorConfig, UpstreamInput
from tidemark.spark.streaming.worker.modes import TimeMode

__all__ = ["StreamingWindow", "window_stream"]


@dataclass(frozen=True, eq=False)
class StreamingWindow:
    """A streaming window as :func:`window_stream` built it: its combined frame and
    what starting its query needs, carried as values from definition to
    :func:`~.sinks.write_outputs`.

    Attributes
    ----------
    frame : DataFrame
        The combined streaming frame: results, side outputs and dropped counts
        (:mod:`tidemark.spark.columns`).
    key_groups : KeyGroups
        The query's number of key groups, fixed at its first start, and the most state
        partitions it starts with.
    spark_time_mode : TimeMode
        The time mode Spark runs the query in (ProcessingTime: a micro-batch at every
        trigger interval, so ``availableNow`` would never end).
    side_schemas : mapping of str to StructType
        The schemas of the side outputs known when the window was built (its late data,
        and a chain's earlier windows' side outputs under their pass-through names).
    depth : int
        The window's place in its chain (1: on the source).
    feeds_downstream : bool
        Whether a later window of a chain may read it (its rows carry ``__tm_phase``).
    pipeline : tuple of dict
        What the state of each window of its chain depends on
        (:func:`~.checkpoint.describe_window`): a restart with another is refused.
    """

    frame: DataFrame
    key_groups: KeyGroups
    spark_time_mode: TimeMode
    side_schemas: Mapping[str, StructType] = field(default_factory=dict)
    depth: int = 1
    feeds_downstream: bool = False
    pipeline: tuple[dict[str, str], ...] = ()


def window_stream(
    df: DataFrame | StreamingWindow,
    *,
    key_columns: list[str],
    timestamp_column: str | None,
    make_operator: Callable[[], WindowOperator],
    out_of_orderness_ms: int | None,
    value_columns: list[str],
    result_schema: StructType,
    result_to_row: Callable[[Any, int], tuple],
    late_tag: OutputTag | None,
    time_mode: TimeMode | str = TimeMode.EVENT_TIME,
    idleness_ms: int | None = None,
    engine_key: Callable[[tuple], Any] | None = None,
    max_parallelism: int | None = None,
    feeds_downstream: bool = False,
    checkpoint: str | None = None,
) -> StreamingWindow:
    """Run a window operator per key (in key groups) on a streaming DataFrame; results
    and side outputs.

    Parameters
    ----------
    df : DataFrame or StreamingWindow
        A streaming DataFrame without a watermark of its own; or, for a window of a
        chain, the earlier window (built with ``feeds_downstream=True``): then
        ``timestamp_column`` is its ``__tm_ts`` and ``value_columns`` its result columns
        (see "Chains of windows" in the streaming guide).
    key_columns : list of str
        The grouping columns; the engine's key is the value of one column, or the tuple.
    timestamp_column : str or None
        Event time: long milliseconds or a timestamp. None only for processing time.
    make_operator : callable
        ``() -> WindowOperator``, shipped to the workers (it must pickle).
    out_of_orderness_ms : int or None
        The bounded out-of-orderness of the watermark strategy; required for EventTime.
    value_columns : list of str
        The columns of the Rows handed to the user's functions (and of late rows).
    result_schema : StructType
        The columns of a main result.
    result_to_row : callable
        ``(result, timestamp_ms) -> tuple`` in the order of ``result_schema``.
    late_tag : OutputTag, optional
        The operator's late-data tag; its rows decode to ``value_columns``.
    time_mode : TimeMode or {"EventTime", "ProcessingTime", "EventTimeAndProcessingTime", "None"}
        Which engine timers the query serves ("None": count windows without timers). With
        processing time among them Spark runs the query in ProcessingTime mode: give it
        a processing-time trigger (see the streaming guide).
    idleness_ms : int, optional
        Event time only: let the watermark advance with processing time once it stood
        still this long (see the streaming guide); the query then runs in Spark's
        ProcessingTime mode and needs a processing-time trigger.
    engine_key : callable, optional
        Spark's key tuple -> the engine's key (e.g. unpickle a function key's column).
    max_parallelism : int, optional
        The number of key groups (Flink's ``maxParallelism``): one processor call per
        group and micro-batch serves all its keys. Fixed when the query first starts
        and kept with its state; a restart with another value fails. More groups: a
        smaller state row per call (Spark copies it whole), more calls. Default: the
        session's ``spark.tidemark.streaming.maxParallelism``, else 4 groups per state
        partition, ``4 x min(spark.sql.shuffle.partitions, cores, 32)``, and a restart
        on ``checkpoint`` takes the number recorded there; given (here or by the
        session), the query gets at most one state partition per group. A window of a
        chain takes its earlier window's.
    feeds_downstream : bool
        A later window of a chain reads the result: add ``__tm_phase``.
    checkpoint : str, optional
        The checkpoint the query will start on (:func:`~.sinks.write_outputs`'s): read
        before the frame is built, so that a restart keeps the number of key groups it
        recorded where the number is the session's default. Without it, a restart on a
        checkpoint recorded with another default number is refused, naming the number.
        A window of a chain takes its earlier window's number.

    Returns
    -------
    StreamingWindow
        Its ``frame`` is streaming, append mode: ``__tm_output`` ("main", a tag id, or
        ``"__late_records_dropped"``), ``__tm_ts`` (long ms), the result columns (null
        on side-output rows), ``__tm_side`` (a pickled side-output value) and
        ``__tm_dropped`` (late records dropped by that key in that batch). Split it with
        :func:`~.sinks.select_output` or :func:`~.sinks.write_outputs`.
    """
    upstream = df if isinstance(df, StreamingWindow) else None
    source = df.frame if isinstance(df, StreamingWindow) else df
    time_mode = check_arguments(source, key_columns, timestamp_column, value_columns, time_mode)
    operator = make_operator()
    check_time_mode(operator.assigner, time_mode, out_of_orderness_ms, idleness_ms)
    if upstream is not None or feeds_downstream:
        check_chain_mode(operator.assigner, time_mode, idleness_ms, upstream)
    groups = _key_groups(source.sparkSession, max_parallelism, checkpoint, upstream)
    names = input_names(key_columns, value_columns)
    config = ProcessorConfig(
        make_operator=make_operator,
        time_mode=time_mode,
        value_names=tuple(value_columns),
        value_types=_type_names(source, value_columns),
        value_positions=tuple(names.index(c) for c in value_columns),
        result_names=tuple(result_schema.fieldNames()),
        result_to_row=result_to_row,
        key_positions=tuple(names.index(c) for c in key_columns),
        key_types=_type_names(source, key_columns),
        timestamp_position=len(names),
        engine_key=engine_key,
        idleness_ms=idleness_ms,
        max_parallelism=groups.count,
        upstream=_chained(upstream, len(names), result_schema, feeds_downstream),
        feeds_downstream=feeds_downstream,
        result_schema=result_schema,
        metrics=True,
    )
    event_time_ms = out_of_orderness_ms if time_mode.event_time else None
    if upstream is None:
        prepared = source_input(
            source, key_columns, value_columns, timestamp_column, event_time_ms, groups.count
        )
    else:
        prepared = prepare_upstream(source, names, key_columns, groups.count)
    described = describe_window(
        operator,
        key=_columns_of(source, key_columns),
        values=_columns_of(source, value_columns),
        time_mode=time_mode.value,
    )
    return StreamingWindow(
        frame=key_group_operator(prepared, config, result_schema, event_time_ms),
        key_groups=groups,
        spark_time_mode=config.spark_time_mode(),
        side_schemas=_side_schemas(source, upstream, late_tag, value_columns),
        depth=1 if upstream is None else upstream.depth + 1,
        feeds_downstream=feeds_downstream,
        pipeline=(*(upstream.pipeline if upstream else ()), described),
    )


def _key_groups(
    spark: Any, given: int | None, checkpoint: str | None, upstream: StreamingWindow | None
) -> KeyGroups:
    """The number of key groups, decided before anything is built: a chain's windows
    share the first one's; a restart reads the number its checkpoint recorded."""
    if upstream is not None:
        return KeyGroups.decide(spark, upstream.key_groups.count)
    recorded = None if checkpoint is None else stored_groups(spark, checkpoint)
    return KeyGroups.decide(spark, given, recorded)


def _chained(
    upstream: StreamingWindow | None,
    input_count: int,
    result_schema: StructType,
    feeds_downstream: bool,
) -> UpstreamInput | None:
    """How the processor reads the earlier window of its chain (None: the source)."""
    if upstream is None:
        return None
    return UpstreamInput(upstream.depth, input_count, len(result_schema.fields), feeds_downstream)


def _side_schemas(
    source: DataFrame,
    upstream: StreamingWindow | None,
    late_tag: OutputTag | None,
    value_columns: list[str],
) -> dict[str, StructType]:
    """The side outputs' schemas known here: the chain's earlier windows', the late data's."""
    schemas = upstream_schemas(upstream)
    if late_tag is not None:
        schemas[late_tag.tag_id] = StructType([source.schema[c] for c in value_columns])
    return schemas


def _columns_of(df: DataFrame, names: list[str]) -> str:
    return ", ".join(f"{name} {df.schema[name].dataType.simpleString()}" for name in names)


def _type_names(df: DataFrame, names: list[str]) -> tuple[str, ...]:
    return tuple(type(df.schema[c].dataType).__name__ for c in names)
