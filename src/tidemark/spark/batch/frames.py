"""A bounded stream's elements as a DataFrame with tidemark's internal columns.

The element frame of a source holds its columns plus ``__tm_ts`` (see
:mod:`tidemark.spark.protocol.timestamps`) and, for BATCH, ``__tm_seq`` when the tie order needs
the input position; for a replay ``__tm_order``, ``__tm_seq``, ``__tm_wm`` (the watermark
in force at arrival, :mod:`.replay`) and ``__tm_pt``. The element frame of a window's
results is read from that window's combined frame (:mod:`tidemark.spark.protocol.columns`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType, LongType, StructType

from tidemark.spark.batch.partition_replay import with_partition_watermarks
from tidemark.spark.batch.replay import ArrivalTimes, share_with_tasks, stamp_replay_watermarks
from tidemark.spark.plan import Source
from tidemark.spark.protocol.columns import MAIN, ORDER, OUTPUT, PT, SEQ, TS, WM
from tidemark.spark.protocol.timestamps import timestamp_ms, with_assigned_timestamps
from tidemark.spark.runtime.surfacing import raising_tidemark_errors

__all__ = ["ElementFrame", "source_frame", "result_frame", "tie_order", "long_timestamp_column"]


@dataclass
class ElementFrame:
    """A stream's elements as a DataFrame with tidemark's internal columns."""

    df: Any
    value_schema: StructType
    replay: bool
    watermarks: Any = None  # a replay's WatermarkSequence, shared with tasks
    timestamp_column: str | None = None
    has_processing_time: bool = False
    final_processing_time: int | None = None  # a replay's last arrival time
    arrival_times: Any = None  # a replay's ArrivalTimes, shared with tasks
    # BATCH: the columns that order elements of one key with equal timestamps
    tie_order: list[str] = field(default_factory=list)
    # DataFrames persisted to build this frame (a replay's arrival-ordered input)
    kept: list[Any] = field(default_factory=list)


def source_frame(source: Source, spark: Any) -> ElementFrame:
    """The element frame of a source (a replay's watermark scan runs here)."""
    df = source.df
    if source.timestamp is None and source.strategy.timestamp_assigner is not None:
        df = with_assigned_timestamps(df, source.strategy.timestamp_assigner)
        columns = [F.col(f"`{c}`") for c in source.df.columns] + [F.col(TS)]
    else:
        stamp = timestamp_ms(df.schema, source.timestamp)
        columns = [F.col(f"`{c}`") for c in df.columns] + [stamp.alias(TS)]
    if not source.replay:
        ties = tie_order(df.schema)
        if ties == [SEQ]:
            columns.append(F.monotonically_increasing_id().alias(SEQ))
        return ElementFrame(
            df.select(*columns), df.schema, False, None, source.timestamp, tie_order=ties
        )
    return _replay_frame(source, df, columns, spark)


def _replay_frame(source: Source, df: Any, columns: list[Any], spark: Any) -> ElementFrame:
    assert source.order_by is not None
    order_by = list(source.order_by)
    if len(order_by) == 1 and isinstance(df.schema[order_by[0]].dataType, IntegralType):
        columns.append(F.col(f"`{order_by[0]}`").cast(LongType()).alias(ORDER))
    # else the watermark scan numbers the rows in the order of the order_by columns
    columns.append(F.lit(0).cast(LongType()).alias(SEQ))
    if source.processing_time is not None:
        columns.append(timestamp_ms(df.schema, source.processing_time, "processing_time").alias(PT))
    if source.watermark is not None:
        columns.append(timestamp_ms(df.schema, source.watermark, "watermark").alias(WM))
    with raising_tidemark_errors():  # the scan's jobs run here
        elements = df.select(*columns)
        if source.partitions is not None:  # computed, then replayed as if recorded
            elements = with_partition_watermarks(elements, source, spark)
        stamped, sequence, ranged = stamp_replay_watermarks(
            elements,
            source.strategy.out_of_orderness_ms,
            spark,
            order_by,
            source.watermark,
        )
        final_pt, arrivals = None, None
        if source.processing_time is not None:
            arrival_times = _arrival_times(stamped)
            final_pt = int(arrival_times.values[-1]) if len(arrival_times.values) else None
            arrivals = share_with_tasks(spark, arrival_times)
    return ElementFrame(
        stamped,
        df.schema,
        True,
        share_with_tasks(spark, sequence),  # no broadcasts on Spark Connect
        source.timestamp,
        source.processing_time is not None,
        final_pt,
        arrivals,
        kept=[ranged],
    )


def _arrival_times(stamped: Any) -> ArrivalTimes:
    """A replay's distinct arrival times, and the arrival time at which each of its
    watermarks came in force (the first element's under it)."""
    rows = stamped.select(PT).distinct().collect()
    times = sorted(r[0] for r in rows if r[0] is not None)
    timed = stamped.where(F.col(PT).isNotNull()).groupBy(WM).agg(F.min(PT)).collect()
    in_force = sorted((r[0], r[1]) for r in timed if r[0] is not None)
    return ArrivalTimes(
        np.array(times, dtype=np.int64),
        np.array([w for w, _ in in_force], dtype=np.int64),
        np.array([t for _, t in in_force], dtype=np.int64),
    )


def result_frame(schema: StructType, parent: ElementFrame, combined: Any) -> ElementFrame:
    """The element frame of a window's results: the ``main`` rows of its ``combined``
    frame, whose elements came from the frame ``parent``."""
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


def long_timestamp_column(frame: ElementFrame) -> str | None:
    """The value column that already is ``__tm_ts`` (long ms), which then need not be
    shipped to the worker twice."""
    name = frame.timestamp_column
    if name is None or name not in frame.value_schema.fieldNames():
        return None
    return name if isinstance(frame.value_schema[name].dataType, LongType) else None
