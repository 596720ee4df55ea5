"""What triggers and assigners declare they need, and who asks: the Spark time mode,
the BATCH wall clock, the aligned and SQL fast paths, and the switch that turns every
fast path off. Also: a user's trigger type-checks without ``type: ignore``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tidemark as tm
from tidemark import TimeDomain
from tidemark._engine.create import AlignedWindowOperator, create_window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.spark.batch import sql_plan
from tidemark.spark.execution import element_frame
from tidemark.spark.plan import FAST_PATHS_CONF, WindowOp, fast_paths_enabled
from tidemark.spark.streaming.driver.from_plan import _served_time_mode, time_mode_of
from tidemark.windows import AlignedLayout

EVENT, PROCESSING = TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME


class SilentTrigger(tm.NeverTrigger):
    """A custom trigger that does not say which timers it uses: inherits NeverTrigger's
    empty domains (so declared), unlike :class:`Undeclared`."""


class Undeclared(tm.Trigger[tm.Window]):
    def on_element(
        self, element: Any, timestamp: int | None, window: tm.Window, ctx: tm.TriggerContext
    ) -> tm.TriggerResult:
        return tm.TriggerResult.CONTINUE

    def on_event_time(
        self, time: int, window: tm.Window, ctx: tm.TriggerContext
    ) -> tm.TriggerResult:
        return tm.TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: tm.Window, ctx: tm.TriggerContext
    ) -> tm.TriggerResult:
        return tm.TriggerResult.CONTINUE

    def clear(self, window: tm.Window, ctx: tm.TriggerContext) -> None:
        pass


class ProcessingOnly(Undeclared):
    def timer_domains(self) -> frozenset[TimeDomain]:
        return frozenset({PROCESSING})


@pytest.mark.parametrize(
    ("trigger", "domains", "at_end"),
    [
        pytest.param(tm.EventTimeTrigger.create(), {EVENT}, True, id="event-time"),
        pytest.param(tm.ProcessingTimeTrigger.create(), {PROCESSING}, False, id="processing"),
        pytest.param(tm.CountTrigger.of(3), set(), False, id="count"),
        pytest.param(tm.DeltaTrigger.of(1, lambda a, b: 0), set(), False, id="delta"),
        pytest.param(tm.NeverTrigger(), set(), False, id="never"),
        pytest.param(tm.EndOfStreamTrigger(), {EVENT}, False, id="end-of-stream"),
        pytest.param(tm.ContinuousEventTimeTrigger.of(5), {EVENT}, False, id="continuous-event"),
        pytest.param(
            tm.ContinuousProcessingTimeTrigger.of(5), {PROCESSING}, False, id="continuous-proc"
        ),
        pytest.param(
            tm.PurgingTrigger.of(tm.ContinuousProcessingTimeTrigger.of(5)),
            {PROCESSING},
            False,
            id="purging-delegates-domains",
        ),
        pytest.param(
            tm.PurgingTrigger.of(tm.EventTimeTrigger.create()),
            {EVENT},
            False,
            id="purging-event-time-purges-so-not-the-plain-end-firing",
        ),
        pytest.param(Undeclared(), {EVENT, PROCESSING}, False, id="custom-default-both"),
    ],
)
def test_triggers_declare_their_timer_domains_and_end_of_window_firing(
    trigger: Any, domains: set[TimeDomain], at_end: bool
) -> None:
    assert trigger.timer_domains() == domains
    assert trigger.fires_only_at_window_end() is at_end


def test_purging_trigger_delegates_can_merge() -> None:
    assert tm.PurgingTrigger.of(tm.CountTrigger.of(2)).can_merge()
    assert not tm.PurgingTrigger.of(Undeclared()).can_merge()


@pytest.mark.parametrize(
    ("assigner", "domains", "layout"),
    [
        pytest.param(tm.TumblingEventTimeWindows.of(10, 3), {EVENT}, (10, 10, 3), id="tumbling"),
        pytest.param(tm.SlidingEventTimeWindows.of(10, 5), {EVENT}, (10, 5, 0), id="sliding"),
        pytest.param(
            tm.TumblingProcessingTimeWindows.of(10), {PROCESSING}, (10, 10, 0), id="tumbling-pt"
        ),
        pytest.param(tm.EventTimeSessionWindows.with_gap(5), {EVENT}, None, id="session"),
        pytest.param(tm.GlobalWindows.create(), set(), None, id="global-never-cleaned"),
    ],
)
def test_assigners_declare_their_cleanup_domain_and_layout(
    assigner: Any, domains: set[TimeDomain], layout: tuple[int, int, int] | None
) -> None:
    assert assigner.timer_domains() == domains
    expected = None if layout is None else AlignedLayout(*layout)
    assert assigner.aligned_layout() == expected


def window_op(assigner: Any, trigger: Any = None) -> WindowOp:
    spec = OperatorSpec(assigner, window_logic(lambda a, b: a), trigger=trigger)
    return WindowOp(upstream=None, key=None, spec=spec, output_schema=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("op", "mode"),
    [
        pytest.param(window_op(tm.TumblingEventTimeWindows.of(5)), "EventTime", id="event-time"),
        pytest.param(
            window_op(tm.TumblingEventTimeWindows.of(5), tm.ContinuousProcessingTimeTrigger.of(2)),
            "EventTimeAndProcessingTime",
            id="event-time-windows-processing-trigger",
        ),
        pytest.param(
            window_op(tm.TumblingProcessingTimeWindows.of(5), tm.EventTimeTrigger.create()),
            "EventTimeAndProcessingTime",
            id="processing-windows-event-trigger",
        ),
        pytest.param(
            window_op(tm.TumblingEventTimeWindows.of(5), tm.CountTrigger.of(2)),
            "EventTime",
            id="event-time-windows-count-trigger",
        ),
        pytest.param(
            window_op(tm.TumblingEventTimeWindows.of(5), Undeclared()),
            "EventTime",
            id="custom-undeclared-on-event-time-uses-the-windows-clock",
        ),
        pytest.param(
            window_op(tm.TumblingEventTimeWindows.of(5), tm.PurgingTrigger.of(Undeclared())),
            "EventTime",
            id="purging-delegates-the-declaration",
        ),
        pytest.param(
            window_op(tm.TumblingProcessingTimeWindows.of(5)), "ProcessingTime", id="processing"
        ),
        pytest.param(window_op(tm.GlobalWindows.create()), "None", id="global-never"),
        pytest.param(
            window_op(tm.GlobalWindows.create_with_end_of_stream_trigger()),
            "EventTime",
            id="global-end-of-stream",
        ),
        pytest.param(
            window_op(tm.GlobalWindows.create(), tm.PurgingTrigger.of(tm.CountTrigger.of(3))),
            "None",
            id="count-window",
        ),
        pytest.param(
            window_op(tm.GlobalWindows.create(), tm.ContinuousEventTimeTrigger.of(3)),
            "EventTime",
            id="global-continuous-event",
        ),
        pytest.param(
            window_op(tm.GlobalWindows.create(), ProcessingOnly()),
            "ProcessingTime",
            id="custom-declared-processing",
        ),
        pytest.param(
            window_op(tm.GlobalWindows.create(), SilentTrigger()),
            "None",
            id="custom-no-timers",
        ),
    ],
)
def test_the_streaming_time_mode_asks_the_declarations(op: WindowOp, mode: str) -> None:
    assert time_mode_of(op) == mode


@pytest.mark.parametrize(
    ("op", "timestamp", "mode"),
    [
        pytest.param(
            window_op(tm.TumblingProcessingTimeWindows.of(5), Undeclared()),
            None,
            "ProcessingTime",
            id="undeclared-without-event-time-uses-processing-time",
        ),
        pytest.param(
            window_op(tm.TumblingProcessingTimeWindows.of(5), Undeclared()),
            "ts",
            "ProcessingTime",
            id="undeclared-with-event-time-uses-the-windows-clock",
        ),
        pytest.param(
            window_op(tm.TumblingProcessingTimeWindows.of(5), tm.EventTimeTrigger.create()),
            None,
            "EventTimeAndProcessingTime",
            id="certain-event-time-stays-to-be-refused",
        ),
        pytest.param(
            window_op(tm.TumblingEventTimeWindows.of(5), tm.ContinuousProcessingTimeTrigger.of(2)),
            None,
            "EventTimeAndProcessingTime",
            id="event-time-windows-stay-to-be-refused",
        ),
        pytest.param(
            window_op(tm.GlobalWindows.create(), tm.CountTrigger.of(2)),
            "ts",
            "EventTime",
            id="count-windows-see-the-watermark",
        ),
    ],
)
def test_the_stream_serves_what_it_can(op: WindowOp, timestamp: str | None, mode: str) -> None:
    """Without an event-time column, a trigger that may use either clock (declares both)
    on processing-time windows runs on processing time; certain event time stays, for
    ``window_stream`` to refuse for want of a watermark."""
    assert _served_time_mode(op, timestamp, 0) == mode


def test_a_custom_trigger_that_does_not_declare_is_served_both_domains() -> None:
    assert time_mode_of(window_op(tm.GlobalWindows.create(), Undeclared())) == (
        "EventTimeAndProcessingTime"
    )


class FakeConf:
    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, name: str, default: str) -> str:
        return self.values.get(name, default)


class FakeSpark:
    def __init__(self, **values: str):
        self.conf = FakeConf({k.replace("_", "."): v for k, v in values.items()})


def test_the_fast_paths_switch_reaches_the_engine_operator() -> None:
    assert fast_paths_enabled(FakeSpark())
    assert not fast_paths_enabled(FakeSpark(spark_tidemark_fastPaths="false"))
    assert FAST_PATHS_CONF == "spark.tidemark.fastPaths"
    parts = (tm.TumblingEventTimeWindows.of(5), window_logic(lambda a, b: a))
    assert isinstance(create_window_operator(OperatorSpec(*parts)), AlignedWindowOperator)
    general = create_window_operator(OperatorSpec(*parts, fast_paths=False))
    assert not isinstance(general, AlignedWindowOperator)


@pytest.mark.spark
def test_spark_fast_paths_off_turns_off_the_sql_fast_path_with_the_same_results(spark) -> None:
    rows = [("k", 10, 1), ("k", 12, 2), ("j", 55, 3), ("k", 61, 4)]
    df = spark.createDataFrame(rows, "key string, ts long, n long")
    windowed = (
        tm.from_dataframe(df, timestamp="ts")
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(50))
    )
    summed = windowed.sum("n")
    op = summed._plan
    frame = element_frame(op.upstream, spark)
    assert sql_plan.applies(op, frame, spark)
    fast = sorted(map(tuple, summed.to_dataframe().collect()))
    spark.conf.set(FAST_PATHS_CONF, "false")
    try:
        assert not sql_plan.applies(op, frame, spark)
        assert not op.run_spec().fast_paths
        general = sorted(map(tuple, windowed.sum("n").to_dataframe().collect()))
    finally:
        spark.conf.unset(FAST_PATHS_CONF)
    assert general == fast == [("j", 55, 3), ("k", 10, 3), ("k", 61, 4)]


def test_a_user_trigger_type_checks_strictly_without_ignores(tmp_path: Path) -> None:
    example = Path(__file__).parents[1] / "data" / "user_trigger.py"
    assert "type: ignore" not in example.read_text()
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), str(example)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
