"""Structured Streaming: a window operation as ONE streaming query.

:func:`window_stream` turns a streaming DataFrame into a :class:`StreamingWindow`: ONE
streaming frame that carries the window results and every side output (the late data,
what process functions emit with ``ctx.output``, and the count of dropped late records),
with the settings its query starts with; :func:`write_outputs` starts the query and
sends each output to its own sink with ``foreachBatch``, so the operator runs once per
micro-batch.

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

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidemark._engine.operator import WindowOperator
from tidemark.errors import WindowSpecError
from tidemark.outputs import OutputTag
from tidemark.spark.columns import (
    DROPPED,
    DROPPED_OUTPUT,
    KEY_GROUP,
    MAIN,
    OUTPUT,
    PHASE,
    SIDE,
    TS,
    WATERMARK_TIME,
    SideDecoder,
    combined_schema,
    dropped_counts,
    is_dropped_output,
)
from tidemark.spark.keys import key_normaliser
from tidemark.spark.lossless import lossless_input, lossless_output
from tidemark.spark.preflight import streaming_settings
from tidemark.spark.streaming.bindings import WATERMARK_DELAY, key_group_operator
from tidemark.spark.streaming.chain import (
    UpstreamInput,
    check_chain_mode,
    prepare_upstream,
    upstream_schemas,
)
from tidemark.spark.streaming.checkpoint import (
    check_checkpoint,
    describe_window,
    results_kept,
    stored_groups,
)
from tidemark.spark.streaming.clock import (
    COLUMN_SHIFT_MS,
    END_OF_INPUT_COLUMN_MICROS,
    END_OF_INPUT_MS,
    watermark_delay_ms,
)
from tidemark.spark.streaming.config import ProcessorConfig
from tidemark.spark.streaming.keygroups import (
    check_max_parallelism,
    explicit_max_parallelism,
    session_max_parallelism,
    slot_column,
    state_partitions_cap,
)
from tidemark.spark.streaming.metrics import observed_chain
from tidemark.spark.streaming.modes import EVENT_TIME, PROCESSING_TIME, TIME_MODES, check_time_mode
from tidemark.spark.streaming.state import STATE_NAME
from tidemark.spark.surfacing import TidemarkStreamingQuery
from tidemark.spark.timestamps import timestamp_ms
from tidemark.time import TimeDomain

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

_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


@dataclass(frozen=True, eq=False)
class StreamingWindow:
    """A streaming window as :func:`window_stream` built it: its combined frame and
    what starting its query needs, carried as values from definition to
    :func:`write_outputs`.

    Attributes
    ----------
    frame : DataFrame
        The combined streaming frame: results, side outputs and dropped counts
        (:mod:`tidemark.spark.columns`).
    side_schemas : mapping of str to StructType
        The schemas of the side outputs known when the window was built (its late data,
        and a chain's earlier windows' side outputs under their pass-through names).
    max_parallelism : int
        The query's number of key groups, fixed at its first start.
    state_partitions_cap : int
        The most state partitions the query starts with
        (:func:`~tidemark.spark.streaming.config.state_partitions_cap`).
    spark_time_mode : str
        The time mode Spark runs the query in (ProcessingTime: a micro-batch at every
        trigger interval, so ``availableNow`` would never end).
    depth : int
        The window's place in its chain (1: on the source).
    feeds_downstream : bool
        Whether a later window of a chain may read it (its rows carry ``__tm_phase``).
    rebuild : callable, optional
        ``groups -> StreamingWindow``: the same window with another number of key
        groups, where the number is the session's default (not given): a restart adopts
        the number its checkpoint holds. None where the number was given.
    pipeline : tuple of dict
        What the state of each window of its chain depends on
        (:func:`~tidemark.spark.streaming.checkpoint.describe_window`): a restart with
        another is refused.
    """

    frame: DataFrame
    max_parallelism: int
    state_partitions_cap: int
    spark_time_mode: str
    side_schemas: Mapping[str, StructType] = field(default_factory=dict)
    depth: int = 1
    feeds_downstream: bool = False
    pipeline: tuple[dict[str, str], ...] = ()
    rebuild: Callable[[int], StreamingWindow] | None = None


@dataclass(frozen=True)
class _Rebuild:
    """:attr:`StreamingWindow.rebuild`: :func:`window_stream` called again with another
    number of key groups (a chain's earlier windows rebuilt first)."""

    source: DataFrame | StreamingWindow
    arguments: dict[str, Any]

    def __call__(self, groups: int) -> StreamingWindow:
        source = self.source
        if isinstance(source, StreamingWindow):
            assert source.rebuild is not None
            return window_stream(source.rebuild(groups), **self.arguments)
        return window_stream(source, **self.arguments, max_parallelism=groups)


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
    time_mode: str = EVENT_TIME,
    idleness_ms: int | None = None,
    engine_key: Callable[[tuple], Any] | None = None,
    max_parallelism: int | None = None,
    feeds_downstream: bool = False,
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
    time_mode : {"EventTime", "ProcessingTime", "EventTimeAndProcessingTime", "None"}
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
        partition, ``4 x min(spark.sql.shuffle.partitions, cores, 32)``, and a restart takes
        the checkpoint's; given (here or by the
        session), the query gets at most one state partition per group. A window of a
        chain takes its earlier window's.
    feeds_downstream : bool
        A later window of a chain reads the result: add ``__tm_phase``.

    Returns
    -------
    StreamingWindow
        Its ``frame`` is streaming, append mode: ``__tm_output`` ("main", a tag id, or
        ``"__late_records_dropped"``), ``__tm_ts`` (long ms), the result columns (null
        on side-output rows), ``__tm_side`` (a pickled side-output value) and
        ``__tm_dropped`` (late records dropped by that key in that batch). Split it with
        :func:`select_output` or :func:`write_outputs`.
    """
    arguments = dict(locals())  # this call's own arguments, to build it again (_rebuild)
    upstream = df if isinstance(df, StreamingWindow) else None
    source = df.frame if isinstance(df, StreamingWindow) else df
    _check_arguments(source, key_columns, timestamp_column, value_columns, time_mode)
    operator = make_operator()
    assigner = operator.assigner
    check_time_mode(assigner, time_mode, out_of_orderness_ms, idleness_ms)
    if upstream is not None or feeds_downstream:
        check_chain_mode(assigner, time_mode, idleness_ms, upstream)
    spark = source.sparkSession
    rebuild = _rebuild(arguments, spark)
    if upstream is not None:
        max_parallelism = upstream.max_parallelism
    partitions_cap = state_partitions_cap(spark, max_parallelism)
    if max_parallelism is None:
        max_parallelism = session_max_parallelism(spark)
    check_max_parallelism(max_parallelism)
    input_names = _input_names(key_columns, value_columns)
    chained = None
    if upstream is None:
        prepared = _prepare_input(
            source, key_columns, timestamp_column, value_columns, time_mode, out_of_orderness_ms
        )
        prepared = prepared.withColumn(KEY_GROUP, slot_column(key_columns, max_parallelism))
    else:
        prepared = prepare_upstream(source, input_names, key_columns, max_parallelism)
        chained = UpstreamInput(
            upstream.depth, len(input_names), len(result_schema.fields), feeds_downstream
        )
    # what pandas would lose on the way in and out (NaN apart from null, nested values)
    prepared, pandas_input = lossless_input(prepared, range(len(input_names)))
    pandas_output = lossless_output(result_schema)
    key_types = _type_names(source, key_columns)
    config = ProcessorConfig(
        make_operator=make_operator,
        time_mode=time_mode,
        value_names=tuple(value_columns),
        value_types=_type_names(source, value_columns),
        value_positions=tuple(input_names.index(c) for c in value_columns),
        result_names=tuple(result_schema.fieldNames()),
        result_to_row=result_to_row,
        key_positions=tuple(input_names.index(c) for c in key_columns),
        key_types=key_types,
        timestamp_position=len(input_names),
        engine_key=engine_key,
        idleness_ms=idleness_ms,
        max_parallelism=max_parallelism,
        upstream=chained,
        feeds_downstream=feeds_downstream,
        result_schema=result_schema,
        metrics=True,
        pandas_input=pandas_input,
        pandas_output=pandas_output,
        key_normaliser=key_normaliser(key_types) if engine_key is None else None,
    )
    output_schema = combined_schema(result_schema, phase=feeds_downstream)
    delay = None
    if config.event_time and out_of_orderness_ms is not None:
        delay = watermark_delay_ms(out_of_orderness_ms)
    schemas = upstream_schemas(upstream)
    if late_tag is not None:
        schemas[late_tag.tag_id] = StructType([source.schema[c] for c in value_columns])
    described = describe_window(
        operator,
        key=_columns_of(source, key_columns),
        values=_columns_of(source, value_columns),
        time_mode=time_mode,
        **results_kept(operator, result_schema),
    )
    operator_schema = pandas_output.operator_schema(output_schema)
    frame = key_group_operator(prepared, config, operator_schema, delay)
    return StreamingWindow(
        frame=pandas_output.restore(frame, output_schema),
        max_parallelism=max_parallelism,
        state_partitions_cap=partitions_cap,
        spark_time_mode=config.spark_time_mode(),
        side_schemas=schemas,
        depth=1 if upstream is None else upstream.depth + 1,
        feeds_downstream=feeds_downstream,
        pipeline=(*(upstream.pipeline if upstream else ()), described),
        rebuild=rebuild,
    )


def _rebuild(arguments: dict[str, Any], spark: Any) -> _Rebuild | None:
    """How to build the window again with another number of key groups; None where the
    number is fixed (given, by the session, or by a chain's first window)."""
    df = arguments.pop("df")
    if isinstance(df, StreamingWindow):
        return None if df.rebuild is None else _Rebuild(df, arguments)
    if arguments.pop("max_parallelism") is not None or explicit_max_parallelism(spark):
        return None
    return _Rebuild(df, arguments)


def _columns_of(df: DataFrame, names: list[str]) -> str:
    return ", ".join(f"{name} {df.schema[name].dataType.simpleString()}" for name in names)


def _type_names(df: DataFrame, names: list[str]) -> tuple[str, ...]:
    return tuple(type(df.schema[c].dataType).__name__ for c in names)


# ---------------------------------------------------------------------- validation


def _check_arguments(
    df: DataFrame,
    key_columns: list[str],
    timestamp_column: str | None,
    value_columns: list[str],
    time_mode: str,
) -> None:
    if not df.isStreaming:
        raise WindowSpecError(
            "`df` must be a streaming DataFrame (spark.readStream...); run bounded "
            "DataFrames with the batch runner"
        )
    if time_mode not in TIME_MODES:
        raise WindowSpecError(f"`time_mode` must be one of {list(TIME_MODES)}; got {time_mode!r}")
    names = df.columns
    wanted = [*key_columns, *value_columns] + ([timestamp_column] if timestamp_column else [])
    missing = [c for c in wanted if c not in names]
    if missing or not key_columns:
        raise WindowSpecError(
            f"`key_columns`, `value_columns` and `timestamp_column` must name columns of "
            f"`df` (at least one key column); missing {missing} in {names}"
        )
    marked = [f.name for f in df.schema.fields if WATERMARK_DELAY in f.metadata]
    if marked:
        raise WindowSpecError(
            f"`df` already has a watermark on {marked}: tidemark sets the watermark from the "
            "WatermarkStrategy; remove withWatermark (Spark would take the minimum of both)"
        )


# ---------------------------------------------------------------------- input


def _input_names(key_columns: list[str], value_columns: list[str]) -> list[str]:
    """The processor's input columns, before the timestamp: keys, then values, once each."""
    return list(dict.fromkeys([*key_columns, *value_columns]))


def _input_column(df: DataFrame, name: str, is_key: bool, timestamp_ms: Any) -> Any:
    col = F.col(f"`{name}`")
    kind = type(df.schema[name].dataType).__name__
    if is_key or kind not in ("TimestampType", "TimestampNTZType"):
        return col
    # An end-of-input marker's timestamp (year 9999) is beyond pandas' nanosecond range,
    # which PySpark converts timestamps to; the marker's values are never used.
    is_marker = timestamp_ms.isNotNull() & (timestamp_ms >= F.lit(END_OF_INPUT_MS))
    return F.when(~is_marker, col).alias(name)


def _prepare_input(
    df: DataFrame,
    key_columns: list[str],
    timestamp_column: str | None,
    value_columns: list[str],
    time_mode: str,
    out_of_orderness_ms: int | None,
) -> DataFrame:
    names = _input_names(key_columns, value_columns)
    timestamp = timestamp_ms(df.schema, timestamp_column, "timestamp_column")
    columns = [_input_column(df, c, c in key_columns, timestamp) for c in names]
    prepared = df.select(*columns, timestamp.alias(TS))
    if TimeDomain.EVENT_TIME not in TIME_MODES[time_mode]:
        return prepared
    assert out_of_orderness_ms is not None
    ts = F.col(TS)
    end_of_input = F.timestamp_micros(F.lit(END_OF_INPUT_COLUMN_MICROS))
    shifted = F.timestamp_millis(ts + F.lit(COLUMN_SHIFT_MS))
    event_time = F.when(ts >= F.lit(END_OF_INPUT_MS), end_of_input).otherwise(shifted)
    delay = f"{watermark_delay_ms(out_of_orderness_ms)} milliseconds"
    # The watermark column is dropped right away: Spark still tracks the watermark, and
    # with nothing to filter on it drops no late row before the processor.
    return (
        prepared.withColumn(WATERMARK_TIME, event_time)
        .withWatermark(WATERMARK_TIME, delay)
        .drop(WATERMARK_TIME)
    )


# ---------------------------------------------------------------------- output


def select_output(
    combined: DataFrame | StreamingWindow, name: str, schema: StructType | None = None
) -> DataFrame:
    """One output of a :class:`StreamingWindow` (or of a micro-batch of its frame).

    Parameters
    ----------
    combined : StreamingWindow or DataFrame
        What :func:`window_stream` returned, or a micro-batch of its frame.
    name : str
        "main" for the results; a tag id for a side output; ``"__late_records_dropped"``
        for the count of dropped late records: one row per micro-batch (0 included).
    schema : StructType, optional
        The columns of side output ``name``; a window knows its late data's. Without
        one, a side output comes as ``timestamp`` (long ms) and ``value`` (pickled bytes).
    """
    if isinstance(combined, StreamingWindow):
        schema = schema if schema is not None else combined.side_schemas.get(name)
        combined = combined.frame
    rows = combined.where(F.col(OUTPUT) == F.lit(name))
    if name == MAIN:
        internal = (OUTPUT, TS, SIDE, DROPPED, PHASE)
        return rows.select(*[F.col(f"`{c}`") for c in combined.columns if c not in internal])
    if is_dropped_output(name):
        return dropped_counts(combined, name)
    if schema is None:
        return rows.select(F.col(TS).alias("timestamp"), F.col(SIDE).alias("value"))
    return rows.select(SIDE).mapInArrow(SideDecoder(schema), schema)


def write_outputs(
    window: StreamingWindow,
    sinks: Mapping[str, Callable[[DataFrame, int], None]],
    checkpoint: str,
    trigger: dict[str, Any] | None = None,
    *,
    schemas: Mapping[str, StructType] | None = None,
    query_name: str | None = None,
) -> TidemarkStreamingQuery:
    """Start ONE query that sends each output of a :class:`StreamingWindow` to its sink.

    Parameters
    ----------
    window : StreamingWindow
        What :func:`window_stream` returned.
    sinks : mapping
        Output name ("main", a tag id, ``"__late_records_dropped"``) ->
        ``sink(batch_df, batch_id)``. Outputs without a sink are discarded. A sink that
        writes by ``batch_id`` (overwrite a batch's partition) is idempotent: a batch
        replayed after a failure replaces its own rows.
    checkpoint : str
        The query's checkpoint location (state, timers, watermark, offsets).
    trigger : dict, optional
        Keyword arguments of ``DataStreamWriter.trigger``, e.g. ``{"availableNow": True}``.
    schemas : mapping, optional
        Schemas of side outputs the window does not know (what process functions emit
        with ``ctx.output``; see :func:`select_output`).

    Returns
    -------
    TidemarkStreamingQuery
        The started ``StreamingQuery``: each micro-batch's progress carries tidemark's
        figures under ``observedMetrics["tidemark"]`` (``docs/watching.md``); its
        ``awaitTermination``, ``processAllAvailable`` and ``exception`` give a failure caused by the data or
        a user function as tidemark's own error (:mod:`tidemark.spark.surfacing`).

    Notes
    -----
    The query starts with ``min(spark.sql.shuffle.partitions, cores, 32)`` state partitions
    by default, ``min(spark.sql.shuffle.partitions, max_parallelism)`` when the number of
    key groups was given: more could hold no key group. Spark keeps that number in the
    checkpoint.
    """
    if not isinstance(window, StreamingWindow):
        raise WindowSpecError(
            f"`window` must be the StreamingWindow window_stream returned; got "
            f"{type(window).__name__}"
        )
    if not sinks:
        raise WindowSpecError("`sinks` must name at least one output, e.g. {'main': sink}")
    bad = [name for name, sink in sinks.items() if not callable(sink)]
    if bad:
        raise WindowSpecError(f"`sinks` must map output names to callables; not callable: {bad}")
    _check_trigger_ends(window, trigger)
    spark = window.frame.sparkSession
    stored = stored_groups(spark, checkpoint)
    if stored is not None and stored != window.max_parallelism and window.rebuild is not None:
        window = window.rebuild(stored)  # a default number follows the checkpoint's
    check_checkpoint(spark, checkpoint, window.max_parallelism, window.pipeline)
    splitter = _BatchSplitter(dict(sinks), {**window.side_schemas, **(schemas or {})})
    writer = observed_chain(window.frame, window.depth).writeStream.foreachBatch(splitter)
    writer = writer.option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    # the RocksDB state store and the capped state partitions, for this query
    with streaming_settings(spark), _partitions_capped(spark, window.state_partitions_cap):
        try:
            started = writer.outputMode("append").start()
            return TidemarkStreamingQuery(started, batch_failure=splitter.last_failure)
        except AnalysisException as exc:
            if "Multiple applyInPandasWithStates" not in str(exc):
                raise
            raise WindowSpecError(
                "a streaming query runs one window (or one chain) per query: Spark runs one "
                "applyInPandasWithState per query, and this DataFrame combines several "
                "windows' outputs (a union?). Start a query per window with write_outputs"
            ) from exc


def _check_trigger_ends(window: StreamingWindow, trigger: dict[str, Any] | None) -> None:
    """Refuse ``availableNow`` where Spark would never end the query: in ProcessingTime
    mode Spark runs a micro-batch at every trigger interval, data or not."""
    if trigger and trigger.get("availableNow") and window.spark_time_mode == PROCESSING_TIME:
        raise WindowSpecError(
            "trigger={'availableNow': True} would never end this query: it serves "
            "processing-time timers (or idleness), so Spark runs it in ProcessingTime mode, "
            "with a micro-batch at every trigger interval, data or not. Use "
            "trigger={'processingTime': '1 second'} and stop the query when done"
        )


@contextlib.contextmanager
def _partitions_capped(spark: Any, cap: int) -> Iterator[None]:
    """Start the query with at most ``cap`` state partitions
    (:func:`~tidemark.spark.streaming.config.state_partitions_cap`): never more than one
    per key group (a partition beyond ``max_parallelism`` could never hold a key, yet
    Spark would open its state store and run its task in every micro-batch), by default
    at most 32. The query keeps the number it started with (Spark stores it in the
    checkpoint); the session's setting is restored."""
    conf = spark.conf
    before = conf.get(_SHUFFLE_PARTITIONS)
    if before is None or int(before) <= cap:
        yield
        return
    conf.set(_SHUFFLE_PARTITIONS, str(cap))
    try:
        yield
    finally:
        conf.set(_SHUFFLE_PARTITIONS, before)


class _BatchSplitter:
    """foreachBatch function: each micro-batch is computed once, then split by output."""

    def __init__(self, sinks: dict[str, Any], schemas: dict[str, StructType]):
        self._sinks = sinks
        self._schemas = schemas
        self._failure: BaseException | None = None

    def last_failure(self) -> BaseException | None:
        """What a call raised last (it runs on the driver), for the query's errors."""
        return self._failure

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # Persisted so that the stateful operator runs once however many sinks read it.
        batch.persist()
        try:
            for name, sink in self._sinks.items():
                sink(select_output(batch, name, self._schemas.get(name)), batch_id)
        except Exception as exc:
            self._failure = exc
            raise
        finally:
            batch.unpersist()
