"""Vectorized window functions: a window's values as NumPy arrays, one call per firing.

A :class:`~tidemark.functions.VectorizedAggregateFunction` (or a plain function of
arrays) runs as a window function over all of a window's elements: the window keeps its
elements (as for a :class:`~tidemark.functions.ProcessWindowFunction`, so every trigger,
evictor and allowed lateness keeps its semantics), and each firing calls the function
once with one ``float64`` array per field (a null is ``NaN``). Each firing emits one
result, a tuple ``(*key, window_start, window_end, value)``: the key's columns (none for
``window_all``), the window's bounds in ms (None for a global window) and the
function's value, checked against the ``output_type``.

:func:`vectorized_window_function` builds the window function; the Spark API's
``WindowedStream.aggregate_vectorized`` does so for you, and runs BATCH tumbling and
sliding windows columnar where the results are the same (:mod:`tidemark.spark.batch.columnar`;
a :class:`~tidemark.functions.VectorizedCombineFunction` combined before the shuffle:
:mod:`tidemark.spark.batch.columnar_preaggregate`). A combine function's value here is its
``aggregate``: ``finish`` of the single partial of all values, its partial checked with
the key and window. The guide: ``docs/concepts/vectorized.md``.
No Spark import here: the engine and the test harness use it alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tidemark.errors import WindowResultError, WindowSpecError
from tidemark.functions import (
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    VectorizedAggregateFunction,
    VectorizedCombineFunction,
    check_combine_function,
    checked_partial,
    finish_one_part,
)

__all__ = [
    "OUTPUT_TYPES",
    "output_type_name",
    "VectorizedWindowFunction",
    "VectorizedAllWindowFunction",
    "vectorized_window_function",
    "field_array",
    "ResultCheck",
]

# The output types a vectorized function may declare (Spark's DDL names), with the
# inclusive range of the integral ones.
OUTPUT_TYPES: dict[str, tuple[int, int] | None] = {
    "double": None,
    "float": None,
    "boolean": None,
    "bigint": (-(1 << 63), (1 << 63) - 1),
    "int": (-(1 << 31), (1 << 31) - 1),
    "smallint": (-(1 << 15), (1 << 15) - 1),
    "tinyint": (-(1 << 7), (1 << 7) - 1),
}
_ALIASES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def output_type_name(output_type: Any) -> str:
    """The canonical DDL name of ``output_type`` (``"long"`` is ``"bigint"`` ...).

    Raises
    ------
    WindowSpecError
        Not one of :data:`OUTPUT_TYPES` (or an alias): naming the ones there are.
    """
    name = str(output_type).strip().lower() if isinstance(output_type, str) else None
    name = _ALIASES.get(name or "", name)
    if name not in OUTPUT_TYPES:
        raise WindowSpecError(
            f"`output_type` must be one of {', '.join(OUTPUT_TYPES)} (a DDL type name); got "
            f"output_type={output_type!r}: a vectorized function returns one value per window"
        )
    return name


def field_array(elements: Sequence[Any], field: str) -> np.ndarray:
    """The values of ``field`` in ``elements`` (Rows, dicts or objects with the
    attribute) as a ``float64`` array, None as NaN.

    Raises
    ------
    WindowResultError
        An element without the field, or a value that is not a number.
    """
    values = [_value(element, field) for element in elements]
    try:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        bad = next(v for v in values if not _is_number(v))
        raise WindowResultError(
            f"`fields` {field!r} must hold numbers (or None); got {bad!r}: name a numeric "
            "field, or convert it before the window"
        ) from exc


def _value(element: Any, field: str) -> Any:
    try:
        return element[field] if isinstance(element, dict) else getattr(element, field)
    except (AttributeError, KeyError):
        raise WindowResultError(
            f"`fields` names {field!r}, which the element {element!r} does not have: name "
            "a field of the stream's elements"
        ) from None


def _is_number(value: Any) -> bool:
    return value is None or (
        isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    )


class ResultCheck:
    """A vectorized function's value as the Python value of its ``output_type``, or a
    :class:`WindowResultError` with the type, the value and the fix."""

    def __init__(self, output_type: str, function_name: str):
        self.output_type = output_type_name(output_type)
        self.function_name = function_name

    def __call__(self, value: Any, key: Any = None, window: Any = None) -> Any:
        if value is None:
            return None
        if isinstance(value, np.generic) and not isinstance(value, np.ndarray):
            value = value.item()
        kind = self.output_type
        if kind == "boolean" and isinstance(value, bool):
            return value
        if kind in ("double", "float") and _is_number(value):
            return float(value)
        bounds = OUTPUT_TYPES[kind]
        if bounds is not None and isinstance(value, int) and not isinstance(value, bool):
            if bounds[0] <= value <= bounds[1]:
                return value
        raise WindowResultError(self._message(value, key, window), key, window)

    def _message(self, value: Any, key: Any, window: Any) -> str:
        kind = self.output_type
        if kind in ("double", "float"):
            fix = "return a number (float(...) of a NumPy scalar works)"
        elif kind == "boolean":
            fix = "return True or False"
        elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
            fix = "return int(value), or declare output_type='double'"
        else:
            fix = "return an integer in its range, or declare output_type='double'"
        return (
            f"the vectorized function {self.function_name} returned {value!r} "
            f"({type(value).__name__}) for `output_type` {kind!r} (key={key!r}, "
            f"window={window!r}): {fix}"
        )


class _Vectorized:
    """What both adapters share: the fields, the function, the result check."""

    def __init__(self, function: Any, fields: Sequence[str], output_type: str, key_width: int):
        self.function = function
        self.fields = tuple(fields)
        self.key_width = key_width
        self.call: Callable[..., Any] = (
            function.aggregate if isinstance(function, VectorizedAggregateFunction) else function
        )
        self.combine = function if isinstance(function, VectorizedCombineFunction) else None
        if self.combine is not None:
            check_combine_function(self.combine)
        name = getattr(function, "__name__", None) or type(function).__qualname__
        self.check = ResultCheck(output_type, name)

    def value(self, arrays: Sequence[np.ndarray], where: Callable[[], Any]) -> Any:
        """The function's value on ``arrays``, not yet checked: a combine function's is
        ``aggregate``'s, with ``where()`` giving the key and window that a wrong partial
        is reported with."""
        combine = self.combine
        if combine is None:
            return self.call(*arrays)
        return finish_one_part(combine, checked_partial(combine, combine.partial(*arrays), where))

    def result(self, key: Any, window: Any, elements: Any) -> list[tuple[Any, ...]]:
        kept = elements if isinstance(elements, list) else list(elements)
        arrays = [field_array(kept, f) for f in self.fields]
        value = self.check(self.value(arrays, lambda: (key, window)), key, window)
        keys: tuple[Any, ...] = ()
        if self.key_width == 1:
            keys = (key,)
        elif self.key_width > 1:
            keys = tuple(key)
        start, end = getattr(window, "start", None), getattr(window, "end", None)
        return [(*keys, start, end, value)]


class VectorizedWindowFunction(_Vectorized, ProcessWindowFunction):
    """The keyed window function that calls a vectorized function (see the module).

    Parameters
    ----------
    function : VectorizedAggregateFunction or callable
        ``(*arrays) -> value``.
    fields : sequence of str
        The fields whose values it receives, one array each, in this order.
    output_type : str
        The value's type (:data:`OUTPUT_TYPES`).
    key_width : int
        How many key columns lead a result: 1 puts the key itself, n > 1 the n values
        of a tuple key.
    """

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return self.result(key, context.window(), elements)


class VectorizedAllWindowFunction(_Vectorized, ProcessAllWindowFunction):
    """The ``window_all`` form of :class:`VectorizedWindowFunction` (no key columns)."""

    def process(self, context: Any, elements: Any) -> Any:
        return self.result(None, context.window(), elements)


def vectorized_window_function(
    function: Any,
    fields: Any,
    output_type: Any = "double",
    key_width: int | None = 1,
) -> VectorizedWindowFunction | VectorizedAllWindowFunction:
    """The window function of ``function`` over ``fields``, checked now.

    ``key_width=None`` (or 0) makes the non-keyed (``window_all``) form.

    Raises
    ------
    WindowSpecError
        ``function`` is neither a VectorizedAggregateFunction nor callable (or is a
        class), ``fields`` is not a non-empty list of distinct names, or the output type
        is unknown.
    """
    usable = isinstance(function, VectorizedAggregateFunction) or callable(function)
    if isinstance(function, type) or not usable:
        raise WindowSpecError(
            "`function` must be a VectorizedAggregateFunction instance or a function of "
            f"NumPy arrays ((*arrays) -> value); got {function!r}"
        )
    names = [fields] if isinstance(fields, str) else fields
    if (
        not isinstance(names, (list, tuple))
        or not names
        or not all(isinstance(n, str) for n in names)
        or len(set(names)) != len(names)
    ):
        raise WindowSpecError(
            "`fields` must name the fields the function receives, a non-empty list of "
            f"distinct names like ['price']; got fields={fields!r}"
        )
    output_type_name(output_type)
    if not key_width:
        return VectorizedAllWindowFunction(function, names, output_type, 0)
    return VectorizedWindowFunction(function, names, output_type, key_width)
