"""Values a Row or a result column cannot hold, refused with the value and what to do.

:func:`beyond_datetime`: a timestamp Spark holds (to the year 294247) that no Python
``datetime`` does, so no Row can (:func:`micros_beyond_datetime` finds it);
:func:`checked_array`: a result value its declared field cannot hold (a string for a
``long``, an int past 64 bits, a float for an integral field), and :data:`SUM_ADVICE`,
what to do about a sum beyond its column's type, in every mode.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from tidemark.errors import InputDataError, WindowResultError

__all__ = ["beyond_datetime", "micros_beyond_datetime", "checked_array", "SUM_ADVICE"]

_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)
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


def micros_beyond_datetime(micros: Iterable[int | None]) -> int | None:
    """The first of ``micros`` (since the epoch; None skipped) that no Python
    ``datetime`` holds, or None."""
    return next((v for v in micros if v is not None and not _FIRST <= v <= _LAST), None)


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
