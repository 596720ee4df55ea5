"""Event time on Spark's clock: how tidemark's watermarks and timers map onto Spark's.

Spark's watermark starts at 0 and only moves up, and its event-time timers fire when
``expiry <= watermark``. Flink's watermark starts at ``Long.MIN_VALUE`` and timestamps
may be negative. A query keeps Spark's clock ``offset_ms`` ahead of the engine's, chosen
when it first starts and kept with its checkpoint (:mod:`.checkpoint`):

* ``0`` (the default): Spark's watermark *is* the engine's, so Spark's progress
  (``lastProgress["eventTime"]["watermark"]``) and UI show it as it is. Spark's 0 means
  "no watermark yet", so a watermark at or before the epoch cannot be carried: an
  element at or before the epoch plus the out-of-orderness bound, arriving before the
  query has a watermark, is refused (:func:`check_timestamp`);
* :data:`SPARK_OFFSET_MS` (``shift_spark_clock=True``, and every query started before
  the offset was chosen per query): timestamps from :data:`MIN_TIMESTAMP_MS` on, with
  Spark showing the watermark 35,700 years ahead.

Either way:

* the watermark column is ``timestamp + 2 * offset_ms`` (:func:`column_shift_ms`) with
  the delay ``offset_ms + out_of_orderness + 1``, so Spark's watermark is
  ``max_timestamp - out_of_orderness - 1 + offset_ms`` (Flink's plus the offset), and
  unshifted, Spark's event-time figures (``min``, ``max``, ``avg``) are the rows' own;
* an engine timer at ``t`` is a Spark timer at ``t + offset_ms``;
* Spark's initial watermark 0 means "none yet" (``Long.MIN_VALUE``);
* a row stamped at or after ``END_OF_INPUT_MS`` marks the end of a bounded input: its
  watermark column is ``END_OF_INPUT_COLUMN_MICROS``, and any Spark watermark that maps
  to ``>= END_OF_INPUT_MS`` is the engine's final watermark ``Long.MAX_VALUE``;
* a Spark watermark no query of the offset can have (a checkpoint written with the
  other offset, restarted without tidemark's record of it) is refused;
* with idleness, a watermark ``W`` a key first saw at processing time ``T_W`` becomes
  ``W + (T - T_W - idleness)`` at processing time ``T`` once that is positive
  (:func:`idle_watermark`).

Examples
--------
>>> engine_watermark(0) == LONG_MIN
True
>>> engine_watermark(spark_watermark(7_999))
7999
>>> engine_watermark(7_999, offset_ms=0)
7999
>>> engine_watermark(end_of_input_spark_watermark(2_000)) == LONG_MAX
True
>>> spark_event_timer(9_999, watermark=LONG_MIN) - SPARK_OFFSET_MS
9999
>>> spark_event_timer(5_000, watermark=7_999) - SPARK_OFFSET_MS  # at the next advance
8000
>>> idle_watermark(7_999, seen_at_ms=10_000, now_ms=12_500, idleness_ms=1_000)
9499
"""

from __future__ import annotations

from typing import Any

from tidemark.errors import InputDataError, WindowSpecError
from tidemark.spark.protocol.timestamps import ACCEPTED_TIMESTAMP_STRINGS
from tidemark.time import LONG_MAX, LONG_MIN

__all__ = [
    "SPARK_OFFSET_MS",
    "COLUMN_SHIFT_MS",
    "column_shift_ms",
    "END_OF_INPUT_MS",
    "END_OF_INPUT_COLUMN_MICROS",
    "MIN_TIMESTAMP_MS",
    "check_spark_offset",
    "watermark_delay_ms",
    "spark_watermark",
    "end_of_input_spark_watermark",
    "engine_watermark",
    "spark_event_timer",
    "idle_watermark",
    "check_timestamp",
    "earliest_timestamp",
    "SHIFT_HINT",
]

SPARK_OFFSET_MS = 2**50
"""How far (~35,700 years) Spark's watermark and event-time timers run ahead of the
engine's in a query with a shifted clock (``shift_spark_clock=True``, or started before
the offset was chosen per query); the offset of the functions here unless given."""

SHIFT_HINT = (
    "start the query on a new checkpoint with from_dataframe(..., shift_spark_clock=True) "
    "(window_stream(..., spark_offset_ms=SPARK_OFFSET_MS)), which runs Spark's event-time "
    "clock 2**50 ms ahead of the engine's: any watermark from about 15,800 BC on is then "
    "carried, and Spark's progress and UI show the watermark that far ahead"
)

COLUMN_SHIFT_MS = 2**51
"""The watermark column of a shifted clock is the event time shifted by this much
(:func:`column_shift_ms`); the runner projects the column away before the processor, so
Spark's late-row filter has nothing to filter on."""

END_OF_INPUT_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: a row stamped at or after it ends a bounded input."""

END_OF_INPUT_COLUMN_MICROS = 2**62
"""The watermark column of an end-of-input row (microseconds, Spark's timestamp unit)."""

MIN_TIMESTAMP_MS = -(2**49)
"""The earliest event timestamp the streaming runner accepts (about 15,800 BC)."""


def check_spark_offset(offset_ms: Any) -> None:
    """Refuse an offset other than the two a query can run with (0, :data:`SPARK_OFFSET_MS`)."""
    if offset_ms not in (0, SPARK_OFFSET_MS) or isinstance(offset_ms, bool):
        raise WindowSpecError(
            f"`spark_offset_ms` must be 0 or SPARK_OFFSET_MS ({SPARK_OFFSET_MS}); got {offset_ms!r}"
        )


def column_shift_ms(offset_ms: int = SPARK_OFFSET_MS) -> int:
    """How far the watermark column runs ahead of the event time: twice the offset, so
    that the ``withWatermark`` delay is positive (:data:`COLUMN_SHIFT_MS` shifted, 0
    unshifted)."""
    return 2 * offset_ms


def watermark_delay_ms(out_of_orderness_ms: int, offset_ms: int = SPARK_OFFSET_MS) -> int:
    """The ``withWatermark`` delay that makes Spark's watermark Flink's plus the offset."""
    return column_shift_ms(offset_ms) - offset_ms + out_of_orderness_ms + 1


def spark_watermark(engine_watermark_ms: int, offset_ms: int = SPARK_OFFSET_MS) -> int:
    """Spark's watermark (ms) when the engine's is ``engine_watermark_ms``."""
    return engine_watermark_ms + offset_ms


def end_of_input_spark_watermark(out_of_orderness_ms: int, offset_ms: int = SPARK_OFFSET_MS) -> int:
    """Spark's watermark after an end-of-input row was seen."""
    delay = watermark_delay_ms(out_of_orderness_ms, offset_ms)
    return END_OF_INPUT_COLUMN_MICROS // 1000 - delay


def engine_watermark(spark_watermark_ms: int, offset_ms: int = SPARK_OFFSET_MS) -> int:
    """The engine's watermark for Spark's ``getCurrentWatermarkInMs()``.

    Raises
    ------
    WindowSpecError
        Spark's watermark is one only a query with the other offset has: its
        checkpoint was written with another clock than this query runs.
    """
    if spark_watermark_ms <= 0:
        return LONG_MIN
    _check_clock(spark_watermark_ms, offset_ms)
    watermark = spark_watermark_ms - offset_ms
    return LONG_MAX if watermark >= END_OF_INPUT_MS else watermark


def _check_clock(spark_watermark_ms: int, offset_ms: int) -> None:
    """Refuse a Spark watermark of the other clock. Unshifted, real watermarks are below
    the end of input and a shifted one is past it; shifted, every watermark is above
    the end of input (from :data:`MIN_TIMESTAMP_MS` on, shifted)."""
    if offset_ms == 0:
        shifted = END_OF_INPUT_MS <= spark_watermark_ms <= SPARK_OFFSET_MS + END_OF_INPUT_MS
    else:
        shifted = spark_watermark_ms >= END_OF_INPUT_MS
    if shifted == (offset_ms != 0):
        return
    ahead = "Spark's event-time clock 2**50 ms ahead of the engine's"
    ran, runs = (ahead, "an unshifted one") if offset_ms == 0 else ("an unshifted one", ahead)
    raise WindowSpecError(
        f"Spark's watermark {spark_watermark_ms}ms comes from a checkpoint whose query ran "
        f"{ran}, and this query runs {runs}: its timers and watermark would be read 35,700 "
        "years apart. Restart it with write_outputs, which reads the clock from tidemark's "
        "record beside the checkpoint, or with the clock it was started with "
        "(from_dataframe's shift_spark_clock)"
    )


def spark_event_timer(time_ms: int, watermark: int, offset_ms: int = SPARK_OFFSET_MS) -> int:
    """The Spark timer that stands for an engine event-time timer at ``time_ms``.

    A timer at or behind the key's ``watermark`` fires at the next watermark advance, as
    in the engine (``process_watermark`` fires it with the next watermark), so it becomes
    ``watermark + 1``. Timers beyond the end of input fire with the final watermark.
    """
    time_ms = max(time_ms, watermark + 1)
    return min(max(time_ms + offset_ms, 1), END_OF_INPUT_MS + offset_ms)


def idle_watermark(watermark: int, seen_at_ms: int, now_ms: int, idleness_ms: int) -> int:
    """The engine watermark of an input idle since ``seen_at_ms``, at ``now_ms``.

    ``watermark`` (the engine's) stood still from processing time ``seen_at_ms``; after
    ``idleness_ms`` more it advances with the processing-time clock. No watermark yet and
    the final watermark stay as they are.

    >>> idle_watermark(100, seen_at_ms=0, now_ms=1_000, idleness_ms=1_000)  # not yet idle
    100
    >>> idle_watermark(100, seen_at_ms=0, now_ms=1_250, idleness_ms=1_000)
    350
    >>> idle_watermark(LONG_MIN, seen_at_ms=0, now_ms=9_000, idleness_ms=1) == LONG_MIN
    True
    """
    if watermark in (LONG_MIN, LONG_MAX):
        return watermark
    idle_ms = now_ms - seen_at_ms - idleness_ms
    return min(watermark + max(idle_ms, 0), END_OF_INPUT_MS - 1)


def earliest_timestamp(
    offset_ms: int, out_of_orderness_ms: int | None, spark_watermark_ms: int
) -> int:
    """The earliest element timestamp a query can carry now (see the module docstring):
    with a shifted clock :data:`MIN_TIMESTAMP_MS`; unshifted, before Spark has a
    watermark, the first whose watermark would be positive, and any once it has one
    (the engine judges a late element by the watermark, which is exact)."""
    if offset_ms != 0:
        return MIN_TIMESTAMP_MS
    if out_of_orderness_ms is None or spark_watermark_ms > 0:
        return LONG_MIN
    return out_of_orderness_ms + 2


def check_timestamp(
    timestamp: int | None, key: object, event_time: bool, earliest_ms: int = MIN_TIMESTAMP_MS
) -> None:
    """Reject a timestamp the event-time mapping cannot carry (before ``earliest_ms``,
    :func:`earliest_timestamp`), naming the key."""
    if timestamp is None:
        if event_time:
            raise InputDataError(
                f"an element of key {key!r} has a null timestamp (a null, or a string that "
                f"is no timestamp; accepted: {ACCEPTED_TIMESTAMP_STRINGS}); event-time "
                "windows on Spark need a timestamp on every row (filter or fill nulls "
                "upstream)"
            )
        return
    if timestamp >= earliest_ms:
        return
    if earliest_ms == MIN_TIMESTAMP_MS:
        raise InputDataError(
            f"timestamp must be >= {MIN_TIMESTAMP_MS}ms (about 15,800 BC) in streaming; "
            f"got timestamp={timestamp}ms for key {key!r}"
        )
    bound = earliest_ms - 2  # the out-of-orderness
    raise InputDataError(
        f"timestamp={timestamp}ms of key {key!r} arrived before the query had a watermark, "
        f"and the watermark it makes, {timestamp} - {bound} - 1 = {timestamp - bound - 1}ms "
        f"(out-of-orderness {bound}ms), is at or before the epoch: Spark's watermark starts "
        f"at 0 and cannot carry it on an unshifted clock. To run such data, {SHIFT_HINT}"
    )
