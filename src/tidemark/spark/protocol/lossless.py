"""Values through PySpark's pandas frames and back without loss: a streaming window's
input and output.

PySpark hands a stateful streaming processor (``applyInPandasWithState``,
``transformWithStateInPandas``) its rows as pandas frames, and converts the frames it
returns, and pandas cannot tell apart what Spark and Arrow do:

- a float or double column's NaN and null are both NaN in a ``float64`` Series, and
  on the way back every NaN of a column becomes a null, nested ones too;
- an array arrives as a numpy array, whose nulls are NaN in a float array; a struct
  as a dict, a nested timestamp as a pandas Timestamp;
- a timestamp arrives as a wall time in the session's time zone (BATCH reads the UTC
  one), and a naive datetime nested in a result is read back in the session's zone
  (at the top level, and in BATCH, as UTC).

BATCH and a replay read Arrow batches directly (:mod:`tidemark.spark.protocol.codec`): a NaN is
a NaN, a null None, an array a list, a struct a dict. So that a stream's functions see
the same values, its window carries, around the operator:

========================= ============================================================
input float/double column ``__tm_nan<i>``, Spark's ``isnan`` of column ``i``, beside it:
                          its nulls are None and its NaNs NaN again (:class:`PandasInput`)
input timestamp column    ``__tm_utc<i>``, Spark's ``unix_micros`` of it: the naive UTC
                          datetime BATCH gives, exact across daylight-saving changes
input array/map/struct    packed, with every nested column of the row, into
                          ``__tm_packed`` (a pickle of their Arrow values, by a
                          ``mapInArrow`` before the operator); the column itself null
result float/double       ``__tm_nan<i>`` from the result's value, then the column made
                          NaN again in Spark SQL after the operator (:class:`PandasOutput`)
result nested with floats pickled in its column (binary), unpickled into its type by a
or timestamps             ``mapInArrow`` after the operator
========================= ============================================================

Columns of other types pass as they are (strings, integers, decimals, booleans, binary,
dates, timestamps without a time zone), and a pipeline without float, timestamp or
nested columns gets none of this.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, BooleanType, StructField, StructType

from tidemark.spark.protocol.column_values import arrow_column, column_values
from tidemark.spark.protocol.columns import NAN_FLAG, NESTED_PACKED, UTC_MICROS
from tidemark.spark.protocol.value_errors import checked_array

__all__ = [
    "PandasInput",
    "PandasOutput",
    "lossless_input",
    "lossless_output",
]

_RESULTS_AT = 2  # a streaming combined frame's first result (spark/protocol/columns.py)
_FLOATS = ("FloatType", "DoubleType")
_NESTED = ("ArrayType", "MapType", "StructType")


@dataclass(frozen=True)
class PandasInput:
    """Where a processor's input carries what pandas would lose (see the module).

    Attributes
    ----------
    nan_flags : tuple of (int, int)
        ``(column, flag column)`` for each float or double column.
    utc_micros : tuple of (int, int)
        ``(column, microseconds column)`` for each timestamp column.
    packed : tuple of int
        The nested columns, in the order their values are pickled in ``__tm_packed``.
    packed_column : int
        Where ``__tm_packed`` is (-1: no nested column).
    """

    nan_flags: tuple[tuple[int, int], ...] = ()
    packed: tuple[int, ...] = ()
    packed_column: int = -1
    utc_micros: tuple[tuple[int, int], ...] = ()
    _flags: dict[int, int] = field(init=False, repr=False, compare=False)
    _micros: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_flags", dict(self.nan_flags))
        object.__setattr__(self, "_micros", dict(self.utc_micros))

    def column(
        self, series: Sequence[pd.Series], position: int, type_name: str, unpacked: list[Any]
    ) -> list[Any]:
        """The Python values of input column ``position`` (Spark type ``type_name``) as
        Arrow gives them; ``unpacked`` caches the call's unpickled nested values."""
        if position in self.packed:
            if not unpacked:
                blobs = series[self.packed_column].tolist()
                unpacked.append([pickle.loads(blob) for blob in blobs])
            at = self.packed.index(position)
            return [values[at] for values in unpacked[0]]
        micros = self._micros.get(position)
        if micros is not None:
            return [
                None if m is None else _EPOCH + timedelta(microseconds=m)
                for m in column_values(series[micros], "LongType")
            ]
        values = column_values(series[position], type_name)
        flag = self._flags.get(position)
        if flag is None or None not in values:
            return values
        nans = series[flag].to_numpy(dtype=bool)
        return [math.nan if nan else value for value, nan in zip(values, nans)]


def lossless_input(df: DataFrame, positions: Sequence[int]) -> tuple[DataFrame, PandasInput]:
    """``df`` (a processor's input, in column order) with the columns among
    ``positions`` made lossless: a NaN flag after each float column, each timestamp's
    microseconds, nested columns packed into ``__tm_packed``; and how the processor
    reads them back."""
    fields = df.schema.fields
    kinds = {p: type(fields[p].dataType).__name__ for p in positions}
    floats = [p for p, kind in kinds.items() if kind in _FLOATS]
    stamps = [p for p, kind in kinds.items() if kind == "TimestampType"]
    nested = tuple(p for p, kind in kinds.items() if kind in _NESTED)
    added = [F.isnan(F.col(_quoted(fields[p].name))).alias(f"{NAN_FLAG}{p}") for p in floats]
    added += [
        F.unix_micros(F.col(_quoted(fields[p].name))).alias(f"{UTC_MICROS}{p}") for p in stamps
    ]
    if added:
        df = df.select("*", *added)
    nan_flags = tuple((p, len(fields) + n) for n, p in enumerate(floats))
    utc = tuple((p, len(fields) + len(floats) + n) for n, p in enumerate(stamps))
    if not nested:
        return df, PandasInput(nan_flags, utc_micros=utc)
    schema = StructType(df.schema.fields + [StructField(NESTED_PACKED, BinaryType(), False)])
    packer = _Packer([df.schema.fields[p].name for p in nested], list(nested))
    lossless = PandasInput(nan_flags, nested, len(df.columns), utc)
    return df.mapInArrow(packer, schema), lossless


class _Packer:
    """``mapInArrow`` function: each row's nested values pickled into ``__tm_packed``
    (Arrow's Python values, as BATCH reads them), their own columns made null."""

    def __init__(self, names: list[str], positions: list[int]):
        self.names, self.positions = names, positions

    def __call__(self, batches: Any) -> Any:
        for batch in batches:
            columns = [arrow_column(batch, name) for name in self.names]
            blobs = [pickle.dumps(values, protocol=5) for values in zip(*columns)]
            for position in self.positions:
                kind = batch.schema.field(position)
                batch = batch.set_column(position, kind, pa.nulls(batch.num_rows, kind.type))
            yield batch.append_column(NESTED_PACKED, pa.array(blobs, type=pa.binary()))


@dataclass(frozen=True)
class PandasOutput:
    """How a processor's result columns leave through pandas without loss (see the
    module): records are ``(output, timestamp, *results, ...)``.

    Attributes
    ----------
    flagged : tuple of int
        The float or double result fields (positions in the results), each followed by a
        NaN flag at the end of the record.
    packed : tuple of int
        The nested result fields holding floats or timestamps, pickled in their column.
    """

    flagged: tuple[int, ...] = ()
    packed: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.flagged or self.packed)

    def names(self) -> list[str]:
        """The flag columns appended to the records."""
        return [f"{NAN_FLAG}{p}" for p in self.flagged]

    def record(self, record: tuple[Any, ...]) -> tuple[Any, ...]:
        """``record`` with its nested floats pickled and its NaN flags appended."""
        if self.packed:
            values = list(record)
            for p in self.packed:
                value = values[2 + p]
                values[2 + p] = None if value is None else pickle.dumps(value, protocol=5)
            record = tuple(values)
        flags = tuple(_is_nan(record[2 + p]) for p in self.flagged)
        return (*record, *flags)

    def operator_schema(self, schema: StructType) -> StructType:
        """The processor's output schema: ``schema`` (the combined frame's) with the
        packed result fields binary, then the flags."""
        first = _RESULTS_AT
        fields = list(schema.fields)
        for p in self.packed:
            fields[first + p] = StructField(fields[first + p].name, BinaryType(), True)
        fields += [StructField(name, BooleanType(), True) for name in self.names()]
        return StructType(fields)

    def restore(self, frame: DataFrame, schema: StructType) -> DataFrame:
        """The processor's output ``frame`` as the combined frame of ``schema``: NaNs
        back in the flagged columns (Spark SQL), the packed ones unpickled (``frame``
        itself when nothing was carried)."""
        if not self:
            return frame
        first = _RESULTS_AT
        columns = [F.col(_quoted(f.name)) for f in schema.fields]
        for p, flag in zip(self.flagged, self.names()):
            kind = schema.fields[first + p]
            nan = F.lit(float("nan")).cast(kind.dataType)
            columns[first + p] = F.when(F.col(flag), nan).otherwise(columns[first + p])
            columns[first + p] = columns[first + p].alias(kind.name)
        frame = frame.select(*columns)
        if not self.packed:
            return frame
        return frame.mapInArrow(_Unpacker(schema, [first + p for p in self.packed]), schema)


def lossless_output(result_schema: StructType) -> PandasOutput:
    """What a processor with results of ``result_schema`` carries (nothing when no
    field is a float, or nested with a float or a timestamp)."""
    fields = result_schema.fields
    flagged = tuple(n for n, f in enumerate(fields) if type(f.dataType).__name__ in _FLOATS)
    packed = tuple(
        n
        for n, f in enumerate(fields)
        if type(f.dataType).__name__ in _NESTED and _holds(f.dataType, _CARRIED)
    )
    return PandasOutput(flagged, packed)


class _Unpacker:
    """``mapInArrow`` function: the packed result columns unpickled into their types."""

    def __init__(self, schema: StructType, positions: list[int]):
        self.schema, self.positions = schema, positions

    def __call__(self, batches: Any) -> Any:
        for batch in batches:
            for position in self.positions:
                spark_field = self.schema.fields[position]
                kind = batch.schema.field(position)
                blobs = batch.column(position).to_pylist()
                values = [None if blob is None else pickle.loads(blob) for blob in blobs]
                arrow_type = _arrow_type(spark_field)
                array = checked_array(values, arrow_type, spark_field)
                batch = batch.set_column(position, kind.with_type(arrow_type), array)
            yield batch


def _arrow_type(spark_field: StructField) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = StructType([spark_field])
    try:
        return to_arrow_schema(schema, timezone="UTC").field(0).type
    except TypeError:  # PySpark releases whose to_arrow_schema takes no time zone
        return to_arrow_schema(schema).field(0).type


_CARRIED = (*_FLOATS, "TimestampType")  # nested in a result: pandas would change them
_EPOCH = datetime(1970, 1, 1)


def _holds(data_type: Any, kinds: tuple[str, ...]) -> bool:
    """Whether ``data_type`` is, or holds at any depth, a type named in ``kinds``."""
    name = type(data_type).__name__
    if name in kinds:
        return True
    if name == "ArrayType":
        return _holds(data_type.elementType, kinds)
    if name == "MapType":
        return _holds(data_type.keyType, kinds) or _holds(data_type.valueType, kinds)
    if name == "StructType":
        return any(_holds(f.dataType, kinds) for f in data_type.fields)
    return False


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
