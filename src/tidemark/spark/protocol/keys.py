"""What a key is: the rule every mode follows for floating-point, struct and array keys.

A window operation keeps state per key, in Python dicts (the engine) and in Spark's
partitions and groups (BATCH's shuffle, the SQL fast path's ``groupBy``, streaming's key
groups). Both must agree on which elements share a key. Spark's grouping compares
``-0.0`` and ``0.0`` as one value and all NaNs as one (and its ``hash`` agrees, measured
on PySpark 4.3: ``hash(-0.0) == hash(0.0)``, one hash for every NaN); Python's ``==``
has ``-0.0 == 0.0`` but ``nan != nan``, so each NaN element would be a key of its own.
The rule, in every mode (``docs/errors.md``, "Values and keys"):

========================= ==========================================================
key column type            the key the functions are given
========================= ==========================================================
float / double             the value; every NaN is ONE key (:data:`NAN_KEY`, a float
                           NaN equal to itself); ``-0.0`` is the key ``0.0``
struct                     a ``pyspark.sql.Row`` of its fields' keys (hashable)
array                      a tuple of its elements' keys (hashable)
map, variant               refused when the pipeline is defined: Spark cannot group
                           by them either
several columns            the tuple of the columns' keys
========================= ==========================================================

Elements keep their values: a Row's field holds ``-0.0``, a dict or a list as read;
only the key is normalised. A key function's result follows the same float rule
(inside tuples and Rows too), so its pickled bytes (``__tm_key``,
:func:`tidemark.spark.protocol.columns.encode_key`) are equal for equal keys; it must not be None
and must be hashable (:func:`function_key`).

A NaN key pickles as a call of ``tidemark.spark.codec._nan_key``, the name it had when
keys were first written: a streaming query's key groups hash a key function's pickled
keys, and its state holds them, so that name is kept (:mod:`tidemark.spark.codec`, the
old path, still loads it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pyspark.sql import Row

from tidemark.errors import InputDataError, UserFunctionError, WindowSpecError
from tidemark.spark.plan import KeySpec

__all__ = [
    "NAN_KEY",
    "NaNKey",
    "column_key",
    "float_key",
    "function_key_value",
    "function_key",
    "key_normaliser",
    "check_key_columns",
    "checked_key",
    "null_key_message",
    "NULL_KEY_ADVICE",
]

NULL_KEY_ADVICE = "Fill in or filter out the rows without one."
"""What to do about an element without a key (a null in a key column), in every mode."""


def null_key_message(column: str) -> str:
    """The start of the error of a null in key ``column`` (Flink: "Assigned key must not
    be null"); an example row and :data:`NULL_KEY_ADVICE` follow it.

    >>> null_key_message("k")
    "null key in column 'k': every element needs a key; example row: "
    """
    return f"null key in column {column!r}: every element needs a key; example row: "


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


# pickled under the name NaN keys were first written with (the module docstring)
_nan_key.__module__ = "tidemark.spark.codec"


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


def function_key(function: Any, row: Any) -> Any:
    """The key of ``row`` under the user's key ``function``, the float rule applied.

    Raises
    ------
    UserFunctionError
        The function raised, or returned None (Flink refuses a null key: "Assigned key
        must not be null!"); it names the function and the row.
    InputDataError
        The key is not hashable (a list, a dict): the engine keeps state per key in
        dicts, and two equal lists would not be one key.
    """
    try:
        key = function(row)
    except Exception as exc:
        raise UserFunctionError(
            f"the key function {_name(function)} raised {type(exc).__name__}: {exc} (row {row!r})"
        ) from exc
    if key is None:
        raise UserFunctionError(
            f"the key function {_name(function)} returned None for row {row!r}: every element needs "
            "a key (Flink: 'Assigned key must not be null!'); return the key (a missing "
            "`return`?)"
        )
    key = function_key_value(key)  # one NaN key; -0.0 is 0.0
    try:
        hash(key)
    except TypeError:
        raise InputDataError(
            f"`key` function {_name(function)} must return a hashable key; got {key!r} "
            f"({type(key).__name__}): return a tuple instead, e.g. tuple(...)"
        ) from None
    return key


def _name(function: Any) -> str:
    return getattr(function, "__name__", None) or repr(function)


def column_key(value: Any) -> Any:
    """The key of a key column's value (see the module's table): floats normalised,
    a struct (a dict or Row) as a Row, an array (a list, tuple or numpy array) as a
    tuple, recursively.

    >>> column_key({"a": [1.0, -0.0], "b": float("nan")})
    Row(a=(1.0, 0.0), b=nan)
    """
    if isinstance(value, float):
        return float_key(value)
    if isinstance(value, dict):
        return Row(**{name: column_key(v) for name, v in value.items()})
    fields = getattr(value, "__fields__", None)
    if fields is not None:  # a Row: keep its field names
        return Row(**{name: column_key(v) for name, v in zip(fields, value)})
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(column_key(v) for v in value)
    return value


_NORMALISED = ("FloatType", "DoubleType", "StructType", "ArrayType")


def key_normaliser(type_names: Sequence[str]) -> Callable[[Any], Any] | None:
    """``value -> key`` for a row's key (one column's value, or the tuple of several)
    whose columns have the Spark types ``type_names``; None where every value is its
    own key already (strings, integers, ...), which costs nothing per element."""
    if not any(name in _NORMALISED for name in type_names):
        return None
    if len(type_names) == 1:
        return column_key
    return _tuple_key


def _tuple_key(values: Any) -> tuple[Any, ...]:
    return tuple(column_key(v) for v in values)


_UNGROUPABLE = {"MapType": "a map", "VariantType": "a variant"}


def checked_key(key: KeySpec, schema: Any) -> KeySpec:
    """``key`` (of a stream of ``schema``), its columns checked by
    :func:`check_key_columns`."""
    check_key_columns(schema, key.columns)
    return key


def check_key_columns(schema: Any, columns: Sequence[str]) -> None:
    """Refuse key columns whose values cannot be keys: maps and variants, at any depth
    (Spark cannot group by them either).

    Raises
    ------
    WindowSpecError
        Naming the column, its type and what to key by instead.
    """
    for name in columns:
        data_type = schema[name].dataType
        found = _ungroupable(data_type)
        if found is not None:
            raise WindowSpecError(
                f"`key` column {name!r} is {data_type.simpleString()}, which holds {found}: "
                "a key must compare equal to itself, and Spark cannot group by a map or "
                "a variant either. Key by columns of scalars, structs or arrays (e.g. "
                "map_keys / map_values, or the fields you mean), or by a function "
                "returning a tuple"
            )


def _ungroupable(data_type: Any) -> str | None:
    """What in ``data_type`` cannot be a key (``"a map"``), or None."""
    name = type(data_type).__name__
    if name in _UNGROUPABLE:
        return _UNGROUPABLE[name]
    if name == "ArrayType":
        return _ungroupable(data_type.elementType)
    if name == "StructType":
        for field in data_type.fields:
            found = _ungroupable(field.dataType)
            if found is not None:
                return found
    return None
