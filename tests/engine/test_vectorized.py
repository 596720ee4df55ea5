"""Vectorized window functions on the engine (the test harness): transcripts of what
each firing hands the function and emits, and the definition errors.

::

    key a: 1.0 @0, null @1, 3.0 @6        key b: 4.0 @2
    watermark 5 -> [0, 5) fires: a [1, nan] -> 1.0 (nanmean), b [4] -> 4.0
    a: 5.0 @3, late but within the allowed lateness (10) -> [0, 5) fires again over
       everything kept: [1, nan, 5] -> 3.0
    watermark 20 -> [5, 10) fires: a [3] -> 3.0
"""

from __future__ import annotations

import numpy as np
import pytest

import tidemark as tm
from tidemark.errors import UserFunctionError, WindowResultError, WindowSpecError
from tidemark.testing import WindowOperatorHarness
from tidemark.vectorized import vectorized_window_function


class NanMean(tm.VectorizedAggregateFunction):
    def aggregate(self, values):
        return np.nanmean(values)  # a NumPy scalar: checked and made a float


class Seen(tm.VectorizedAggregateFunction):
    """Records every call's arrays, to show what a firing hands the function."""

    def __init__(self):
        self.calls = []

    def aggregate(self, *columns):
        self.calls.append([list(np.round(c, 6)) for c in columns])
        return float(len(columns[0]))


def _element(key, x, y=0.0):
    return {"k": key, "x": x, "y": y}


def _harness(function, fields=("x",), **options):
    window = vectorized_window_function(function, list(fields), "double", 1)
    assigner = options.pop("assigner", tm.TumblingEventTimeWindows.of(5))
    return WindowOperatorHarness(assigner, window, key_selector=lambda e: e["k"], **options)


def test_a_late_firing_recomputes_over_all_values_kept():
    assert late_firing(NanMean()) == (
        [
            (("a", 0, 5, 1.0), 4),
            (("a", 0, 5, 3.0), 4),
            (("b", 0, 5, 4.0), 4),
            (("a", 5, 10, 3.0), 9),
        ],
        0,
    )


def late_firing(function):
    """The module docstring's transcript with ``function`` (a mean): its output, by
    window end, key and timestamp, and the late elements dropped."""
    h = _harness(function, allowed_lateness=10)
    for key, x, ts in [("a", 1.0, 0), ("a", None, 1), ("b", 4.0, 2), ("a", 3.0, 6)]:
        h.process_element(_element(key, x), ts)
    h.process_watermark(5)
    h.process_element(_element("a", 5.0), 3)
    h.process_watermark(20)
    output = sorted(h.output(), key=lambda r: (r[0][2], r[0][0], r[1]))
    return output, h.num_late_records_dropped


def test_beyond_the_lateness_an_element_is_dropped_not_computed():
    h = _harness(NanMean(), allowed_lateness=2)
    h.process_element(_element("a", 1.0), 0)
    h.process_watermark(10)
    h.process_element(_element("a", 9.0), 1)
    assert h.output() == [(("a", 0, 5, 1.0), 4)]
    assert h.num_late_records_dropped == 1


def test_sliding_windows_hand_each_window_its_values_in_arrival_order():
    seen = Seen()
    h = _harness(seen, assigner=tm.SlidingEventTimeWindows.of(6, 3))
    for x, ts in [(1.0, 0), (2.0, 4), (3.0, 2), (4.0, 7)]:
        h.process_element(_element("a", x), ts)
    h.process_watermark(100)
    assert [r for r, _ in h.output()] == [
        ("a", -3, 3, 2.0),
        ("a", 0, 6, 3.0),
        ("a", 3, 9, 2.0),
        ("a", 6, 12, 1.0),
    ]
    assert seen.calls == [[[1.0, 3.0]], [[1.0, 2.0, 3.0]], [[2.0, 4.0]], [[4.0]]]


def test_fields_arrive_in_the_order_named_nulls_as_nan():
    seen = Seen()
    h = _harness(seen, fields=("y", "x"))
    h.process_element(_element("a", 1.0, 10.0), 0)
    h.process_element(_element("a", None, 20), 1)
    h.process_watermark(10)
    assert np.isnan(seen.calls[0][1][1])
    assert seen.calls[0][0] == [10.0, 20.0] and seen.calls[0][1][0] == 1.0


def test_an_evictor_sees_elements_and_the_function_what_it_kept():
    seen = Seen()
    h = WindowOperatorHarness(
        tm.GlobalWindows.create(),
        vectorized_window_function(seen, ["x"], "double", 1),
        key_selector=lambda e: e["k"],
        trigger=tm.CountTrigger.of(3),
        evictor=tm.CountEvictor.of(2),
    )
    for x in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0):
        h.process_element(_element("a", x), int(x))
    assert [r for r, _ in h.output()] == [("a", None, None, 2.0), ("a", None, None, 2.0)]
    assert seen.calls == [[[2.0, 3.0]], [[5.0, 6.0]]]


def test_window_all_results_have_no_key_columns():
    window = vectorized_window_function(lambda v: int(v.max()), ["x"], "bigint", None)
    h = WindowOperatorHarness(tm.TumblingEventTimeWindows.of(5), window)
    h.process_element(_element("a", 2.0), 0)
    h.process_element(_element("b", 7.0), 1)
    h.process_watermark(10)
    assert h.output() == [((0, 5, 7), 4)]


def test_a_float_for_an_integral_output_is_refused_with_the_fix():
    window = vectorized_window_function(lambda v: v.max(), ["x"], "bigint", None)
    h = WindowOperatorHarness(tm.TumblingEventTimeWindows.of(5), window)
    h.process_element(_element("a", 7.0), 0)
    with pytest.raises(WindowResultError, match=r"return int\(value\)"):
        h.process_watermark(10)


def test_an_integral_output_takes_ints_and_checks_the_range():
    window = vectorized_window_function(lambda v: int(v.sum()), ["x"], "tinyint", 1)
    h = WindowOperatorHarness(tm.TumblingEventTimeWindows.of(5), window, key_selector=str)
    h.process_element({"x": 100}, 0)
    h.process_watermark(10)
    assert h.output() == [(("{'x': 100}", 0, 5, 100), 4)]
    h.process_element({"x": 100}, 11)
    h.process_element({"x": 100}, 12)
    with pytest.raises(WindowResultError, match="tinyint"):
        h.process_watermark(20)  # 200 does not fit


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("high", "return a number"),
        ([1.0], "return a number"),
        (np.array([1.0, 2.0]), "return a number"),
    ],
)
def test_a_wrong_result_type_is_a_window_result_error_with_the_fix(returned, message):
    h = _harness(lambda v: returned)
    h.process_element(_element("a", 1.0), 0)
    with pytest.raises(WindowResultError, match=message) as raised:
        h.process_watermark(10)
    assert "key='a'" in str(raised.value) and "TimeWindow[0, 5)" in str(raised.value)


def test_a_none_result_is_a_null_value():
    h = _harness(lambda v: None)
    h.process_element(_element("a", 1.0), 0)
    h.process_watermark(10)
    assert h.output() == [(("a", 0, 5, None), 4)]


def test_the_function_raising_is_a_user_function_error():
    h = _harness(lambda v: 1 / 0)
    h.process_element(_element("a", 1.0), 0)
    with pytest.raises(UserFunctionError, match="ZeroDivisionError"):
        h.process_watermark(10)


def test_an_element_without_the_field_or_a_non_number_is_named():
    h = _harness(NanMean(), fields=("z",))
    h.process_element(_element("a", 1.0), 0)
    with pytest.raises(WindowResultError, match="'z'"):
        h.process_watermark(10)
    h = _harness(NanMean())
    h.process_element(_element("a", "text"), 0)
    with pytest.raises(WindowResultError, match="must hold numbers"):
        h.process_watermark(10)


@pytest.mark.parametrize(
    ("function", "fields", "output_type", "message"),
    [
        (NanMean, ["x"], "double", "instance"),
        ("mean", ["x"], "double", "VectorizedAggregateFunction"),
        (NanMean(), [], "double", "non-empty"),
        (NanMean(), ["x", "x"], "double", "distinct"),
        (NanMean(), [3], "double", "fields"),
        (NanMean(), ["x"], "string", "output_type"),
        (NanMean(), ["x"], None, "output_type"),
    ],
)
def test_definition_mistakes_are_refused_with_the_fix(function, fields, output_type, message):
    with pytest.raises(WindowSpecError, match=message):
        vectorized_window_function(function, fields, output_type, 1)


def test_output_type_aliases():
    window = vectorized_window_function(lambda v: 3, "x", "long", 1)
    assert window.check.output_type == "bigint" and window.fields == ("x",)
