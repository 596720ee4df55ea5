"""Event time of a DataFrame's rows as long milliseconds: one rule for every Spark mode.

BATCH, replay, the SQL fast path and streaming all read the timestamp column through
:func:`timestamp_ms`, and the result never depends on the session's time zone
(``spark.sql.session.timeZone``) nor on the Python workers' local zone:

* integral columns are milliseconds since the epoch;
* ``TimestampType`` (a zoned timestamp) is its instant;
* ``TimestampNTZType`` (a wall-clock time without zone) and ``DateType`` (midnight) are
  read as UTC wall clocks, as Spark's own ``window()`` and Flink SQL's ``TIMESTAMP(3)``
  align them: ``2024-01-01 00:30`` is ``1704069000000`` in every session;
* strings are parsed as Spark timestamps (:data:`ACCEPTED_TIMESTAMP_STRINGS`): one with
  a zone or offset is that instant, one without is a UTC wall clock, as an NTZ value; an
  unparseable one (or a time without a date) gives null, reported with the row by the
  path that meets it.

Any other type is a :class:`~tidemark.errors.WindowSpecError` when the pipeline is
defined. :func:`with_assigned_timestamps` applies a ``WatermarkStrategy``'s timestamp
assigner instead; an integral column in another unit (``from_dataframe``'s
``timestamp_unit``) is read by one, :class:`ScaledTimestamp`, which every mode applies
the same way. The rules, as a table: ``docs/concepts/time.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from tidemark.errors import InputDataError, TidemarkWarning, UserFunctionError, WindowSpecError
from tidemark.spark.protocol.column_values import NULL_MICROS, arrow_rows_and_columns
from tidemark.spark.protocol.columns import TS
from tidemark.time import LONG_MIN, to_datetime

__all__ = [
    "timestamp_ms",
    "timestamp_micros",
    "processor_column",
    "wall_clock_ms",
    "with_assigned_timestamps",
    "ScaledTimestamp",
    "check_timestamp_unit",
    "warn_if_unit_looks_wrong",
    "warn_if_assigned_unit_looks_wrong",
    "TIMESTAMP_UNITS",
    "ACCEPTED_TIMESTAMP_STRINGS",
]

_INTEGRAL = ("LongType", "IntegerType", "ShortType", "ByteType")

# Spark's string-to-timestamp parser takes a zone only right after the seconds (or their
# fraction): ``...HH:mm:ss[.SSSSSS]<zone>``, the zone maybe after spaces.
_ZONED_STRING = r":[0-9]+:[0-9]+(\.[0-9]*)?[\s\p{Cntrl}]*[^0-9.\s\p{Cntrl}]"
_DAY_MS = 86_400_000

TIMESTAMP_UNITS = ("ms", "s", "us", "ns")
"""The units of an integral event-time column (``from_dataframe``'s ``timestamp_unit``)."""

_UNIT_NAMES = {"s": "seconds", "us": "microseconds", "ns": "nanoseconds"}

ACCEPTED_TIMESTAMP_STRINGS = (
    "'yyyy-MM-dd HH:mm:ss[.SSSSSS]' or 'yyyy-MM-ddTHH:mm:ss[.SSSSSS]', optionally with a "
    "zone ('Z', '+01:00', 'Europe/Paris'; none means UTC, whatever the session's time "
    "zone), or 'yyyy-MM-dd' (midnight UTC)"
)
"""The timestamp strings an event-time column may hold (Spark's string-to-timestamp
cast, read independently of the session's time zone); for any other format, parse the
column with ``F.to_timestamp(col, format)``."""


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
    if name == "TimestampType":
        return F.unix_millis(col)
    if name == "TimestampNTZType":
        return wall_clock_ms(col)
    if name == "DateType":
        return F.unix_date(col).cast(LongType()) * _DAY_MS
    if name == "StringType":
        return _string_ms(col)
    raise WindowSpecError(
        f"`{parameter}` column {column!r} must be long milliseconds, a timestamp, a date "
        f"or a timestamp string; got type {data_type.simpleString()}"
    )


def wall_clock_ms(ntz: Any) -> Any:
    """The TimestampNTZ Column ``ntz`` read as a UTC wall clock, in long ms (floored)."""
    return F.floor(_wall_clock_seconds(ntz) * 1000).cast(LongType())


def _wall_clock_seconds(ntz: Any) -> Any:
    """The seconds (a decimal, to the microsecond) from the epoch's wall clock to ``ntz``.

    Spark's casts of an NTZ value to a timestamp, and its interval arithmetic on one, go
    through the session's time zone (a wall clock in a daylight-saving gap moves by an
    hour); the difference of two NTZ values, as an interval of seconds, does not.
    """
    since_epoch = ntz - F.expr("TIMESTAMP_NTZ'1970-01-01 00:00:00'")
    return since_epoch.cast("interval second").cast("decimal(20,6)")


def processor_column(df: Any, name: str) -> Any:
    """A streaming processor's input column ``name`` of ``df``: timestamps as long
    microseconds (:func:`timestamp_micros`), anything else as it is."""
    if type(df.schema[name].dataType).__name__ in ("TimestampType", "TimestampNTZType"):
        return timestamp_micros(df.schema, name)
    return F.col(f"`{name}`")


def timestamp_micros(schema: StructType, column: str) -> Any:
    """A timestamp column's values as long microseconds, the form the streaming runner
    hands its Python workers (:func:`~tidemark.spark.protocol.codec.column_values` turns them
    back into naive UTC ``datetime`` values, as the batch paths' Rows hold them).

    PySpark would hand them as pandas timestamps: in nanoseconds (nothing after 2262,
    such as a ``9999-12-31`` "valid to") and as wall clocks of the session's time zone
    (an instant in the hour a daylight-saving change repeats is then ambiguous). Nulls
    are :data:`~tidemark.spark.protocol.codec.NULL_MICROS`: a nullable long column would reach
    pandas as float64, which rounds microseconds past 2255.
    """
    col = F.col(f"`{column}`")
    if type(schema[column].dataType).__name__ == "TimestampNTZType":
        micros = (_wall_clock_seconds(col) * 1_000_000).cast(LongType())
    else:
        micros = F.unix_micros(col)
    return F.coalesce(micros, F.lit(NULL_MICROS)).alias(column)


def _string_ms(text: Any) -> Any:
    """A timestamp string Column in long ms: its instant when it names a zone, else its
    wall clock read as UTC; null when it is no timestamp or a time without a date (which
    Spark would place on today's date)."""
    wall_clock = text.try_cast("timestamp_ntz")
    zoned = F.trim(text).rlike(_ZONED_STRING)
    return (
        F.when(wall_clock.isNull(), F.lit(None).cast(LongType()))
        .when(zoned, F.unix_millis(F.try_to_timestamp(text)))
        .otherwise(wall_clock_ms(wall_clock))
    )


class ScaledTimestamp:
    """A timestamp assigner ``(row, record_timestamp) -> ms`` reading the integral
    ``column`` in ``unit`` ("s", "us" or "ns"; finer units are floored to ms, as
    Spark's ``unix_millis`` floors finer instants).

    >>> from pyspark.sql import Row
    >>> ScaledTimestamp("ts", "s")(Row(ts=1_600_000_020), 0)
    1600000020000
    >>> ScaledTimestamp("ts", "us")(Row(ts=-1), 0)
    -1
    """

    def __init__(self, column: str, unit: str):
        self.column = column
        self.unit = unit

    def __call__(self, row: Any, record_timestamp: int) -> int:
        value = row[self.column]
        if value is None:
            raise InputDataError(f"null timestamp in column {self.column!r}; example row: {row}")
        if self.unit == "s":
            return int(value) * 1000
        return int(value) // (1000 if self.unit == "us" else 1_000_000)

    def __repr__(self) -> str:
        return f"ScaledTimestamp({self.column!r}, {self.unit!r})"


def check_timestamp_unit(schema: StructType, column: str | None, unit: Any) -> None:
    """Refuse a ``timestamp_unit`` that is not one of :data:`TIMESTAMP_UNITS`, or that
    is given for no column or a column that is not integral.

    Raises
    ------
    WindowSpecError
        Naming the unit and the column's type.
    """
    if unit is None:
        return
    if not isinstance(unit, str) or unit not in TIMESTAMP_UNITS:
        accepted = ", ".join(repr(u) for u in TIMESTAMP_UNITS)
        raise WindowSpecError(f"`timestamp_unit` must be one of {accepted}; got {unit!r}")
    if column is None:
        raise WindowSpecError(
            "`timestamp_unit` applies to integral `timestamp` columns; got no `timestamp`"
        )
    data_type = schema[column].dataType
    if type(data_type).__name__ not in _INTEGRAL:
        raise WindowSpecError(
            f"`timestamp_unit` applies to integral `timestamp` columns; column {column!r} "
            f"is of type {data_type.simpleString()}: omit timestamp_unit"
        )


def _likely_unit(value: int) -> str | None:
    """The unit an epoch timestamp of ``value`` most likely has when it cannot be ms: as
    ms it would be before May 1970 or after the year 5138, and in the other unit it
    falls in 1973-2286 (nanoseconds: 1973-2128, so that sentinels near ``LONG_MAX``,
    Flink's "end of time", do not count)."""
    size = abs(value)
    if 10**9 <= size < 10**10:
        return "s"
    if 10**14 <= size < 10**17:
        return "us"
    if 10**17 <= size < 5 * 10**18:
        return "ns"
    return None


def warn_if_unit_looks_wrong(df: Any, column: str | None) -> None:
    """Warn (:class:`~tidemark.errors.TidemarkWarning`) when the first values of
    bounded ``df``'s integral event-time ``column``, read as ms, all look like one
    other unit.

    It reads a few rows (one small Spark job); a streaming DataFrame cannot be read when
    the pipeline is defined and is not checked.
    """
    if column is None or df.isStreaming:
        return
    if type(df.schema[column].dataType).__name__ not in _INTEGRAL:
        return
    col = F.col(f"`{column}`")
    values = [r[0] for r in df.select(col).where(col.isNotNull()).limit(8).collect()]
    _warn_if_one_other_unit(
        values,
        f"`timestamp` column {column!r} holds",
        lambda unit: (
            f'pass timestamp_unit="{unit}" (or timestamp_unit="ms" to read '
            "milliseconds and skip this check)"
        ),
    )


def warn_if_assigned_unit_looks_wrong(df: Any, assigner: Any) -> None:
    """Warn, as :func:`warn_if_unit_looks_wrong` does for a column, when a
    ``WatermarkStrategy``'s timestamp assigner returns, for the first rows of bounded
    ``df``, values that all look like another unit than ms.

    The sample runs the assigner where the pipeline will (one small Spark job, on the
    Rows the workers hand it). An assigner that fails on them is left for the run to
    report, with its row, as it reports any failing assigner.
    """
    if df.isStreaming:
        return
    sample = with_assigned_timestamps(df.limit(8), assigner, failures_as_null=True)
    values = [r[0] for r in sample.select(TS).collect() if r[0] is not None]
    _warn_if_one_other_unit(
        values,
        f"the WatermarkStrategy's timestamp assigner {assigner!r} returned",
        lambda unit: f"return milliseconds from it (e.g. {_TO_MS[unit]})",
    )


_TO_MS = {"s": "row.ts * 1000", "us": "row.ts // 1000", "ns": "row.ts // 1_000_000"}


def _warn_if_one_other_unit(values: list[int], subject: str, fix: Callable[[str], str]) -> None:
    """Warn when ``values`` (epoch timestamps meant as ms) all look like one other unit;
    ``subject`` says where they are from, ``fix(unit)`` what to do."""
    units = {_likely_unit(v) for v in values}
    unit = units.pop() if len(units) == 1 else None
    if unit is None:
        return
    largest = max(values, key=abs)
    try:
        as_ms = f"{to_datetime(largest):%Y-%m-%d %H:%M:%S} UTC"
    except OverflowError:
        as_ms = "after the year 9999"
    warnings.warn(
        f"{subject} {largest}, which as milliseconds is {as_ms}: it looks like "
        f"{_UNIT_NAMES[unit]} since the epoch; {fix(unit)}",
        TidemarkWarning,
        stacklevel=4,
    )


def with_assigned_timestamps(df: Any, assigner: Any, *, failures_as_null: bool = False) -> Any:
    """``df`` with ``__tm_ts`` from a WatermarkStrategy's timestamp assigner on Rows
    (``assigner(row, record_timestamp)``; a DataFrame row has no record timestamp yet,
    so Flink's "no timestamp", ``Long.MIN_VALUE``, is passed).

    An assigner that raises, or returns what is no int milliseconds (a ``datetime``, a
    string), is a :class:`~tidemark.errors.UserFunctionError` naming it and the row;
    ``failures_as_null`` gives such rows a null instead (a sample of the assigner's
    values)."""
    names = df.columns

    def assign(batches: Any) -> Any:
        for batch in batches:
            rows, _ = arrow_rows_and_columns(batch, names)
            stamps = _assigned(assigner, rows, failures_as_null)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, stamps], names=[*batch.schema.names, TS]
            )

    return df.mapInArrow(assign, StructType(df.schema.fields + [StructField(TS, LongType())]))


def _assigned(assigner: Any, rows: list[Any], failures_as_null: bool) -> Any:
    """The Arrow array of ``assigner``'s timestamps of ``rows``."""
    values = []
    for row in rows:
        try:
            values.append(assigner(row, LONG_MIN))
        except Exception as exc:
            if not failures_as_null:
                what = f"timestamp assigner {assigner!r} on row {row!r}"
                raise UserFunctionError(what, cause=exc) from exc
            values.append(None)
    try:
        stamps = pa.array(values, pa.int64())
        if any(issubclass(kind, _FLOATS) for kind in set(map(type, values))):
            raise TypeError("a float: Arrow would truncate it")  # 9.7 -> 9, -0.5 -> 0
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        if failures_as_null:
            return pa.array([v if type(v) is int else None for v in values], pa.int64())
        raise _not_milliseconds(assigner, rows, values) from None
    if stamps.null_count and not failures_as_null:  # Flink's assigner returns a long
        raise _not_milliseconds(assigner, rows, values)
    return stamps


_FLOATS = (float, np.floating)


def _is_long(value: Any) -> bool:
    if value is None or isinstance(value, _FLOATS):
        return False
    try:
        pa.array([value], pa.int64())
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return False
    return True


def _not_milliseconds(assigner: Any, rows: list[Any], values: list[Any]) -> UserFunctionError:
    """The error for the first of ``values`` that is no long."""
    at = next(i for i, value in enumerate(values) if not _is_long(value))
    row, value = rows[at], values[at]
    hint = ""
    if isinstance(value, datetime):
        hint = ": convert it with tidemark.time.from_datetime"
    elif isinstance(value, _FLOATS):
        hint = ": round it to whole milliseconds, e.g. math.floor(seconds * 1000)"
    return UserFunctionError(
        f"timestamp assigner {assigner!r} must return int milliseconds since the epoch (a "
        f"long); got {value!r} ({type(value).__name__}) for row {row!r}{hint}"
    )
