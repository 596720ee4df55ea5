"""Event time on Spark's clock: how tidemark's watermarks and timers map onto Spark's.

Spark's watermark starts at 0 and only moves up, and its event-time timers fire when
``expiry <= watermark``. Flink's watermark starts at ``Long.MIN_VALUE`` and timestamps
may be negative. So the streaming runner keeps Spark's clock ``SPARK_OFFSET_MS`` ahead
of the engine's:

* the watermark column is ``timestamp + COLUMN_SHIFT_MS`` with the delay
  ``COLUMN_SHIFT_MS - SPARK_OFFSET_MS + out_of_orderness + 1``, so Spark's watermark is
  ``max_timestamp - out_of_orderness - 1 + SPARK_OFFSET_MS`` (Flink's plus the offset);
* an engine timer at ``t`` is a Spark timer at ``t + SPARK_OFFSET_MS``;
* Spark's initial watermark 0 means "none yet" (``Long.MIN_VALUE``);
* a row stamped at or after ``END_OF_INPUT_MS`` marks the end of a bounded input: its
  watermark column is ``END_OF_INPUT_COLUMN_MICROS``, and any Spark watermark that maps
  to ``>= END_OF_INPUT_MS`` is the engine's final watermark ``Long.MAX_VALUE``;
* with idleness, a watermark ``W`` a key first saw at processing time ``T_W`` becomes
  ``W + (T - T_W - idleness)`` at processing time ``T`` once that is positive
  (:func:`idle_watermark`).

Examples
--------
>>> engine_watermark(0) == LONG_MIN
True
>>> engine_watermark(spark_watermark(7_999))
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

from tidemark.errors import InputDataError
from tidemark.spark.timestamps import ACCEPTED_TIMESTAMP_STRINGS
from tidemark.time import LONG_MAX, LONG_MIN

__all__ = [
    "SPARK_OFFSET_MS",
    "COLUMN_SHIFT_MS",
    "END_OF_INPUT_MS",
    "END_OF_INPUT_COLUMN_MICROS",
    "MIN_TIMESTAMP_MS",
    "watermark_delay_ms",
    "spark_watermark",
    "end_of_input_spark_watermark",
    "engine_watermark",
    "spark_event_timer",
    "idle_watermark",
    "check_timestamp",
]

SPARK_OFFSET_MS = 2**50
"""Spark's watermark and event-time timers run this far (~35,700 years) ahead of the engine's."""

COLUMN_SHIFT_MS = 2**51
"""The watermark column is the event time shifted by this much; a row would have to be
``COLUMN_SHIFT_MS - SPARK_OFFSET_MS`` late for Spark's own late-row filter to drop it (and
the runner projects the column away before the processor, so Spark filters no row)."""

END_OF_INPUT_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: a row stamped at or after it ends a bounded input."""

END_OF_INPUT_COLUMN_MICROS = 2**62
"""The watermark column of an end-of-input row (microseconds, Spark's timestamp unit)."""

MIN_TIMESTAMP_MS = -(2**49)
"""The earliest event timestamp the streaming runner accepts (about 15,800 BC)."""


def watermark_delay_ms(out_of_orderness_ms: int) -> int:
    """The ``withWatermark`` delay that makes Spark's watermark Flink's plus the offset."""
    return COLUMN_SHIFT_MS - SPARK_OFFSET_MS + out_of_orderness_ms + 1


def spark_watermark(engine_watermark_ms: int) -> int:
    """Spark's watermark (ms) when the engine's is ``engine_watermark_ms``."""
    return engine_watermark_ms + SPARK_OFFSET_MS


def end_of_input_spark_watermark(out_of_orderness_ms: int) -> int:
    """Spark's watermark after an end-of-input row was seen."""
    return END_OF_INPUT_COLUMN_MICROS // 1000 - watermark_delay_ms(out_of_orderness_ms)


def engine_watermark(spark_watermark_ms: int) -> int:
    """The engine's watermark for Spark's ``getCurrentWatermarkInMs()``."""
    if spark_watermark_ms <= 0:
        return LONG_MIN
    watermark = spark_watermark_ms - SPARK_OFFSET_MS
    return LONG_MAX if watermark >= END_OF_INPUT_MS else watermark


def spark_event_timer(time_ms: int, watermark: int) -> int:
    """The Spark timer that stands for an engine event-time timer at ``time_ms``.

    A timer at or behind the key's ``watermark`` fires at the next watermark advance, as
    in the engine (``process_watermark`` fires it with the next watermark), so it becomes
    ``watermark + 1``. Timers beyond the end of input fire with the final watermark.
    """
    time_ms = max(time_ms, watermark + 1)
    return min(max(time_ms + SPARK_OFFSET_MS, 1), END_OF_INPUT_MS + SPARK_OFFSET_MS)


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


def check_timestamp(timestamp: int | None, key: object, event_time: bool) -> None:
    """Reject a timestamp the event-time mapping cannot carry, naming the key."""
    if timestamp is None:
        if event_time:
            raise InputDataError(
                f"an element of key {key!r} has a null timestamp (a null, or a string that "
                f"is no timestamp; accepted: {ACCEPTED_TIMESTAMP_STRINGS}); event-time "
                "windows on Spark need a timestamp on every row (filter or fill nulls "
                "upstream)"
            )
        return
    if timestamp < MIN_TIMESTAMP_MS:
        raise InputDataError(
            f"timestamp must be >= {MIN_TIMESTAMP_MS}ms (about 15,800 BC) in streaming; "
            f"got timestamp={timestamp}ms for key {key!r}"
        )
