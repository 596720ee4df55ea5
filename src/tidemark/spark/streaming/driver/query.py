"""Structured Streaming: a window operation as ONE streaming query.

:func:`window_stream` turns a streaming DataFrame into a :class:`StreamingWindow`: ONE
streaming frame that carries the window results and every side output (the late data,
what process functions emit with ``ctx.output``, and the count of dropped late records),
with the settings its query starts with; :func:`~.sinks.write_outputs` starts the query
and sends each output to its own sink with ``foreachBatch``, so the operator runs once
per micro-batch.

The number of key groups is decided first (:class:`~.keygroups.KeyGroups`: given, the
session's, or at a restart the one recorded beside the ``checkpoint``), then the
window is built once for it: its input (with Spark's watermark and each row's key group)
through Spark's stateful operator (:func:`key_group_operator`), whose workers run the
key groups (:mod:`tidemark.spark.streaming.worker`).

Contract: the query emits exactly what the engine emits when fed each micro-batch's
elements followed by the watermark Spark moved to (and the final watermark after an
end-of-input row); tidemark, not Spark, decides what is late. The statement, with key
groups, end of input, chains, processing time and idleness, is the streaming guide:
``docs/streaming.md``.

Examples
--------
A sink per output, written idempotently by batch id::

    window = window_stream(df, StreamPlan(spec, key_columns=["user"], ...))
    query = write_outputs(window, {
        "main": lambda d, b: d.write.mode("overwrite").parquet(f"{out}/main/batch={b}"),
        "late": lambda d, b: d.write.mode("overwrite").parquet(f"{out}/late/batch={b}"),
    }, checkpoint=f"{out}/_checkpoint", trigger={"availableNow": True})
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidemark.errors import InputDataError, WindowSpecError
from tidemark.spark.protocol.columns import (
    ALL_KEY,
    KEY_GROUP,
    TS,
    WATERMARK_MARK,
    WATERMARK_TIME,
    combined_schema,
    is_internal,
)
from tidemark.spark.protocol.keys import NULL_KEY_ADVICE, key_normaliser, null_key_message
from tidemark.spark.protocol.lossless import lossless_input, lossless_output
from tidemark.spark.protocol.source_partitions import union_by_partition
from tidemark.spark.protocol.timestamps import processor_column, timestamp_ms
from tidemark.spark.runtime.session import is_connect
from tidemark.spark.runtime.surfacing import raise_error_column
from tidemark.spark.streaming.driver import batch_records as records
from tidemark.spark.streaming.driver.chain import (
    prepare_upstream,
    upstream_schemas,
)
from tidemark.spark.streaming.driver.checkpoint import (
    CheckpointRecords,
    describe_window,
    read_records,
    results_kept,
    state_layout,
)
from tidemark.spark.streaming.driver.keygroups import KeyGroups, slot_column
from tidemark.spark.streaming.driver.packing import packed_input
from tidemark.spark.streaming.driver.stream_plan import WATERMARK_DELAY, StreamPlan, check_plan
from tidemark.spark.streaming.worker.bindings import WindowGroupFunction
from tidemark.spark.streaming.worker.clock import (
    END_OF_INPUT_COLUMN_MICROS,
    END_OF_INPUT_MS,
    check_spark_offset,
    column_shift_ms,
    watermark_delay_ms,
)
from tidemark.spark.streaming.worker.config import ProcessorConfig, UpstreamInput
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
from tidemark.spark.streaming.worker.variables import DELTAS, STATE_SCHEMA, StateLayout

__all__ = [
    "StreamingWindow",
    "window_stream",
    "key_group_operator",
    "check_one_window",
]


@dataclass(frozen=True, eq=False)
class StreamingWindow:
    """A streaming window as :func:`window_stream` built it: its combined frame and
    what starting its query needs, carried as values from definition to
    :func:`~.sinks.write_outputs`.

    Attributes
    ----------
    frame : DataFrame
        The combined streaming frame: results, side outputs and dropped counts
        (:mod:`tidemark.spark.protocol.columns`).
    side_schemas : mapping of str to StructType
        The schemas of the side outputs known when the window was built (its late data,
        and a chain's earlier windows' side outputs under their pass-through names).
    key_groups : KeyGroups
        Its number of key groups, fixed at its first start, and its most state partitions.
    spark_time_mode : TimeMode
        The time mode Spark runs the query in (ProcessingTime: a micro-batch at every
        trigger interval, so ``availableNow`` would never end).
    depth : int
        The window's place in its chain (1: on the source).
    feeds_downstream : bool
        Whether a later window of a chain may read it (its rows carry ``__tm_phase``).
    pipeline : tuple of dict
        What the state of each window of its chain depends on
        (:func:`~.checkpoint.describe_window`): a restart with another is refused.
    spark_offset_ms : int
        How far Spark's event-time clock runs ahead of the engine's
        (:mod:`~..worker.clock`), kept with the checkpoint.
    state_layout : StateLayout
        How the key groups' state is kept (:mod:`~..worker.deltas`), with the checkpoint.
    watermarks : WatermarkSetup or None
        How its watermark is made, for each micro-batch's record (:mod:`.batch_records`).
    recorded : CheckpointRecords or None
        The records of the checkpoint it was built for, read when it was built: its
        query's start compares the window with them (:func:`~.sinks.write_outputs`).
    """

    frame: DataFrame
    key_groups: KeyGroups
    spark_time_mode: TimeMode
    side_schemas: Mapping[str, StructType] = field(default_factory=dict)
    depth: int = 1
    feeds_downstream: bool = False
    pipeline: tuple[dict[str, str], ...] = ()
    spark_offset_ms: int = 0
    state_layout: StateLayout = StateLayout()
    watermarks: records.WatermarkSetup | None = None
    recorded: CheckpointRecords | None = None

    @property
    def chained(self) -> bool:
        """Whether it is a window of a chain (after an earlier one, or before a later)."""
        return self.depth > 1 or self.feeds_downstream

    @property
    def in_transform_with_state(self) -> bool:
        """Whether its key groups run in ``transformWithStateInPandas``
        (:func:`runs_in_transform_with_state`)."""
        return runs_in_transform_with_state(self.chained, self.state_layout)


def runs_in_transform_with_state(chained: bool, layout: StateLayout) -> bool:
    """Whether a window's key groups run in ``transformWithStateInPandas``: a window of a
    chain, or one in the deltas layout; else in ``applyInPandasWithState``."""
    return chained or layout.name == DELTAS


def window_stream(
    df: DataFrame | StreamingWindow,
    plan: StreamPlan,
    *,
    checkpoint: str | CheckpointRecords | None = None,
    max_parallelism: int | None = None,
    spark_offset_ms: int = 0,
) -> StreamingWindow:
    """Run a window operator per key (in key groups) on a stream: results, side outputs.

    Parameters
    ----------
    df : DataFrame or StreamingWindow
        A streaming DataFrame without a watermark of its own; or, for a window of a
        chain, the earlier window (built with ``feeds_downstream=True``): then the
        plan's ``timestamp_column`` is its ``__tm_ts`` and ``value_columns`` its result
        columns (see "Chains of windows" in the streaming guide).
    plan : StreamPlan
        The window, the columns it reads and writes, its clocks (:class:`.StreamPlan`).
    checkpoint : str or CheckpointRecords, optional
        The checkpoint the query will start on (:func:`~.sinks.write_outputs`'s), or its
        records already read (:func:`~.checkpoint.read_records`): read once, before the
        frame is built, and kept with the window for its start to compare, so that a
        restart keeps the number of key groups it recorded where the number is the
        session's default, and its state layout (else the session's
        ``spark.tidemark.streaming.stateLayout``, see the streaming guide's "State
        layouts"; a window of a chain takes its earlier window's).
        Without it, a restart on a checkpoint recorded with another default number is
        refused, naming the number.
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
    spark_offset_ms : {0, SPARK_OFFSET_MS}
        Spark's event-time clock ahead of the engine's (:mod:`~..worker.clock`: 0 shows
        Spark the real watermark); fixed at the first start; a chain's window takes its
        earlier's.

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
    time_mode = check_plan(source, plan, upstream)
    spark = source.sparkSession
    recorded = _records(spark, checkpoint, upstream)
    groups = _key_groups(spark, max_parallelism, recorded, upstream)
    if upstream is not None:
        spark_offset_ms, layout = upstream.spark_offset_ms, upstream.state_layout
    else:
        layout = state_layout(spark, recorded, plan.key_columns == (ALL_KEY,))
    check_spark_offset(spark_offset_ms)
    setup = _Setup(time_mode, groups.count, spark_offset_ms, layout)
    prepared, config = _key_group_input(source, plan, upstream, setup)
    output_schema = combined_schema(plan.result_schema, phase=plan.feeds_downstream)
    operator_schema = config.pandas_output.operator_schema(output_schema)
    frame = key_group_operator(prepared, config, operator_schema, _delay(plan, setup))
    return StreamingWindow(
        frame=config.pandas_output.restore(frame, output_schema),
        key_groups=groups,
        spark_time_mode=config.spark_time_mode(),
        side_schemas=_side_schemas(source, plan, upstream),
        depth=1 if upstream is None else upstream.depth + 1,
        feeds_downstream=plan.feeds_downstream,
        pipeline=(*(upstream.pipeline if upstream else ()), _described(source, plan, time_mode)),
        spark_offset_ms=spark_offset_ms,
        state_layout=layout,
        watermarks=records.watermark_setup(
            upstream, time_mode, plan.out_of_orderness_ms, plan.partitions
        ),
        recorded=recorded,
    )


@dataclass(frozen=True)
class _Setup:
    """What a window's query was decided to run with, before its input is built."""

    time_mode: TimeMode
    groups: int
    spark_offset_ms: int
    layout: StateLayout


def _key_group_input(
    source: DataFrame, plan: StreamPlan, upstream: StreamingWindow | None, setup: _Setup
) -> tuple[DataFrame, ProcessorConfig]:
    """The key groups' input (each row with its key group) and their processors' config."""
    input_names = plan.input_names
    keys, chained = list(plan.key_columns), None
    if upstream is None:
        prepared = _prepare_input(source, plan, setup.time_mode, setup.spark_offset_ms)
        prepared = prepared.withColumn(KEY_GROUP, slot_column(keys, setup.groups))
    else:
        prepared = prepare_upstream(source, input_names, keys, setup.groups)
        chained = UpstreamInput(
            upstream.depth, len(input_names), len(plan.result_schema.fields), plan.feeds_downstream
        )
    # what pandas would lose on the way in and out (NaN apart from null, nested values)
    prepared, pandas_input = lossless_input(prepared, range(len(input_names)))
    key_types = _type_names(source, plan.key_columns)
    config = ProcessorConfig(
        spec=plan.spec,
        value_names=plan.value_columns,
        value_types=_type_names(source, plan.value_columns),
        result_schema=plan.result_schema,
        time_mode=setup.time_mode,
        value_positions=tuple(input_names.index(c) for c in plan.value_columns),
        result_to_row=plan.result_to_row,
        key_positions=tuple(input_names.index(c) for c in plan.key_columns),
        key_types=key_types,
        timestamp_position=len(input_names),
        engine_key=plan.engine_key,
        idleness_ms=plan.idleness_ms,
        max_parallelism=setup.groups,
        upstream=chained,
        feeds_downstream=plan.feeds_downstream,
        metrics=True,
        spark_offset_ms=setup.spark_offset_ms,
        out_of_orderness_ms=plan.out_of_orderness_ms,
        pandas_input=pandas_input,
        pandas_output=lossless_output(plan.result_schema),
        key_normaliser=key_normaliser(key_types) if plan.engine_key is None else None,
        state_layout=setup.layout,
    )
    if plan.pre_aggregate is None:
        return prepared, config
    return plan.pre_aggregate.apply(prepared, config)


def _delay(plan: StreamPlan, setup: _Setup) -> int | None:
    """The delay of Spark's watermark (ms): an event-time window's, else None."""
    if not setup.time_mode.event_time or plan.out_of_orderness_ms is None:
        return None
    return watermark_delay_ms(plan.out_of_orderness_ms, setup.spark_offset_ms)


def _side_schemas(
    source: DataFrame, plan: StreamPlan, upstream: StreamingWindow | None
) -> dict[str, StructType]:
    """The side outputs' schemas known now: a chain's earlier windows', the late data."""
    schemas = upstream_schemas(upstream)
    late_tag = plan.spec.late_data_tag
    if late_tag is not None:
        schemas[late_tag.tag_id] = StructType([source.schema[c] for c in plan.value_columns])
    return schemas


def _described(source: DataFrame, plan: StreamPlan, time_mode: TimeMode) -> dict[str, str]:
    """What the window's state depends on, for the checkpoint's pipeline record."""
    return describe_window(
        plan.spec,
        key=_columns_of(source, plan.key_columns),
        values=_columns_of(source, plan.value_columns),
        time_mode=time_mode.value,
        **results_kept(plan.spec, plan.result_schema),
    )


def _records(
    spark: Any, checkpoint: str | CheckpointRecords | None, upstream: StreamingWindow | None
) -> CheckpointRecords | None:
    """The records of the checkpoint the query will start on, read once: given, or a
    chain's earlier window's; None without a checkpoint."""
    if checkpoint is None or isinstance(checkpoint, CheckpointRecords):
        return checkpoint
    if upstream is not None:
        return upstream.recorded
    return read_records(spark, checkpoint)


def _key_groups(
    spark: Any,
    given: int | None,
    recorded: CheckpointRecords | None,
    upstream: StreamingWindow | None,
) -> KeyGroups:
    """The number of key groups, decided before anything is built: a chain's windows
    share the first one's; a restart takes the number its checkpoint recorded."""
    if upstream is not None:
        return KeyGroups.decide(spark, upstream.key_groups.count)
    return KeyGroups.decide(spark, given, None if recorded is None else recorded.groups)


def _columns_of(df: DataFrame, names: Sequence[str]) -> str:
    return ", ".join(f"{name} {df.schema[name].dataType.simpleString()}" for name in names)


def _type_names(df: DataFrame, names: Sequence[str]) -> tuple[str, ...]:
    return tuple(type(df.schema[c].dataType).__name__ for c in names)


# ---------------------------------------------------------------------- input


def _prepare_input(
    df: DataFrame, plan: StreamPlan, time_mode: TimeMode, offset_ms: int
) -> DataFrame:
    """The processor's input: key and value columns, ``__tm_ts``, and (event time) the
    watermark on Spark's clock, ``offset_ms`` ahead of the engine's."""
    names = plan.input_names
    timestamp = stream_timestamp_ms(df.schema, plan.timestamp_column)
    shown = [*names, plan.timestamp_column]
    df = _refusing_null_keys(df, list(plan.key_columns), shown, timestamp)
    columns = [processor_column(df, c) for c in names]
    if not time_mode.event_time:
        return df.select(*columns, timestamp.alias(TS))
    assert plan.out_of_orderness_ms is not None
    delay = f"{watermark_delay_ms(plan.out_of_orderness_ms, offset_ms)} milliseconds"

    def watermarked(rows: DataFrame, index: int = 0) -> DataFrame:
        ts = F.col(TS)
        end_of_input = F.timestamp_micros(F.lit(END_OF_INPUT_COLUMN_MICROS))
        shifted = F.timestamp_millis(ts + F.lit(column_shift_ms(offset_ms)))
        event_time = F.when(ts >= F.lit(END_OF_INPUT_MS), end_of_input).otherwise(shifted)
        # The watermark column is dropped right away: Spark still tracks the watermark,
        # and with nothing to filter on it drops no late row before the processor.
        return (
            records.observe_input(rows.select(*columns, timestamp.alias(TS)), index, ts)
            .withColumn(WATERMARK_TIME, event_time)
            .withWatermark(WATERMARK_TIME, delay)
            .drop(WATERMARK_TIME)
        )

    if plan.partitions is None:
        return watermarked(df)
    marker = timestamp.isNotNull() & (timestamp >= F.lit(END_OF_INPUT_MS))
    return union_by_partition(df, plan.partitions, timestamp, marker, watermarked)


LAST_DATE = datetime.date(9999, 12, 31)
"""A DATE column's largest value: on a stream, its end-of-input marker."""


def stream_timestamp_ms(schema: StructType, column: str | None) -> Any:
    """The event time of ``column`` in long ms as a stream reads it: as every mode does
    (:func:`~tidemark.spark.protocol.timestamps.timestamp_ms`), except that a DATE column, whose
    days (midnights) never reach :data:`END_OF_INPUT_MS` (9999-12-31T23:59:59.999Z),
    ends its input with its largest value, :data:`LAST_DATE`: such a row is stamped
    ``END_OF_INPUT_MS``, the end-of-input marker a timestamp column carries."""
    ms = timestamp_ms(schema, column, "timestamp_column")
    if column is None or type(schema[column].dataType).__name__ != "DateType":
        return ms
    return F.when(F.col(f"`{column}`") == F.lit(LAST_DATE), F.lit(END_OF_INPUT_MS)).otherwise(ms)


def _refusing_null_keys(
    df: DataFrame, key_columns: list[str], shown: list[str | None], timestamp: Any
) -> DataFrame:
    """``df`` failing on a row whose key column is null, as BATCH and replays do (Flink:
    "Assigned key must not be null"), with the column and the row (``shown``'s columns)
    in the message; an end-of-input marker's key is never read, so it may be null.

    Checked in Spark SQL, before the rows reach a key group: a null key would otherwise
    be the engine's key None, and fail the engine's timers later in another way."""
    example = F.to_json(F.struct(*[F.col(f"`{c}`") for c in dict.fromkeys(shown) if c]))
    marker = F.coalesce(timestamp >= F.lit(END_OF_INPUT_MS), F.lit(False))
    for key in key_columns:
        if is_internal(key):  # window_all's constant, a key function's pickle
            continue
        column = F.col(f"`{key}`")
        message = F.concat(
            F.lit(null_key_message(key)),
            example,
            F.lit(f". {NULL_KEY_ADVICE}"),
        )
        failing = raise_error_column(InputDataError, message)
        df = df.withColumn(key, F.when(column.isNull() & ~marker, failing).otherwise(column))
    return df


# ---------------------------------------------------------------------- operator


def key_group_operator(
    prepared: DataFrame,
    config: ProcessorConfig,
    output_schema: StructType,
    watermark_delay: int | None,
) -> DataFrame:
    """``prepared`` (rows with their key group) through the window's key groups: in
    ``applyInPandasWithState``, or in ``transformWithStateInPandas`` for a window of a
    chain or in the deltas state layout.

    Spark only accepts an event-time timeout, and only shows the function its watermark,
    when a column of the operator's input carries the watermark's metadata; and it drops
    input rows behind the watermark on that column. The watermark's own column is
    projected away before (:func:`_prepare_input`), so a null column carries the
    metadata (``watermark_delay``, ms) instead: Spark's watermark is unchanged, and no
    row is behind a null, so Spark drops none."""
    chained = config.upstream is not None or config.feeds_downstream
    if runs_in_transform_with_state(chained, config.state_layout):
        packed, config = packed_input(prepared, config)
        processor = WindowStatefulProcessor(config)
        spark_time_mode = config.spark_time_mode().value
        return packed.groupBy(F.col(KEY_GROUP)).transformWithStateInPandas(
            processor, output_schema, "Append", spark_time_mode
        )
    grouped = prepared.groupBy(F.col(KEY_GROUP))
    function = WindowGroupFunction(config)
    if watermark_delay is not None:
        metadata = {WATERMARK_DELAY: watermark_delay}
        marker = F.lit(None).cast("timestamp").alias(WATERMARK_MARK, metadata=metadata)
        grouped = prepared.select("*", marker).groupBy(F.col(KEY_GROUP))
    return grouped.applyInPandasWithState(
        function, output_schema, STATE_SCHEMA, "append", function.timeout()
    )


_STATEFUL_NODES = (
    "TransformWithStateInPySpark ",  # Spark 4.1+
    "TransformWithStateInPandas ",  # the same node's name on Spark 4.0
    "FlatMapGroupsInPandasWithState ",
)


def check_one_window(window: StreamingWindow) -> None:
    """Refuse a frame that combines several windows' outputs (a union) before its query
    starts: Spark refuses two ``applyInPandasWithState`` itself, but not two
    ``transformWithStateInPandas`` (a window in the deltas layout), whose query would
    run both windows on one watermark, the earlier of theirs. Read from the analyzed
    plan of a classic session; over Spark Connect only Spark's own refusal applies."""
    if is_connect(window.frame.sparkSession):
        return
    plan = window.frame._jdf.queryExecution().analyzed().toString()
    if sum(plan.count(node) for node in _STATEFUL_NODES) > window.depth:
        raise one_window_per_query()


def one_window_per_query() -> WindowSpecError:
    return WindowSpecError(
        "a streaming query runs one window (or one chain) per query: Spark runs one "
        "applyInPandasWithState per query, and this DataFrame combines several "
        "windows' outputs (a union?). Start a query per window with write_outputs"
    )
