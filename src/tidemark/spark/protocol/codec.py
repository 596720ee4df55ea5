"""Rows in and out of the engine: the Row type a window's functions are given, a result
as the tuple of its output schema's fields, and how Rows pickle into streaming state.

A :func:`row_type_of` Row is a ``pyspark.sql.Row`` in every respect whose fields read
at C speed; :func:`result_tuple` fits a function's result (a Row, dict, tuple, list or
scalar) to the output schema. Pickles keep the names they call: a streaming state's
Rows call :func:`restored_row` and :func:`rows_from_columns`, so checkpoints hold these
names: they keep their signatures, and rows written before the layers' move call them by
their old path (:mod:`tidemark.spark.codec`, which a NaN key still pickles by:
:mod:`tidemark.spark.protocol.keys`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from operator import is_
from typing import Any

from pyspark.sql import Row

from tidemark.errors import WindowResultError
from tidemark.functions import ReduceFunction
from tidemark.panes import PanedResult
from tidemark.spark.protocol.pane_columns import paned_tuple

__all__ = [
    "result_tuple",
    "row_type_of",
    "as_tidemark_row",
    "restored_row",
    "row_reductions",
    "rows_as_columns",
    "rows_from_columns",
    "RowResultReduce",
]


def result_tuple(value: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """A window result as a tuple in the order of the output schema's ``names``.

    Rows and dicts are matched by field name (a Row with exactly the output's fields is
    returned as it is); tuples and lists by position; a scalar fills a one-column schema.
    None, Flink's null record (a reduce whose evictor removed every element: TimeEvictor
    with interval 0 does), is a row of nulls. A :class:`~tidemark.panes.PanedResult` (a
    window under a Dataflow trigger) is its value's row, then its pane's columns
    (:func:`~tidemark.spark.protocol.pane_columns.paned_tuple`).
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
