"""A Duration (or timedelta) is a whole number of milliseconds, or refused (issue 28).

Time is int milliseconds, as Flink's; ``Duration.of_millis(1.9)`` was 1 ms (truncated),
``of_seconds(0.0019)`` 2 ms (rounded) and ``of_seconds(0.0004)`` 0 ms, while a window
size of ``1.5`` was refused: each is now a ``WindowSpecError`` naming the value, the
milliseconds it means and a whole number to give instead. A float is read as written
(its shortest decimal), so ``of_minutes(0.1)`` is exactly 6000 ms.
"""

from __future__ import annotations

import datetime
import re

import pytest

import tidemark as tm
from tidemark.time import from_datetime, to_millis


def _rounded(call, millis, whole):
    return re.escape(
        f"`{call}` is {millis} ms: time is int milliseconds (as Flink's), so it would be "
        f"rounded; give a whole number of milliseconds, e.g. Duration.of_millis({whole})"
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda: tm.Duration.of_millis(1.9),
            _rounded("Duration.of_millis(1.9)", 1.9, 2),
            id="of-millis-truncated",
        ),
        pytest.param(
            lambda: tm.Duration.of_seconds(0.0019),
            _rounded("Duration.of_seconds(0.0019)", 1.9, 2),
            id="of-seconds-rounded",
        ),
        pytest.param(
            lambda: tm.Duration.of_seconds(0.0004),
            _rounded("Duration.of_seconds(0.0004)", 0.4, 0),
            id="of-seconds-to-zero",
        ),
        pytest.param(
            lambda: tm.Duration.of_hours(1 / 3),
            _rounded("Duration.of_hours(0.3333333333333333)", 1199999.9999999998, 1200000),
            id="of-hours-a-third",
        ),
        pytest.param(lambda: tm.Duration(1.5), _rounded("Duration(1.5)", 1.5, 2), id="constructor"),
        pytest.param(
            lambda: tm.Duration.of_seconds(float("nan")),
            re.escape("`Duration.of_seconds` takes a finite number; got nan (float)"),
            id="nan",
        ),
        pytest.param(
            lambda: tm.Duration.of_minutes("5"),
            re.escape("`Duration.of_minutes` takes a finite number; got '5' (str)"),
            id="string",
        ),
        pytest.param(
            lambda: tm.TumblingEventTimeWindows.of(datetime.timedelta(microseconds=1500)),
            re.escape(
                "`size` must be a whole number of milliseconds; got "
                "datetime.timedelta(microseconds=1500): time is int milliseconds (as "
                "Flink's), so it would be rounded; round the timedelta first"
            ),
            id="timedelta-size",
        ),
    ],
)
def test_a_duration_that_is_not_whole_milliseconds_is_refused(make, message):
    with pytest.raises(tm.WindowSpecError, match=f"^{message}$"):
        make()


def test_a_window_of_a_fractional_duration_is_refused_as_its_size_is():
    with pytest.raises(tm.WindowSpecError, match=r"Duration\.of_millis\(1\.9\)"):
        tm.TumblingEventTimeWindows.of(tm.Duration.of_millis(1.9))
    with pytest.raises(tm.WindowSpecError, match=r"Duration\.of_millis\(2\.7\)"):
        tm.EventTimeSessionWindows.with_gap(tm.Duration.of_millis(2.7))
    with pytest.raises(tm.WindowSpecError, match=r"got 1\.5 \(float\)"):
        tm.TumblingEventTimeWindows.of(1.5)


@pytest.mark.parametrize(
    ("duration", "millis"),
    [
        (tm.Duration.of_minutes(0.1), 6_000),
        (tm.Duration.of_seconds(1.5), 1_500),
        (tm.Duration.of_seconds(0.001), 1),
        (tm.Duration.of_hours(2.5), 9_000_000),
        (tm.Duration.of_days(1e6), 86_400_000_000_000),
        (tm.Duration.of_millis(2.0), 2),
        (tm.Duration(7), 7),
    ],
)
def test_whole_milliseconds_are_kept_exactly(duration, millis):
    assert duration.to_millis() == millis and type(duration.to_millis()) is int


def test_timedeltas_of_whole_milliseconds_pass_and_datetimes_still_floor():
    assert to_millis(datetime.timedelta(seconds=1.5), "size") == 1_500
    assert to_millis(datetime.timedelta(milliseconds=-1), "offset") == -1
    moment = datetime.datetime(2020, 5, 24, 4, 0, 0, 1999)  # a row's timestamp: floored
    assert from_datetime(moment) == 1_590_292_800_001
