"""Rows in and out of the engine: pandas batches <-> pyspark Rows and result tuples."""

from __future__ import annotations

import datetime
import functools
import math
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from itertools import repeat
from operator import is_
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Row

from tidemark.errors import InputDataError, WindowResultError, WindowSpecError
from tidemark.functions import ReduceFunction
from tidemark.panes import PanedResult
from tidemark.spark.pane_columns import paned_tuple

__all__ = [
    "NULL_MICROS",
    "parse_schema",
    "check_column_names",
    "SUM_ADVICE",
    "NaNKey",
    "NAN_KEY",
    "float_key",
    "function_key_value",
    "arrow_column",
    "arrow_rows_and_columns",
    "arrow_batch",
    "checked_array",
    "result_tuple",
    "column_values",
    "as_tidemark_row",
    "restored_row",
    "row_reductions",
    "rows_as_columns",
    "rows_from_columns",
    "RowResultReduce",
]

_INTEGRAL = ("LongType", "IntegerType", "ShortType", "ByteType")
_TIMESTAMPS = ("TimestampType", "TimestampNTZType")

NULL_MICROS = -(2**63)
"""A null in a column of timestamps as long microseconds (as the streaming runner hands
them to its workers, :func:`~tidemark.spark.timestamps.timestamp_micros`): no timestamp
Spark holds is that far back."""

_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)


def parse_schema(schema: Any, spark: Any) -> Any:
    """A StructType from a StructType or a DDL string such as ``"user string, n long"``,
    its column names told apart (:func:`check_column_names`)."""
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        check_column_names(schema.fieldNames(), "`output_schema`", spark)
        return schema
    if isinstance(schema, str):
        try:
            parsed = spark.createDataFrame([], schema).schema
        except Exception as exc:
            raise WindowSpecError(
                f"`output_schema` must be a StructType or a DDL string like "
                f"'user string, n long'; could not parse {schema!r}: {exc}"
            ) from exc
        check_column_names(parsed.fieldNames(), "`output_schema`", spark)
        return parsed
    raise WindowSpecError(
        f"`output_schema` must be a StructType or a DDL string; got {schema!r} "
        f"({type(schema).__name__})"
    )


def check_column_names(names: Sequence[str], what: str, spark: Any) -> None:
    """Refuse column ``names`` that Spark cannot tell apart (equal names, or names
    equal but for case in a session where ``spark.sql.caseSensitive`` is false, the
    default: Spark's ``[AMBIGUOUS_REFERENCE]``), or that tidemark uses itself
    (``__tm_...``). ``what`` says whose columns they are, e.g. "`df`".

    Raises
    ------
    WindowSpecError
        Naming the columns and how to rename them.
    """
    sensitive = str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    seen: dict[str, str] = {}
    for name in names:
        folded = name if sensitive else name.lower()
        if folded in seen:
            rule = "equal" if seen[folded] == name else "equal but for case"
            raise WindowSpecError(
                f"{what} has two columns named {seen[folded]!r} and {name!r} ({rule}): "
                f"Spark cannot tell them apart in a window's rows; rename one first, e.g. "
                f"df.toDF(*new_names) or withColumnRenamed; columns: {list(names)}"
            )
        seen[folded] = name
    internal = [name for name in names if name.lower().startswith("__tm_")]
    if internal:
        raise WindowSpecError(
            f"{what} has columns named like tidemark's own internal columns (`__tm_...`): "
            f"{internal}; rename them first"
        )


def column_values(series: pd.Series, type_name: str) -> list[Any]:
    """Python values of one pandas column, as a Spark Row would hold them (a timestamp
    column given as long microseconds, :data:`NULL_MICROS` for null, as naive UTC
    ``datetime`` values)."""
    if type_name in _TIMESTAMPS and series.dtype.kind == "i":
        micros = series.tolist()
        try:
            return [None if v == NULL_MICROS else _EPOCH + _MICROSECOND * v for v in micros]
        except OverflowError:
            far = next(v for v in micros if v != NULL_MICROS and not _FIRST <= v <= _LAST)
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


def result_tuple(value: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """A window result as a tuple in the order of the output schema's ``names``.

    Rows and dicts are matched by field name (a Row with exactly the output's fields is
    returned as it is); tuples and lists by position; a scalar fills a one-column schema.
    None, Flink's null record (a reduce whose evictor removed every element: TimeEvictor
    with interval 0 does), is a row of nulls. A :class:`~tidemark.panes.PanedResult` (a
    window under a Dataflow trigger) is its value's row, then its pane's columns
    (:func:`~tidemark.spark.pane_columns.paned_tuple`).
    """
    if value is None:
        return (None,) * len(names)
    fields = getattr(value, "__fields__", None)
    if fields is not None:
        if fields == names or list(fields) == list(names):
            return value  # a Row is the tuple of its fields' values
        if all(name in fields for name in names):
            return tuple(value[name] for name in names)
        return _positional(value, names)
    if isinstance(value, dict):
        missing = [name for name in names if name not in value]
        if missing:
            raise WindowResultError(
                f"result {value!r} lacks `output_schema` fields {missing}: a dict result "
                f"needs every field of {list(names)}"
            )
        return tuple(value[name] for name in names)
    if type(value) is PanedResult:
        return paned_tuple(value, names, result_tuple)
    if isinstance(value, (tuple, list)):
        return _positional(value, names)
    if len(names) == 1:
        return (value,)
    raise WindowResultError(
        f"result {value!r} ({type(value).__name__}) does not fit the `output_schema` "
        f"fields {list(names)}: return a Row, dict, tuple or list"
    )


def _positional(value: Iterable[Any], names: Sequence[str]) -> tuple[Any, ...]:
    values = tuple(value)
    if len(values) != len(names):
        raise WindowResultError(
            f"result {values!r} has {len(values)} fields; the `output_schema` has "
            f"{len(names)}: {list(names)}. Return one value per field, in its order"
        )
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
        far = next((v for v in micros if v is not None and not _FIRST <= v <= _LAST), None)
        if far is None:
            raise
        raise beyond_datetime(name, far) from None


_FIRST = (datetime.datetime.min - _EPOCH) // _MICROSECOND
_LAST = (datetime.datetime.max - _EPOCH) // _MICROSECOND


def beyond_datetime(column: str, micros: int) -> InputDataError:
    """The error of a ``timestamp`` in ``column`` (``micros`` since the epoch) that no
    Python ``datetime`` holds (Spark's do, to the year 294247), so no Row can."""
    year = 1970 + micros / (365.2425 * 86_400_000_000)
    return InputDataError(
        f"timestamp {micros // 1000} ms since the epoch (about the year {year:.0f}) in "
        f"column {column!r} is outside what a Python datetime holds, as the functions' "
        "Rows do (0001-01-01 to 9999-12-31T23:59:59.999999 UTC): filter out or fix those "
        "rows (a long cast to timestamp is read as seconds: for milliseconds use "
        "F.timestamp_millis)"
    )


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


@functools.lru_cache(maxsize=64)
def row_type_of(names: tuple[str, ...]) -> Any:
    """A ``Row`` subclass whose field names are a class attribute: its instances are
    Rows in every respect (they pickle as plain Rows) but cost one tuple to build."""
    namespace: dict[str, Any] = {"__fields__": list(names), "__slots__": ()}
    # ``row.name`` through Row.__getattr__ searches the field list on every access
    # (0.9 us); a descriptor per field reads the tuple slot directly (0.03 us). Names a
    # Row already has (count, index, asDict, ...) stay what they are on every Row.
    for position, name in enumerate(names):
        if name.isidentifier() and not name.startswith("__") and not hasattr(Row, name):
            if name not in namespace:
                namespace[name] = _field_descriptor(position, name)
    row_type = type("Row", (Row,), namespace)
    _ROW_NAMES[row_type] = names
    _ROW_TYPES[names] = row_type
    _ROW_REDUCTIONS[row_type] = _reduce_row
    return row_type


# Each row_type_of class made (one per field names, unless the cache above dropped it)
_ROW_NAMES: dict[type, tuple[str, ...]] = {}  # each row_type_of class -> its field names
_ROW_REDUCTIONS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
_ROW_TYPES: dict[tuple[str, ...], type] = {}  # field names -> the latest row_type_of class


def row_reductions() -> dict[type, Callable[[Any], tuple[Any, ...]]]:
    """A pickler's ``dispatch_table`` entries for the :func:`row_type_of` classes made so
    far (one mapping, which grows with them; do not change it): such a Row pickles as
    :func:`restored_row` of its names and values.

    Unpickled, it is again a :func:`row_type_of` Row, where a Row's own reduction
    rebuilds a plain ``Row`` through its keyword handling (an equal Row, slower to
    build, whose attributes read through a search of its field list).

    >>> import copyreg, io, pickle
    >>> row = tuple.__new__(row_type_of(("n",)), (3,))
    >>> out = io.BytesIO()
    >>> pickler = pickle.Pickler(out, protocol=5)
    >>> pickler.dispatch_table = {**copyreg.dispatch_table, **row_reductions()}
    >>> pickler.dump([row])
    >>> back = pickle.loads(out.getvalue())
    >>> back, type(back[0]) is row_type_of(("n",))
    ([Row(n=3)], True)
    """
    return _ROW_REDUCTIONS


def _reduce_row(row: Any) -> tuple[Any, ...]:
    return restored_row, (_ROW_NAMES[type(row)], tuple(row))


def restored_row(names: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    """The :func:`row_type_of` Row of ``names`` holding ``values`` (what a pickle
    written with :func:`row_reductions` calls: keep its name and signature)."""
    row_type = _ROW_TYPES.get(names)
    if row_type is None:
        row_type = row_type_of(names)
    return tuple.__new__(row_type, values)


def rows_as_columns(values: list[Any]) -> Any:
    """``values`` (a window's elements) as an object that pickles as their field names
    and columns and unpickles as the same list again (:func:`rows_from_columns`), when
    they are two or more :func:`row_type_of` Rows of one class with fields, or such
    Rows in ``(row, timestamp)`` pairs (an evictor's window); else None. A pickle of
    columns costs no Python call per Row, where each Row's reduction costs one to
    write and one to read (the figures are in benchmarks/README.md).

    >>> import pickle
    >>> row_type = row_type_of(("user", "n"))
    >>> rows = [tuple.__new__(row_type, ("a", 1)), tuple.__new__(row_type, ("b", 2))]
    >>> back = pickle.loads(pickle.dumps(rows_as_columns(rows)))
    >>> back, type(back[1]) is row_type
    ([Row(user='a', n=1), Row(user='b', n=2)], True)
    >>> pickle.loads(pickle.dumps(rows_as_columns([(rows[0], 5), (rows[1], 7)])))
    [(Row(user='a', n=1), 5), (Row(user='b', n=2), 7)]
    """
    if len(values) < 2:
        return None
    rows: Sequence[Any] = values
    timestamps = None
    if type(values[0]) is tuple:  # (row, timestamp) pairs
        if not all(type(pair) is tuple and len(pair) == 2 for pair in values):
            return None
        rows, timestamps = zip(*values)
    row_type = type(rows[0])
    names = _ROW_NAMES.get(row_type)
    if not names or not all(map(is_, map(type, rows), repeat(row_type))):
        return None
    return _RowColumns(names, list(zip(*rows)), timestamps)


def rows_from_columns(
    names: tuple[str, ...], columns: list[tuple[Any, ...]], timestamps: Any = None
) -> list[Any]:
    """The list of :func:`row_type_of` Rows of ``names`` whose fields are ``columns``,
    paired with ``timestamps`` when given (what a pickle of :func:`rows_as_columns`
    calls: keep its name and signature)."""
    row_type = _ROW_TYPES.get(names)
    if row_type is None:
        row_type = row_type_of(names)
    rows = map(tuple.__new__, repeat(row_type), zip(*columns))
    return list(rows) if timestamps is None else list(zip(rows, timestamps))


class _RowColumns:
    """Rows pickled as :func:`rows_from_columns` of their names and columns."""

    __slots__ = ("names", "columns", "timestamps")

    def __init__(self, names: tuple[str, ...], columns: list[tuple[Any, ...]], timestamps: Any):
        self.names, self.columns, self.timestamps = names, columns, timestamps

    def __reduce__(self) -> tuple[Any, ...]:
        if self.timestamps is None:
            return rows_from_columns, (self.names, self.columns)
        return rows_from_columns, (self.names, self.columns, self.timestamps)


def as_tidemark_row(value: Any) -> Any:
    """A plain ``pyspark.sql.Row(...)`` as a :func:`row_type_of` Row with the same names and
    values (an equal Row whose attributes read at C speed); anything else as it is."""
    if type(value) is Row:
        fields = value.__dict__.get("__fields__")
        if fields is not None:
            last = _last_row_type
            if fields != last[0]:  # one reduce function's results mostly share their names
                last = _last_row_type[:] = [fields, row_type_of(tuple(fields))]
            return tuple.__new__(last[1], value)
    return value


_last_row_type: list[Any] = [None, None]  # [field names, their row_type_of]


class RowResultReduce(ReduceFunction):
    """A user's reduce function whose plain-Row results are handed back to it as tidemark
    Rows: a ``Row(...)`` built per element would otherwise be read next through
    ``Row.__getattr__`` (a search of the field list per attribute). The function sees
    equal Rows, as Flink hands a reduce function copies of its earlier results."""

    def __init__(self, function: Any):
        self.function = function
        self._call = getattr(function, "reduce", function)
        # what the user's function declares (checked when it was given)
        self.order_insensitive = getattr(function, "order_insensitive", False)
        # the user's function's name, as an error names it
        self.__name__ = getattr(function, "__name__", None) or type(function).__qualname__

    def reduce(self, value1: Any, value2: Any) -> Any:
        return as_tidemark_row(self._call(value1, value2))

    def __repr__(self) -> str:
        return repr(self.function)


def _field_descriptor(position: int, name: str) -> Any:
    """A read-only attribute for tuple slot ``position``: the C accessor namedtuples use
    where the interpreter has it (``property(itemgetter(...))`` would go through
    ``Row.__getitem__``, which is Python, at every read)."""
    try:
        from collections import _tuplegetter  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - CPython has had it since 3.8
        return property(lambda row: tuple.__getitem__(row, position), doc=name)
    return _tuplegetter(position, f"field {name!r}")


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


def checked_array(
    values: Sequence[Any],
    arrow_type: Any,
    field: Any,
    describe: Callable[[int], str] | None = None,
) -> Any:
    """``pa.array(values, type=arrow_type)`` for the Spark StructField ``field``, or a
    :class:`~tidemark.errors.WindowResultError` naming the field, its declared type and
    the first value it cannot hold (a string for a ``long``, an int past 64 bits), with
    the row ``describe(index)`` says (its key and window, where known). The check costs
    nothing until a conversion fails."""
    import pyarrow as pa

    try:
        array = pa.array(values, type=arrow_type)
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
        for index, value in enumerate(values):
            try:
                pa.array([value], type=arrow_type)
            except (pa.ArrowException, OverflowError, TypeError, ValueError) as error:
                raise _unfit(field, value, index, describe, str(error), arrow_type) from exc
        raise
    if pa.types.is_integer(arrow_type) and _holds_float(values):
        # pyarrow truncates a float for an integer type (1.5 -> 1); Spark's
        # createDataFrame refuses any float for an integral field: so do we
        index = next(i for i, v in enumerate(values) if isinstance(v, _FLOATS))
        why = "Spark takes no float for an integral field (Arrow would truncate it)"
        raise _unfit(field, values[index], index, describe, why, arrow_type)
    return array


_FLOATS = (float, np.floating)


def _holds_float(values: Sequence[Any]) -> bool:
    return any(issubclass(kind, _FLOATS) for kind in set(map(type, values)))


def _unfit(
    field: Any,
    value: Any,
    index: int,
    describe: Callable[[int], str] | None,
    error: str,
    arrow_type: Any,
) -> WindowResultError:
    """The error of ``value`` (result ``index``) that ``field`` cannot hold."""
    where = f" ({describe(index)})" if describe is not None else ""
    declared = field.dataType.simpleString()
    advice = ""
    if isinstance(value, (int, Decimal)) and _is_exact_number(arrow_type):
        advice = f"; {SUM_ADVICE.format(name=field.name)}"
    return WindowResultError(
        f"`output_schema` field {field.name!r} is {declared}, but a result "
        f"holds {value!r} ({type(value).__name__}) there{where}: {error}. "
        f"Return a {declared} value for {field.name!r}, or declare its type "
        f"to fit{advice}"
    )


SUM_ADVICE = (
    "a shorthand sum() keeps its column's type, as Flink's does: cast the column to a "
    "wider type before the window, e.g. df.withColumn({name!r}, "
    "F.col({name!r}).cast('decimal(38,0)'))"
)
"""What to do about a sum beyond its column's type (``name``: the column), in every mode."""


def _is_exact_number(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(arrow_type) or pa.types.is_decimal(arrow_type))


# ---------------------------------------------------------------- keys' floats
# The float rule of keys (tidemark.spark.keys, whose table states every key rule) lives
# here, below the column protocol: a key function's key is normalised before it is
# pickled into ``__tm_key`` (tidemark.spark.columns), so equal keys give equal bytes.


class NaNKey(float):
    """The key of every NaN: a float NaN that equals any NaN and hashes alike, so a
    dict holds one entry for all of them (a plain NaN is unequal even to itself).

    >>> NAN_KEY == float("nan"), {NAN_KEY: 1}[NaNKey()], NAN_KEY + 1.0
    (True, 1, nan)
    """

    __slots__ = ()

    def __new__(cls) -> NaNKey:
        return float.__new__(cls, "nan")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and math.isnan(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return 0x7FF8_0000  # one value for all: Python's hash(nan) is per object

    def __reduce__(self) -> tuple[Any, ...]:
        return (_nan_key, ())  # equal keys pickle to equal bytes

    def __repr__(self) -> str:
        return "nan"


NAN_KEY = NaNKey()
"""The one NaN key (what a NaN key column's elements are keyed by)."""


def _nan_key() -> NaNKey:
    return NAN_KEY


def float_key(value: Any) -> Any:
    """A float's key: every NaN the one :data:`NAN_KEY`, ``-0.0`` the key ``0.0`` (in its
    own type: numpy's float32 too); any other value itself."""
    if math.isnan(value):
        return NAN_KEY
    return abs(value) if value == 0.0 else value  # -0.0 is the key 0.0, in its own type


def function_key_value(value: Any) -> Any:
    """A key function's key with the float rule applied, inside plain tuples and Rows
    too; anything else as it is (a list stays a list, and is refused as unhashable).

    >>> function_key_value(("a", -0.0))
    ('a', 0.0)
    """
    if isinstance(value, (float, np.floating)):  # numpy's float32 is no float
        return float_key(value)
    if type(value) is tuple:
        return tuple(function_key_value(v) for v in value)
    fields = getattr(value, "__fields__", None)
    if isinstance(value, Row) and fields is not None:
        return Row(**{name: function_key_value(v) for name, v in zip(fields, value)})
    return value
