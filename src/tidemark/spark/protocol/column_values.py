"""Python values of Spark columns, as a Row holds them, from Arrow and pandas, and a
Spark schema's Arrow batch of Python columns.

Arrow (BATCH, a replay, the SQL fast path's functions): :func:`arrow_column`,
:func:`arrow_rows_and_columns`, :func:`arrow_batch`. pandas (a streaming window's
frames): :func:`column_values`. Either way a timestamp is a naive UTC ``datetime``
whatever the session's time zone, a NaN stays NaN and a null is None; a timestamp no
``datetime`` holds is refused with its value (:mod:`tidemark.spark.protocol.value_errors`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

import pandas as pd

from tidemark.spark.protocol.codec import row_type_of
from tidemark.spark.protocol.value_errors import (
    beyond_datetime,
    checked_array,
    micros_beyond_datetime,
)

__all__ = [
    "NULL_MICROS",
    "column_values",
    "arrow_column",
    "arrow_rows_and_columns",
    "arrow_batch",
]

_INTEGRAL = ("LongType", "IntegerType", "ShortType", "ByteType")
_TIMESTAMPS = ("TimestampType", "TimestampNTZType")

NULL_MICROS = -(2**63)
"""A null in a column of timestamps as long microseconds (as the streaming runner hands
them to its workers, :func:`~tidemark.spark.protocol.timestamps.timestamp_micros`): no timestamp
Spark holds is that far back."""

_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)


def column_values(series: pd.Series, type_name: str) -> list[Any]:
    """Python values of one pandas column, as a Spark Row would hold them (a timestamp
    column given as long microseconds, :data:`NULL_MICROS` for null, as naive UTC
    ``datetime`` values)."""
    if type_name in _TIMESTAMPS and series.dtype.kind == "i":
        micros = series.tolist()
        try:
            return [None if v == NULL_MICROS else _EPOCH + _MICROSECOND * v for v in micros]
        except OverflowError:
            far = micros_beyond_datetime(v for v in micros if v != NULL_MICROS)
            if far is None:
                raise
            raise beyond_datetime(str(series.name), far) from None
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return [None if pd.isna(v) else v.to_pydatetime() for v in series]
    values = series.tolist()
    if series.dtype.kind in "iub":  # a NumPy integer or bool column holds no nulls
        return values
    missing = series.isna()
    if missing.any():
        values = [None if gone else v for v, gone in zip(values, missing.tolist())]
    if type_name in _INTEGRAL and series.dtype.kind == "f":
        return [None if v is None else int(v) for v in values]
    return values


def arrow_column(batch: Any, name: str) -> list[Any]:
    """Python values of one column of a pyarrow RecordBatch, as a Spark Row holds them
    (timestamps as naive UTC ``datetime`` values, whatever the session's time zone)."""
    import pyarrow as pa

    column = batch.column(batch.schema.get_field_index(name))
    if not pa.types.is_timestamp(column.type):
        return column.to_pylist()
    if column.type.tz is not None:
        column = column.cast(pa.timestamp(column.type.unit))
    try:
        return column.to_pylist()
    except (OverflowError, ValueError):
        micros = column.cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
        far = micros_beyond_datetime(micros)
        if far is None:
            raise
        raise beyond_datetime(name, far) from None


def arrow_rows_and_columns(
    batch: Any, names: Sequence[str]
) -> tuple[list[Any], dict[str, list[Any]]]:
    """Rows of a pyarrow RecordBatch, and its columns as lists of Python values.

    Rows are built as :func:`row_type_of` instances, without the per-row keyword
    handling of ``Row(...)``, since this runs for every element.
    """
    columns = {n: arrow_column(batch, n) for n in names}
    row_type = row_type_of(tuple(names))
    return list(map(tuple.__new__, repeat(row_type), zip(*columns.values()))), columns


def arrow_batch(
    columns: dict[str, Any], schema: Any, describe: Callable[[int], str] | None = None
) -> Any:
    """A pyarrow RecordBatch of Python columns (sequences of values), typed by a Spark
    ``schema``; a value a field cannot hold raises :func:`checked_array`'s error, the
    row described by ``describe(row_index)``."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # PySpark releases whose to_arrow_schema takes no time zone
        arrow_schema = to_arrow_schema(schema)
    arrays = [
        checked_array(columns[f.name], f.type, schema[f.name], describe) for f in arrow_schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
