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

import numpy as np
import pytest

import tidemark as tm
from tidemark._engine.spec import count_window_spec
from tidemark.testing import WindowOperatorHarness
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


# A NumPy integer (a number read from an array or a pandas frame) is the int it holds,
# wherever a duration or a count is taken; a NumPy float or bool is refused as a Python
# float or bool is (issue 47).
@pytest.mark.parametrize(
    ("make", "read", "expected"),
    [
        pytest.param(
            lambda n: tm.TumblingEventTimeWindows.of(n), lambda a: a.size_ms, 5000, id="size"
        ),
        pytest.param(
            lambda n: tm.SlidingEventTimeWindows.of(n, np.int32(1000), np.int16(-5)),
            lambda a: (a.size_ms, a.slide_ms, a.offset_ms),
            (5000, 1000, -5),
            id="sliding-slide-offset",
        ),
        pytest.param(
            lambda n: tm.EventTimeSessionWindows.with_gap(n), lambda a: a.gap_ms, 5000, id="gap"
        ),
        pytest.param(lambda n: tm.Duration(n), lambda d: d.millis, 5000, id="duration"),
        pytest.param(lambda n: tm.Duration.of_seconds(n), lambda d: d.millis, 5_000_000, id="of"),
        pytest.param(lambda n: tm.CountTrigger.of(n), lambda t: t.count, 5000, id="count-trigger"),
        pytest.param(
            lambda n: tm.CountEvictor.of(n), lambda e: e.max_count, 5000, id="count-evictor"
        ),
        pytest.param(lambda n: tm.AfterCount(n), lambda t: t.count, 5000, id="after-count"),
        pytest.param(
            lambda n: count_window_spec(n, np.uint8(2)),
            lambda s: (s["evictor"].max_count, s["trigger"].count),
            (5000, 2),
            id="count-window",
        ),
    ],
)
def test_a_numpy_integer_is_taken_as_the_int_it_holds(make, read, expected):
    made = make(np.int64(5000))
    assert read(made) == expected
    assert "int64" not in repr(made) and "np." not in repr(made)
    got = read(made)
    for value in got if isinstance(got, tuple) else (got,):
        assert type(value) is int


def test_a_pipeline_of_numpy_integers_runs_as_one_of_ints():
    harness = WindowOperatorHarness(
        tm.TumblingEventTimeWindows.of(np.int64(10)),
        lambda a, b: a + b,
        trigger=tm.PurgingTrigger.of(tm.CountTrigger.of(np.int64(2))),
        allowed_lateness=np.int64(5),
    )
    for value, timestamp in [(1, 1), (2, 2), (3, 3)]:
        harness.process_element(value, timestamp)
    harness.process_watermark(20)
    assert harness.output() == [(3, 9)]
    assert harness.num_late_records_dropped == 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda: tm.TumblingEventTimeWindows.of(np.float64(5000)),
            "`size` must be a Duration, a datetime.timedelta or int milliseconds; "
            "got np.float64(5000.0) (float64)",
            id="size-float",
        ),
        pytest.param(
            lambda: tm.SlidingEventTimeWindows.of(5000, np.bool_(True)),
            "`slide` must be a Duration, a datetime.timedelta or int milliseconds; "
            "got np.True_ (bool)",
            id="slide-bool",
        ),
        pytest.param(
            lambda: tm.CountTrigger.of(np.float64(3)),
            "`count` must be an int >= 1; got count=np.float64(3.0)",
            id="count-float",
        ),
        pytest.param(
            lambda: tm.CountEvictor.of(np.bool_(True)),
            "`max_count` must be an int >= 0; got max_count=np.True_",
            id="max-count-bool",
        ),
        pytest.param(
            lambda: count_window_spec(np.float32(4), None),
            "`size` must be an int >= 1; got size=np.float32(4.0)",
            id="count-window-float",
        ),
    ],
)
def test_a_numpy_float_or_bool_is_refused_as_a_python_one_is(make, message):
    with pytest.raises(tm.WindowSpecError, match=re.escape(message)):
        make()


def test_numpy_integer_counts_of_the_spark_layer_are_ints():
    from tidemark.spark.protocol.source_partitions import _values
    from tidemark.spark.streaming.driver.keygroups import check_max_parallelism

    count = check_max_parallelism(np.int64(8))
    assert (count, type(count)) == (8, int)
    assert _values(np.int64(3)) == (0, 1, 2)
    with pytest.raises(tm.WindowSpecError, match=re.escape("got max_parallelism=np.float64(8.0)")):
        check_max_parallelism(np.float64(8))
