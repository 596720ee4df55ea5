"""Event time of a DataFrame's rows as long milliseconds: one rule for every Spark mode.

BATCH, replay, the SQL fast path and streaming all read the timestamp column through
:func:`timestamp_ms`: integral columns are milliseconds; ``TimestampType`` and
``TimestampNTZType`` columns are instants (the session's time zone is UTC); strings are
parsed as Spark timestamps, an unparseable one giving null (reported with the row by the
path that meets it). Any other type is a :class:`~tidemark.errors.WindowSpecError` when
the pipeline is defined. :func:`with_assigned_timestamps` applies a
``WatermarkStrategy``'s timestamp assigner instead.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from tidemark.errors import WindowSpecError
from tidemark.spark.codec import arrow_rows_and_columns
from tidemark.spark.columns import TS
from tidemark.time import LONG_MIN

__all__ = ["timestamp_ms", "with_assigned_timestamps"]

_INTEGRAL = ("LongType", "IntegerType", "ShortType", "ByteType")
_TIMESTAMPS = ("TimestampType", "TimestampNTZType")


def timestamp_ms(schema: StructType, column: str | None, parameter: str = "timestamp") -> Any:
    """The Column of ``column``'s event time in long ms (null when ``column`` is None).

    ``parameter`` is the name the user gave the column under, for the error message.
    """
    if column is None:
        return F.lit(None).cast(LongType())
    data_type = schema[column].dataType
    name = type(data_type).__name__
    col = F.col(f"`{column}`")
    if name in _INTEGRAL:
        return col.cast(LongType())
    if name in _TIMESTAMPS:
        return F.unix_millis(col.cast(TimestampType()))
    if name == "StringType":
        return F.unix_millis(F.try_to_timestamp(col))
    raise WindowSpecError(
        f"`{parameter}` column {column!r} must be long milliseconds, a timestamp or a "
        f"timestamp string; got type {data_type.simpleString()}"
    )


def with_assigned_timestamps(df: Any, assigner: Any) -> Any:
    """``df`` with ``__tm_ts`` from a WatermarkStrategy's timestamp assigner on Rows
    (``assigner(row, record_timestamp)``; a DataFrame row has no record timestamp yet,
    so Flink's "no timestamp", ``Long.MIN_VALUE``, is passed)."""
    names = df.columns

    def assign(batches: Any) -> Any:
        for batch in batches:
            rows, _ = arrow_rows_and_columns(batch, names)
            stamps = pa.array([assigner(row, LONG_MIN) for row in rows], pa.int64())
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, stamps], names=[*batch.schema.names, TS]
            )

    return df.mapInArrow(assign, StructType(df.schema.fields + [StructField(TS, LongType())]))
