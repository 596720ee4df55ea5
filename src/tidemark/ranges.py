"""The event timestamps a window assigner can place in windows that fit in a long.

Flink computes a window's start and end in Java longs: an element near
``Long.MAX_VALUE`` gets a window whose end wraps around to a negative number, and is
then fired, or kept, nonsensically. tidemark's windows are Python ints, which do not
wrap, but their ends must still be longs (a result's timestamp, a Spark column, a
timer). So each assigner states the timestamps its windows can hold
(``WindowAssigner.timestamp_range``) and every mode refuses an element outside it with
its value, the range and its row (:func:`out_of_range_error`), never dropping it
uncounted. The table of ranges: ``docs/concepts/time.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidemark.errors import InputDataError
from tidemark.time import LONG_MAX, LONG_MIN

__all__ = [
    "aligned_timestamp_range",
    "first_out_of_range",
    "out_of_range_error",
    "out_of_range_message",
]


def aligned_timestamp_range(size_ms: int, slide_ms: int, offset_ms: int) -> tuple[int, int]:
    """The timestamps whose windows of ``size_ms`` every ``slide_ms`` at ``offset_ms``
    (tumbling: ``slide_ms == size_ms``) all start at or after ``Long.MIN_VALUE`` and end
    at or before ``Long.MAX_VALUE``, both bounds included.

    The highest is the last millisecond before the first window start whose window would
    end past ``Long.MAX_VALUE``; the lowest is the first timestamp whose earliest window
    starts at or after ``Long.MIN_VALUE``.

    >>> low, high = aligned_timestamp_range(60_000, 60_000, 0)
    >>> high, high + 1 + 60_000 > LONG_MAX
    (9223372036854719999, True)
    >>> low == LONG_MIN + (-LONG_MIN % 60_000)
    True
    """
    last_start = (LONG_MAX - size_ms) - (LONG_MAX - size_ms - offset_ms) % slide_ms
    first_start = LONG_MIN + (offset_ms - LONG_MIN) % slide_ms
    return first_start - slide_ms + size_ms, last_start + slide_ms - 1


def first_out_of_range(timestamps: Sequence[Any], low: int, high: int) -> int | None:
    """The position of the first of ``timestamps`` outside ``[low, high]`` (nulls are
    left to whoever reports them), or None: one pass at C speed when all are in it."""
    if low == LONG_MIN and high == LONG_MAX:
        return None
    try:
        if low <= min(timestamps, default=low) and max(timestamps, default=high) <= high:
            return None
    except TypeError:  # a null among them
        pass
    for position, timestamp in enumerate(timestamps):
        if timestamp is not None and not low <= timestamp <= high:
            return position
    return None


def out_of_range_error(
    assigner: Any, timestamp: int, bounds: tuple[int, int], element: Any = None
) -> InputDataError:
    """The error for an element at ``timestamp`` outside ``bounds``, the range
    ``assigner`` can window (:meth:`~tidemark.assigners.WindowAssigner.timestamp_range`)."""
    example = "" if element is None else str(element)
    return InputDataError(
        out_of_range_message(assigner, str(timestamp), bounds, timestamp > bounds[1], example)
    )


def out_of_range_message(
    assigner: Any, timestamp: str, bounds: tuple[int, int], above: bool, example: str
) -> str:
    """The message of :func:`out_of_range_error`, from its parts as text (the SQL fast
    path builds it in Spark SQL: its parts are placeholders there)."""
    low, high = bounds
    beyond = (
        f"end after Long.MAX_VALUE ({LONG_MAX})"
        if above
        else f"start before Long.MIN_VALUE ({LONG_MIN})"
    )
    row = f"; example row: {example}" if example else ""
    return (
        f"timestamp {timestamp}ms is outside what {assigner!r} can window, which is "
        f"[{low}, {high}] ms: its windows would {beyond}{row}. Filter such rows out "
        "upstream (or check the timestamp's unit)"
    )
