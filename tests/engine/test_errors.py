"""Every definition-time error names the parameter, the rule and the value."""

from __future__ import annotations

import datetime

import pytest

import tidemark as tm
from tidemark.testing import WindowOperatorHarness


class _Sum(tm.ReduceFunction):
    def reduce(self, value1, value2):
        return value1 + value2


def _sum(a, b):
    return a + b


@pytest.mark.parametrize(
    "make, message",
    [
        pytest.param(
            lambda: tm.TumblingEventTimeWindows.of(0),
            "`size` must be > 0; got size=0ms",
            id="tumbling-size",
        ),
        pytest.param(
            lambda: tm.TumblingProcessingTimeWindows.of(10, -10),
            "`offset` must satisfy abs(offset) < size; got offset=-10ms, size=10ms",
            id="tumbling-offset",
        ),
        pytest.param(
            lambda: tm.SlidingProcessingTimeWindows.of(10, -1),
            "`slide` must be > 0; got slide=-1ms",
            id="slide-negative",
        ),
        pytest.param(
            lambda: tm.SlidingEventTimeWindows.of(10, 5, 5),
            "`offset` must satisfy abs(offset) < slide; got offset=5ms, slide=5ms",
            id="sliding-offset",
        ),
        pytest.param(
            lambda: tm.EventTimeSessionWindows.with_gap(datetime.timedelta(0)),
            "`gap` must be > 0; got gap=0ms",
            id="session-gap",
        ),
        pytest.param(
            lambda: tm.ProcessingTimeSessionWindows.with_gap(-5),
            "`gap` must be > 0; got gap=-5ms",
            id="processing-session-gap",
        ),
        pytest.param(
            lambda: tm.TumblingEventTimeWindows.of("1m"),
            "`size` must be a Duration, a datetime.timedelta or int milliseconds; got '1m'",
            id="size-type",
        ),
        pytest.param(
            lambda: tm.CountTrigger.of(0),
            "`count` must be an int >= 1; got count=0",
            id="count-trigger",
        ),
        pytest.param(
            lambda: tm.ContinuousEventTimeTrigger.of(0),
            "`interval` must be > 0; got interval=0ms",
            id="continuous-interval",
        ),
        pytest.param(
            lambda: tm.CountEvictor.of(-1),
            "`max_count` must be an int >= 0; got max_count=-1",
            id="count-evictor",
        ),
        pytest.param(
            lambda: tm.TimeEvictor.of(-1),
            "`interval` must be >= 0; got interval=-1ms",
            id="time-evictor",
        ),
        pytest.param(
            lambda: tm.WatermarkStrategy.for_bounded_out_of_orderness(-1),
            "`max_out_of_orderness` must be >= 0; got max_out_of_orderness=-1ms",
            id="out-of-orderness",
        ),
        pytest.param(
            lambda: tm.WatermarkStrategy.for_monotonous_timestamps().with_idleness(0),
            "`idle_timeout` must be > 0; got idle_timeout=0ms",
            id="idleness",
        ),
        pytest.param(
            lambda: WindowOperatorHarness(
                tm.TumblingEventTimeWindows.of(5), _sum, allowed_lateness=-1
            ),
            "`allowed_lateness` must be >= 0; got allowed_lateness=-1ms",
            id="lateness",
        ),
        pytest.param(
            lambda: WindowOperatorHarness(
                tm.EventTimeSessionWindows.with_gap(5),
                _sum,
                trigger=tm.DeltaTrigger.of(1, lambda a, b: b - a),
            ),
            "`trigger` must support merging (can_merge() is True) with the merging assigner",
            id="non-merging-trigger",
        ),
        pytest.param(
            lambda: WindowOperatorHarness(tm.GlobalWindows.create(), _sum, evictor="x"),
            "`evictor` must be an Evictor; got 'x'",
            id="evictor-type",
        ),
        pytest.param(
            lambda: WindowOperatorHarness(tm.GlobalWindows.create(), 42),
            "`function` must be a ReduceFunction or callable",
            id="function-type",
        ),
        pytest.param(
            lambda: WindowOperatorHarness(tm.GlobalWindows.create(), _Sum),
            "`function` must be an instance, not the class _Sum: pass _Sum(); got <class",
            id="function-class",
        ),
        pytest.param(
            lambda: WindowOperatorHarness(tm.GlobalWindows.create(), _sum, trigger=tm.CountTrigger),
            "`trigger` must be an instance, not the class CountTrigger: pass "
            "CountTrigger.of(...); got <class",
            id="trigger-class",
        ),
        pytest.param(
            lambda: WindowOperatorHarness(tm.TumblingEventTimeWindows, _sum),
            "`assigner` must be an instance, not the class TumblingEventTimeWindows: pass "
            "TumblingEventTimeWindows.of(...)",
            id="assigner-class",
        ),
    ],
)
def test_definition_errors_name_parameter_rule_and_value(make, message):
    with pytest.raises(tm.WindowSpecError) as info:
        make()
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_runtime_errors_carry_key_window_and_watermark():
    def broken(a, b):
        raise KeyError("missing")

    h = WindowOperatorHarness(
        tm.TumblingEventTimeWindows.of(5), broken, key_selector=lambda v: v[0]
    )
    h.process_element(("k", 1), 1)
    h.process_watermark(0)
    with pytest.raises(tm.UserFunctionError) as info:
        h.process_element(("k", 2), 2)
    assert "key='k', window=TimeWindow[0, 5), watermark=0" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)


def test_an_event_time_assigner_needs_timestamps():
    h = WindowOperatorHarness(tm.TumblingEventTimeWindows.of(5), _sum)
    with pytest.raises(tm.UserFunctionError, match="needs an event timestamp"):
        h.process_element(1, None)


def test_a_global_window_with_a_continuous_trigger_ends_at_the_end_of_input():
    """Flink loops for ever here (each periodic firing schedules the next, up to
    Long.MAX_VALUE); tidemark fires the window once more and stops."""
    h = WindowOperatorHarness(
        tm.GlobalWindows.create(), _sum, trigger=tm.ContinuousEventTimeTrigger.of(1000)
    )
    h.process_element(1, 10)
    h.process_element(2, 20)
    h.process_watermark(2500)
    h.process_element(4, 3000)
    h.process_watermark(tm.LONG_MAX)
    assert [v for v, _ in h.output()] == [3, 3, 7]
    assert h.num_event_time_timers() == 0
