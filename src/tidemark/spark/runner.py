"""Running a window operation on a bounded DataFrame: BATCH and replay.

The elements of a window operation become a frame with internal columns (``__tm_ts``,
and for a replay ``__tm_order``, ``__tm_seq``, ``__tm_wm``, ``__tm_pt``), are
hash-partitioned by key and sorted within partitions by key then time (BATCH: in the
Python worker where Arrow orders the columns as Spark does, see
:mod:`tidemark.spark.batch.sorting`) or arrival (replay), and each partition streams through
one engine operator, key after key; a key's
state is dropped once its last element is processed and its timers flushed, so a task
holds the state of one key at a time. ``window_all`` runs in one partition, as in Flink.

One run produces results and side outputs together (``__tm_output`` names which).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tidemark.errors import WindowSpecError
from tidemark.outputs import OutputTag
from tidemark.spark.api import KeySpec, Source, WindowOp
from tidemark.spark.batch.replay import (
    ORDER,
    TS,
    WM,
    WatermarkSequence,
    share_with_tasks,
    stamp_replay_watermarks,
)
from tidemark.spark.batch.worker import PartitionRunner, RunnerConfig

__all__ = ["run_window", "main_output", "side_output", "num_late_records_dropped", "ElementFrame"]

OUTPUT, SEQ, PT, KEY, SIDE = "__tm_output", "__tm_seq", "__tm_pt", "__tm_key", "__tm_side"
MAIN = "main"


@dataclass
class ElementFrame:
    """A stream's elements as a DataFrame with tidemark's internal columns."""

    df: Any
    value_schema: StructType
    replay: bool
    watermarks: Any = None  # a broadcast WatermarkSequence, for replays
    timestamp_column: str | None = None
    has_processing_time: bool = False
    final_processing_time: int | None = None  # a replay's last arrival time
    # BATCH: the columns that order elements of one key with equal timestamps
    tie_order: list[str] = field(default_factory=list)


def _timestamp_expr(source: Source) -> Any:
    if source.timestamp is None:
        return F.lit(None).cast(LongType())
    column = source.df.schema[source.timestamp].dataType
    name = type(column).__name__
    col = F.col(source.timestamp)
    if name in ("LongType", "IntegerType", "ShortType"):
        return col.cast(LongType())
    if name in ("TimestampType", "TimestampNTZType"):
        return F.unix_millis(col.cast(TimestampType()))
    if name == "StringType":
        return F.unix_millis(F.try_to_timestamp(col))
    raise WindowSpecError(
        f"`timestamp` column {source.timestamp!r} must be long milliseconds, a timestamp or a "
        f"timestamp string; got type {column.simpleString()}"
    )


def with_assigned_timestamps(df: Any, assigner: Any) -> Any:
    """``df`` with ``__tm_ts`` from a WatermarkStrategy's timestamp assigner on Rows
    (``assigner(row, record_timestamp)``; a DataFrame row has no record timestamp yet,
    so Flink's "no timestamp", ``Long.MIN_VALUE``, is passed)."""
    from tidemark.spark.codec import arrow_rows_and_columns
    from tidemark.time import LONG_MIN

    names = df.columns

    def assign(batches: Any) -> Any:
        import pyarrow as pa

        for batch in batches:
            rows, _ = arrow_rows_and_columns(batch, names)
            stamps = pa.array([assigner(row, LONG_MIN) for row in rows], pa.int64())
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, stamps], names=[*batch.schema.names, TS]
            )

    return df.mapInArrow(assign, StructType(df.schema.fields + [StructField(TS, LongType())]))


def _source_frame(source: Source, spark: Any) -> ElementFrame:
    df = source.df
    if source.timestamp is None and source.strategy.timestamp_assigner is not None:
        df = with_assigned_timestamps(df, source.strategy.timestamp_assigner)
        columns = [F.col(f"`{c}`") for c in source.df.columns] + [F.col(TS)]
    else:
        columns = [F.col(f"`{c}`") for c in df.columns] + [_timestamp_expr(source).alias(TS)]
    if not source.replay:
        ties = tie_order(df.schema)
        if ties == [SEQ]:
            columns.append(F.monotonically_increasing_id().alias(SEQ))
        return ElementFrame(
            df.select(*columns), df.schema, False, None, source.timestamp, tie_order=ties
        )
    assert source.order_by is not None
    columns.append(F.col(source.order_by).cast(LongType()).alias(ORDER))
    columns.append(F.lit(0).cast(LongType()).alias(SEQ))
    if source.processing_time is not None:
        pt_type = type(df.schema[source.processing_time].dataType).__name__
        pt = F.col(source.processing_time)
        pt = F.unix_millis(pt) if pt_type.startswith("Timestamp") else pt.cast(LongType())
        columns.append(pt.alias(PT))
    if source.watermark is not None:
        columns.append(F.col(source.watermark).cast(LongType()).alias(WM))
    stamped, sequence = stamp_replay_watermarks(
        df.select(*columns), source.strategy.out_of_orderness_ms, spark
    )
    broadcast = share_with_tasks(spark, sequence)  # no broadcasts on Spark Connect
    final_pt = None
    if source.processing_time is not None:
        final_pt = stamped.agg(F.max(PT)).first()[0]
    return ElementFrame(
        stamped,
        df.schema,
        True,
        broadcast,
        source.timestamp,
        source.processing_time is not None,
        final_pt,
    )


def _result_frame(upstream: Any, spark: Any) -> ElementFrame:
    parent = element_frame(upstream._plan.upstream, spark)
    combined = upstream.combined_dataframe()
    schema: StructType = upstream._plan.output_schema
    columns = [F.col(f"`{name}`") for name in schema.fieldNames()] + [F.col(TS)]
    ties = [] if parent.replay else tie_order(schema)
    if parent.replay:
        columns += [F.col(ORDER), F.col(SEQ), F.col(WM)]
    elif ties == [SEQ]:
        columns.append(F.monotonically_increasing_id().alias(SEQ))
    df = combined.where(F.col(OUTPUT) == MAIN).select(*columns)
    return ElementFrame(df, schema, parent.replay, parent.watermarks, None, False, tie_order=ties)


def tie_order(schema: StructType) -> list[str]:
    """How BATCH orders one key's elements with equal timestamps: by their values (all
    columns, Spark's ordering), which makes a run deterministic whatever the input's
    partitioning, at no cost in the shuffle; by position in the input
    (``monotonically_increasing_id``) when a column cannot be ordered (maps, variants).
    Rows equal in every column are interchangeable. (Doubles 0.0 and -0.0 compare equal
    in Spark: two rows differing only there keep no fixed order.)"""
    if all(_orderable(f.dataType) for f in schema.fields):
        return schema.fieldNames()
    return [SEQ]


def _orderable(kind: Any) -> bool:
    name = type(kind).__name__
    if name == "ArrayType":
        return _orderable(kind.elementType)
    if name == "StructType":
        return all(_orderable(f.dataType) for f in kind.fields)
    unorderable = ("MapType", "VariantType", "CalendarIntervalType")
    return name not in unorderable and not hasattr(kind, "sqlType")  # nor user types


def element_frame(stream: Any, spark: Any) -> ElementFrame:
    """The element frame of a stream: a source's rows, or an upstream window's results.

    Computed once per stream object (a replay's watermark scan runs once)."""
    frame = getattr(stream, "_element_frame", None)
    if frame is None:
        if isinstance(stream._plan, Source):
            frame = _source_frame(stream._plan, spark)
        else:
            frame = _result_frame(stream, spark)
        stream._element_frame = frame
    return frame


def combined_schema(output_schema: StructType, replay: bool) -> StructType:
    fields = [StructField(OUTPUT, StringType(), False), StructField(TS, LongType(), True)]
    if replay:
        fields += [StructField(n, LongType(), True) for n in (ORDER, SEQ, WM)]
    fields += [StructField(f.name, f.dataType, True) for f in output_schema.fields]
    fields.append(StructField(SIDE, BinaryType(), True))
    return StructType(fields)


def _partitioned(
    frame: ElementFrame, key: KeySpec | None, spark: Any, sort_budget: int
) -> tuple[Any, list[str], list[str] | None]:
    """The frame partitioned by key and sorted within partitions by key, then time
    (BATCH) or arrival (replay); its key columns; and, where the worker sorts instead of
    Spark (see :mod:`tidemark.spark.batch.sorting`), the columns it sorts by."""
    df = frame.df
    long_ts = _long_timestamp_column(frame)
    if long_ts is not None:  # the timestamp column itself, not a copy, goes to the shuffle
        df = df.drop(TS)
    time = long_ts or TS
    if key is None:
        key_columns: list[str] = []
    elif key.function is not None:
        df = with_function_key(df, frame.value_schema.fieldNames(), key.function)
        key_columns = [KEY]
    else:
        key_columns = list(key.columns)
    if frame.replay:
        order = [ORDER, SEQ]
    else:  # ties in time: by the columns not already compared
        order = [time, *[c for c in frame.tie_order if c not in (time, *key_columns)]]
    if key is None:
        shuffled = df.repartition(1)
    else:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        shuffled = df.repartition(partitions, *[F.col(f"`{c}`") for c in key_columns])
    sort_columns = [*key_columns, *order]
    if not frame.replay and sort_budget > 0 and _worker_sorts(df.schema, sort_columns):
        return shuffled, key_columns, sort_columns
    return shuffled.sortWithinPartitions(*[F.col(f"`{c}`") for c in sort_columns]), key_columns, None


def _worker_sorts(schema: StructType, columns: list[str]) -> bool:
    """Whether Arrow orders ``columns`` as Spark does (an input sequence it cannot)."""
    from tidemark.spark.batch import sorting

    return SEQ not in columns and all(sorting.sortable(schema[c].dataType) for c in columns)


def with_function_key(df: Any, names: list[str], function: Any) -> Any:
    """``df`` with ``__tm_key``: ``function(row)`` of each row's columns ``names``,
    pickled, so Spark can partition by it (batch and streaming alike)."""
    from tidemark.spark.codec import rows_from_pandas

    types = [type(df.schema[n].dataType).__name__ for n in names]

    def add_key(batches: Any) -> Any:
        for pdf in batches:
            rows = rows_from_pandas(pdf, names, types)
            yield pdf.assign(**{KEY: [pickle.dumps(function(row), protocol=4) for row in rows]})

    schema = StructType(df.schema.fields + [StructField(KEY, BinaryType(), False)])
    return df.mapInPandas(add_key, schema)


def run_window(op: WindowOp, spark: Any) -> Any:
    """One run of the window operator: results and side outputs in one DataFrame."""
    from tidemark.spark.preflight import ensure_workers_import_tidemark

    ensure_workers_import_tidemark(spark)  # else a ModuleNotFoundError deep in a worker
    if op.upstream.source.df.isStreaming:
        from tidemark.spark.streaming.plan import run_streaming_window

        return run_streaming_window(op)
    frame = element_frame(op.upstream, spark)
    from tidemark.spark.batch import sql_plan

    if sql_plan.applies(op, frame, spark):
        return sql_plan.sql_window(op, frame)
    sort_budget = _sort_budget(spark)
    partitioned, key_columns, sort_columns = _partitioned(frame, op.key, spark, sort_budget)
    config = RunnerConfig(
        operator=op.operator_factory(),
        value_names=frame.value_schema.fieldNames(),
        value_types=[type(f.dataType).__name__ for f in frame.value_schema.fields],
        key_columns=key_columns,
        function_key=op.key is not None and op.key.function is not None,
        output_names=op.output_schema.fieldNames(),
        output_schema=combined_schema(op.output_schema, frame.replay),
        replay=frame.replay,
        watermarks=frame.watermarks,
        timestamp_column=frame.timestamp_column,
        has_processing_time=frame.has_processing_time,
        final_processing_time=frame.final_processing_time,
        timestamps_in=_long_timestamp_column(frame) or TS,
        sort_columns=sort_columns,
        sort_budget=sort_budget,
    )
    needed = [*config.value_names, *key_columns, *_internal_columns(frame, key_columns)]
    columns = [F.col(f"`{c}`") for c in dict.fromkeys(needed)]
    return partitioned.select(*columns).mapInArrow(PartitionRunner(config), config.output_schema)


def _sort_budget(spark: Any) -> int:
    from tidemark.spark.batch import sorting

    return sorting.budget_bytes(spark.conf.get(sorting.CONF, str(sorting.DEFAULT_BUDGET)))


def _long_timestamp_column(frame: ElementFrame) -> str | None:
    """The value column that already is ``__tm_ts`` (long ms), which then need not be
    shipped to the worker twice."""
    name = frame.timestamp_column
    if name is None or name not in frame.value_schema.fieldNames():
        return None
    return name if isinstance(frame.value_schema[name].dataType, LongType) else None


def _internal_columns(frame: ElementFrame, key_columns: list[str]) -> list[str]:
    names = [] if _long_timestamp_column(frame) else [TS]
    if frame.replay:
        names += [ORDER, WM] + ([PT] if frame.has_processing_time else [])
    if KEY in key_columns:
        names.append(KEY)
    return names


def main_output(combined: Any, output_schema: StructType) -> Any:
    """The results, with the output schema."""
    names = [F.col(f"`{n}`") for n in output_schema.fieldNames()]
    return combined.where(F.col(OUTPUT) == MAIN).select(*names)


def num_late_records_dropped(combined: Any) -> int:
    """Late elements that went to no window and no side output (Flink's
    ``numLateRecordsDropped``), summed over all tasks of a bounded run."""
    from tidemark.spark.batch.worker import DROPPED_OUTPUT

    rows = combined.where(F.col(OUTPUT) == F.lit(DROPPED_OUTPUT)).select(SIDE).collect()
    return sum(pickle.loads(row[SIDE]) for row in rows)


def side_output(combined: Any, tag: OutputTag, schema: StructType) -> Any:
    """The side output ``tag``, decoded into ``schema``."""
    from tidemark.spark.codec import SideDecoder

    tag_id = tag.tag_id
    selected = combined.where(F.col(OUTPUT) == F.lit(tag_id)).select(SIDE)
    return selected.mapInPandas(SideDecoder(schema.fieldNames()), schema)


__all__ += ["WatermarkSequence"]
