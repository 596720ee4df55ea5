"""A window's trigger is of one of two kinds: Flink's (``tm.Trigger``) or the Dataflow
model's (``tm.DataflowTrigger``); the specification knows which it holds, and a
Dataflow trigger answers only Beam's questions, never Flink's callbacks (issue 29)."""

from __future__ import annotations

import pytest

import tidemark as tm
from tidemark._engine.create import window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark._engine.triggering import FlinkTriggers
from tidemark.errors import WindowSpecError
from tidemark.testing import WindowOperatorHarness

TUMBLING = tm.TumblingEventTimeWindows.of(10)
FLINK_CALLBACKS = ("on_element", "on_event_time", "on_processing_time", "on_merge", "clear")


@pytest.mark.parametrize(
    "trigger",
    [
        tm.AfterWatermark(early=tm.AfterCount(2)),
        tm.AfterCount(1),
        tm.AfterProcessingTime(5),
        tm.Repeatedly(tm.AfterCount(2)),
        tm.AfterAny(tm.AfterCount(1), tm.AfterWatermark()),
        tm.AfterEach(tm.AfterCount(1), tm.AfterWatermark()),
        tm.DefaultTrigger(),
    ],
    ids=repr,
)
def test_a_dataflow_trigger_is_its_own_kind(trigger: tm.DataflowTrigger) -> None:
    assert not isinstance(trigger, tm.Trigger)
    assert not [name for name in FLINK_CALLBACKS if hasattr(trigger, name)]
    # the declarations any window's trigger answers
    assert tm.TimeDomain.EVENT_TIME in trigger.timer_domains()
    assert trigger.declares_timer_domains() and trigger.can_merge()
    assert not trigger.fires_only_at_window_end()


def test_the_spec_knows_which_kind_it_holds() -> None:
    logic = window_logic(lambda a, b: a + b)
    paned = OperatorSpec(TUMBLING, logic, trigger=tm.AfterWatermark())
    flink = OperatorSpec(TUMBLING, logic, trigger=tm.CountTrigger.of(2))
    default = OperatorSpec(TUMBLING, logic)
    assert (paned.trigger_is_dataflow, flink.trigger_is_dataflow) == (True, False)
    assert not default.trigger_is_dataflow
    assert isinstance(default.window_trigger, tm.EventTimeTrigger)


def test_each_kind_gets_its_driver_chosen_once() -> None:
    logic = window_logic(lambda a, b: a + b)
    flink = window_operator(TUMBLING, logic, trigger=tm.CountTrigger.of(2))
    paned = window_operator(TUMBLING, logic, trigger=tm.AfterCount(2))
    assert type(flink.driver) is FlinkTriggers
    assert type(paned.driver).__name__ == "PaneDriver"


@pytest.mark.parametrize(
    "trigger",
    [tm.CountTrigger.of(2), tm.AfterCount(2)],
    ids=["flink", "dataflow"],
)
def test_the_harness_takes_either_kind(trigger: tm.AnyTrigger) -> None:
    h = WindowOperatorHarness(
        TUMBLING, lambda a, b: a + b, key_selector=lambda v: "k", trigger=trigger
    )
    h.process_element(1, 1)
    h.process_element(2, 2)
    assert [value for value, _ in h.output()] == [3]


def test_something_else_as_a_trigger_is_refused_with_both_kinds_named() -> None:
    with pytest.raises(WindowSpecError) as error:
        OperatorSpec(TUMBLING, window_logic(lambda a, b: a), trigger="count")  # type: ignore[arg-type]
    assert str(error.value) == (
        "`trigger` must be a Trigger (Flink's, e.g. tm.CountTrigger.of(2)) or a "
        "DataflowTrigger (e.g. tm.AfterWatermark()); got 'count'"
    )


def test_a_dataflow_trigger_inside_a_flink_trigger_is_refused_at_definition() -> None:
    with pytest.raises(WindowSpecError, match=r"AfterCount\(2\) is a Dataflow trigger"):
        tm.PurgingTrigger.of(tm.AfterCount(2))  # type: ignore[arg-type]
