"""Flink's shorthand window aggregations on a field of Rows: sum, min, max, min_by, max_by.

As in Flink, ``sum``/``min``/``max`` replace only the field and keep the other fields of
the window's first element; ``min_by``/``max_by`` return a whole element (the first one
on ties). ``sum``/``min``/``max`` are aggregate functions over ``[first, aggregate]``,
which gives Flink's results without building a Row per element.

:func:`check_field` refuses, when the pipeline is defined, a field Flink would refuse:
``sum`` of a column that is not numeric (Python's ``+`` would concatenate strings or
arrays), ``min``/``max``/``min_by``/``max_by`` of a column without a natural order
(maps, arrays, structs, binary; Flink's need ``Comparable``), and any of them on a key
column (every element of a window has the same key: its sum would multiply it).
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any

from pyspark.sql.types import (
    BooleanType,
    DateType,
    DayTimeIntervalType,
    NumericType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from tidemark.errors import WindowSpecError
from tidemark.functions import AggregateFunction, ReduceFunction

__all__ = ["Sum", "Min", "Max", "MinBy", "MaxBy", "FieldReduce", "check_field"]

_ORDERED = (
    NumericType,
    StringType,
    BooleanType,
    DateType,
    TimestampType,
    TimestampNTZType,
    DayTimeIntervalType,
)


def check_field(method: str, field: str, schema: StructType, keys: tuple[str, ...]) -> None:
    """Refuse ``field`` as the field of the shorthand ``method`` ("sum", "min", ...) on
    a stream of ``schema`` keyed by the columns ``keys``.

    Raises
    ------
    WindowSpecError
        ``field`` is no column, a key column to sum, or of a type ``method`` cannot
        aggregate.
    """
    names = schema.fieldNames()
    if field not in names:
        raise WindowSpecError(
            f"`field` of {method}() must be a column of the stream; got {field!r}, columns: {names}"
        )
    if method == "sum" and field in keys:
        # min/max/min_by/max_by of a key column give the key back, as in Flink
        raise WindowSpecError(
            f"`field` of {method}() must not be a key column: the stream is keyed by "
            f"{list(keys)}; got {field!r}: every element of a window has the same key, "
            "and each result would carry the window's sum of it as its key; sum another "
            "column"
        )
    data_type = schema[field].dataType
    if method == "sum" and not isinstance(data_type, NumericType):
        numeric = [f.name for f in schema.fields if isinstance(f.dataType, NumericType)]
        raise WindowSpecError(
            f"`field` of sum() must be a numeric column; got {field!r} of type "
            f"{data_type.simpleString()}; numeric columns: {numeric} (to combine other "
            "values, use reduce() or aggregate())"
        )
    if not isinstance(data_type, _ORDERED):
        raise WindowSpecError(
            f"`field` of {method}() must be a column with an order (numbers, strings, "
            f"booleans, dates, timestamps, intervals); got {field!r} of type "
            f"{data_type.simpleString()} (to choose by another rule, use reduce())"
        )


def _with_field(row: Any, index: int, value: Any) -> Any:
    """A copy of ``row`` with field ``index`` replaced (Rows are immutable tuples)."""
    values = [*row]
    values[index] = value
    cls = type(row)
    if "__fields__" in cls.__dict__:  # tidemark's Rows keep their names on the class
        return tuple.__new__(cls, values)
    fields = getattr(row, "__fields__", None)
    if fields is None:
        return cls(values)
    new = tuple.__new__(cls, values)
    new.__dict__["__fields__"] = fields  # a Row(**kw) keeps its names per instance
    return new


def _field_reader(row: Any, field: str) -> tuple[int, Any]:
    """Where ``field`` is in elements shaped like ``row``, and a C function reading it.

    Rows built by tidemark have an attribute per field that reads the tuple slot
    directly; on other Rows the attribute goes through ``Row.__getattr__`` (slow), so
    they are read by position, as are tuples (Flink's positional ``sum(0)``)."""
    fields = getattr(row, "__fields__", None)
    index = fields.index(field) if fields is not None else int(field)
    if fields is not None and not field.startswith("__") and field in type(row).__dict__:
        return index, attrgetter(field)
    return index, itemgetter(index)


class FieldReduce(ReduceFunction):
    """A reduce over one named field of Rows; the field's position is looked up once."""

    def __init__(self, field: str):
        self.field = field
        self._index: int | None = None
        self._read: Any = None

    def index(self, row: Any) -> int:
        if self._index is None:
            self._index, self._read = _field_reader(row, self.field)
        return self._index

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


class _KeepFirst(AggregateFunction):
    """Flink's sum/min/max: the first element's other fields, one field aggregated.

    The accumulator is ``[first_element, aggregate]``, so no Row is built per element;
    the result Row is built once, when the window fires. Nulls in the field are skipped
    (SQL's rule; Flink would fail on them), so an all-null window aggregates to null.
    ``min``/``max`` order a NaN above every number, as Spark and Flink do.
    """

    def __init__(self, field: str):
        self.field = field
        self._index: int | None = None
        self._read: Any = None  # the field's reader, from the first element

    # Flink's sum/min/max are reduce functions: an empty pane (a Dataflow trigger's) has
    # no result, as a reduce's has none.
    reduces = True

    def create_accumulator(self) -> list[Any]:
        return [None, None]

    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        read = self._read
        if read is None:
            self._index, self._read = _field_reader(value, self.field)
            read = self._read
        if accumulator[0] is None:
            return [value, read(value)]
        accumulator[1] = self._combine(accumulator[1], read(value))
        return accumulator

    def get_result(self, accumulator: list[Any]) -> Any:
        first, aggregate = accumulator
        if first is None:
            # No element: an evictor removed them all (TimeEvictor(0) does). Flink's
            # sum/min/max reduce over nothing and emit its null record.
            return None
        if self._index is None:
            # An accumulator restored from state (a later micro-batch, a fresh worker)
            # reaches a function that has not seen an element yet.
            self._index, self._read = _field_reader(first, self.field)
        return _with_field(first, self._index, aggregate)

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        if acc_a[0] is None:
            return acc_b
        if acc_b[0] is None:
            return acc_a
        return [acc_a[0], self._combine(acc_a[1], acc_b[1])]

    def _combine(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return self.combine(a, b)

    def combine(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


class Sum(_KeepFirst):
    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        # the hot path of .sum(): the base class's add with the combine inlined
        read = self._read
        if read is None:
            return super().add(value, accumulator)
        b = read(value)
        if accumulator[0] is None:  # the window's first element
            accumulator[0] = value
            accumulator[1] = b
        elif b is not None:
            a = accumulator[1]
            accumulator[1] = b if a is None else a + b
        return accumulator

    def combine(self, a: Any, b: Any) -> Any:
        return a + b


def _below(b: Any, a: Any) -> bool:
    """``b < a`` in Spark's order, which Flink's ``Double.compareTo`` shares for NaN: a
    NaN is above every number and equal to a NaN (Python's ``<`` is False for both)."""
    return b < a or (a != a and b == b)


class Min(_KeepFirst):
    def combine(self, a: Any, b: Any) -> Any:
        return b if _below(b, a) else a


class Max(_KeepFirst):
    def combine(self, a: Any, b: Any) -> Any:
        return b if _below(a, b) else a


class MinBy(FieldReduce):
    """The element with the smallest field (the first on ties; null fields lose)."""

    def reduce(self, value1: Any, value2: Any) -> Any:
        read = self._read
        if read is None:
            self.index(value1)
            read = self._read
        a, b = read(value1), read(value2)
        return value2 if b is not None and (a is None or _below(b, a)) else value1


class MaxBy(FieldReduce):
    """The element with the largest field (the first on ties; null fields lose)."""

    def reduce(self, value1: Any, value2: Any) -> Any:
        read = self._read
        if read is None:
            self.index(value1)
            read = self._read
        a, b = read(value1), read(value2)
        return value2 if b is not None and (a is None or _below(a, b)) else value1
