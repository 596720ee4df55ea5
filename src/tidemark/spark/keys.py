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
(inside tuples and Rows too), so its pickled bytes are equal for equal keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pyspark.sql import Row

from tidemark.errors import WindowSpecError
from tidemark.spark.codec import NAN_KEY, NaNKey, float_key, function_key_value
from tidemark.spark.plan import KeySpec

__all__ = [
    "NAN_KEY",
    "NaNKey",
    "column_key",
    "function_key_value",
    "key_normaliser",
    "check_key_columns",
    "checked_key",
]


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
