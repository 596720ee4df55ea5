"""Timers a callback registers at or before the time being fired are held for the next
advance of their clock (``WindowOperator.process_watermark``): here the stepwise
advances a replay uses (:mod:`tidemark._engine.replay`), which must give the same
firings as the plain ones. The
behaviour itself is pinned by ``transcripts/timer_registered_in_the_past.yaml``.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import partial
from typing import Any

from transcript import within_seconds
from transcript_functions import RearmingEventTimeTrigger

from tidemark import ContinuousProcessingTimeTrigger, TumblingEventTimeWindows
from tidemark._engine.operator import WindowOperator
from tidemark._engine.replay import advance_processing_time_stepwise, advance_watermark_stepwise
from tidemark._engine.timers import TimerQueue
from tidemark.testing import WindowOperatorHarness
from tidemark.windows import TimeWindow


def harness(trigger: Any) -> WindowOperatorHarness:
    return WindowOperatorHarness(
        TumblingEventTimeWindows.of(10),
        lambda a, b: (a[0], a[1] + b[1]),
        key_selector=lambda v: v[0],
        trigger=trigger,
        allowed_lateness=10,
    )


def test_a_held_timer_waits_outside_the_heap_until_released():
    queue, window = TimerQueue(), TimeWindow(0, 10)
    first = queue.push(9, "a", window)
    held = queue.hold(5, "a", window)
    assert held > first and queue.has_held() and queue.peek_time() == 9
    queue.release_held()
    assert not queue.has_held() and queue.peek_time() == 5


def test_a_stepwise_processing_time_advance_is_one_advance():
    """ContinuousProcessingTimeTrigger(5) on event-time windows, clock past the window's
    end: the stepwise advance (a replay's) fires 5 and 9 as the plain one does; the 9 it
    holds waits for a later clock, however many times the same one comes."""

    def run(stepwise: bool) -> list[Any]:
        h = harness(ContinuousProcessingTimeTrigger.of(5))
        op = h.operator
        if stepwise:
            advance = partial(advance_processing_time_stepwise, op)
        else:
            advance = op.advance_processing_time
        with within_seconds(20, f"stepwise={stepwise}"):
            advance(0)
            h.process_element(("a", 1), 3)
            for now in (20, 20, 20, 30, 30, 31):
                advance(now)
        return list(op.output)

    assert run(stepwise=True) == run(stepwise=False) == [(("a", 1), 9)] * 4


def test_a_stepwise_watermark_advance_fires_a_held_timer_at_each_recorded_watermark():
    """Each watermark a recorded stream had is an advance: a held timer fires once at
    each, as the harness fed those watermarks fires it, and not at watermarks the
    stream never had."""
    recorded = [9, 12, 15, 25, 40]

    def resolve(time: int) -> int:
        i = bisect_left(recorded, time)
        return recorded[i] if i < len(recorded) else 2**63 - 1

    stepwise = harness(RearmingEventTimeTrigger())
    stepwise.process_element(("a", 1), 3)
    with within_seconds(20, "advance_watermark_stepwise"):
        advance_watermark_stepwise(stepwise.operator, 40, resolve)
    fed = harness(RearmingEventTimeTrigger())
    fed.process_element(("a", 1), 3)
    for watermark in recorded:
        fed.process_watermark(watermark)
    assert stepwise.output() == fed.output() == [(("a", 1), 9)] * 4
    assert stepwise.num_event_time_timers() == fed.num_event_time_timers() == 0


def test_a_stepwise_processing_time_advance_fires_a_held_timer_at_each_arrival_time():
    """A replay runs each key alone: its clock steps through the stream's arrival times
    (any key's), each an advance, so the held timer fires once at each, as the engine fed
    every arrival time fires it."""
    arrivals = [0, 20, 30, 40]

    def resolve(time: int) -> int:
        i = bisect_left(arrivals, time)
        return arrivals[i] if i < len(arrivals) else 2**63 - 1

    stepwise = harness(ContinuousProcessingTimeTrigger.of(5))
    stepwise.process_element(("a", 1), 3)
    with within_seconds(20, "advance_processing_time_stepwise with arrival times"):
        advance_processing_time_stepwise(stepwise.operator, 40, resolve)
    fed = harness(ContinuousProcessingTimeTrigger.of(5))
    fed.process_element(("a", 1), 3)
    for now in arrivals:
        fed.set_processing_time(now)
    assert stepwise.output() == fed.output() == [(("a", 1), 9)] * 4


def test_the_general_operator_only_advances_its_clocks():
    """The replay's stepping is the replay's (:mod:`tidemark._engine.replay`): the
    general operator holds Flink's semantics, one advance per call."""
    assert not [name for name in dir(WindowOperator) if "stepwise" in name]
