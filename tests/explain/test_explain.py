"""Explanations on the engine, one cause per case: the facts, then the words.

Each case feeds the harness (``explain=True``) and checks what the explanation says
against what the harness emitted: the causes of issue 50 one by one (late beyond the
allowed lateness, a count trigger short of its count, GlobalWindows without a trigger,
sessions that merge, evictors before and after, the last windows of an input that has
not ended, a partition holding the watermark, idleness, sliding-window gaps, a
processing-time timer, Dataflow panes) and the errors of bad questions.
"""

from __future__ import annotations

import json

import pytest

import tidemark as tm
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import ExplainError, InputDataError
from tidemark.explain import (
    Element,
    EndOfInput,
    MicroBatch,
    PartitionState,
    Watermark,
    explain_events,
)
from tidemark.testing import WindowOperatorHarness
from tidemark.time import LONG_MAX

LATE = tm.OutputTag("late")


def add(a: int, b: int) -> int:
    return a + b


def harness(assigner, **options) -> WindowOperatorHarness:  # type: ignore[no-untyped-def]
    return WindowOperatorHarness(assigner, add, explain=True, **options)


def feed(h: WindowOperatorHarness, *steps) -> None:  # type: ignore[no-untyped-def]
    """``(value, ts)`` elements, ``int`` watermarks, ``("pt", t)`` processing time."""
    for step in steps:
        if isinstance(step, int):
            h.process_watermark(step)
        elif step[0] == "pt":
            h.set_processing_time(step[1])
        else:
            h.process_element(*step)


def fates(x) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.fate for e in x.elements]


# ---------------------------------------------------------------------------- lateness


@pytest.mark.parametrize(
    ("tag", "fate"),
    [
        pytest.param(LATE, "late_side_output", id="beyond-lateness-to-side-output"),
        pytest.param(None, "late_dropped", id="beyond-lateness-dropped"),
    ],
)
def test_late_beyond_the_allowed_lateness(tag, fate) -> None:  # type: ignore[no-untyped-def]
    h = harness(tm.TumblingEventTimeWindows.of(10), allowed_lateness=3, late_data_tag=tag)
    feed(h, (1, 1), 10, (2, 4), 12, (3, 2))  # 10 < 9 + 3: admitted late; 12 is not
    x = h.explain()
    assert fates(x) == ["in_result", "in_result", fate]
    late = x.elements[2]
    assert late.late_windows == ((0, 10),) and late.watermark == 12
    assert "cleanup at 12" in late.detail
    causes = [(f.cause, f.timing) for f in x.firings]
    assert causes == [("event_time_timer", "on_time"), ("late_element", "late")]
    assert len(h.side_output(LATE)) == (tag is not None)
    assert h.num_late_records_dropped == (tag is None)
    assert fate.upper() in x.text()


# ---------------------------------------------------------------------------- triggers


def test_count_trigger_k_of_n() -> None:
    h = harness(tm.TumblingEventTimeWindows.of(10), trigger=tm.CountTrigger.of(3))
    feed(h, (1, 1), (2, 2), (3, 3), (4, 4), (5, 5))
    x = h.explain()
    window = x.window(0, 10)
    assert window.status == "open" and window.waiting is not None
    assert (window.waiting.kind, window.waiting.count, window.waiting.count_of) == ("count", 2, 3)
    assert [f.cause for f in x.firings] == ["element"] and x.firings[0].arrival == 2
    assert fates(x) == ["in_result"] * 3 + ["open"] * 2
    assert "count is 2 of 3" in x.text()


def test_count_window_cleared_before_the_count() -> None:
    h = harness(tm.TumblingEventTimeWindows.of(10), trigger=tm.CountTrigger.of(3))
    feed(h, (1, 1), (2, 2), 20)
    x = h.explain()
    assert x.window(0, 10).status == "purged" and fates(x) == ["purged", "purged"]
    assert "cleared" in x.window(0, 10).detail and h.output() == []


@pytest.mark.parametrize("trigger", [None, tm.NeverTrigger()], ids=["default", "never"])
def test_global_windows_without_a_firing_trigger(trigger) -> None:  # type: ignore[no-untyped-def]
    h = harness(tm.GlobalWindows.create(), trigger=trigger)
    feed(h, (1, 1), (2, 5), LONG_MAX)
    x = h.explain()
    window = x.window(None, None)
    assert window.status == "open" and window.waiting is not None
    assert window.waiting.kind == "no_trigger" and x.ended and h.output() == []
    assert "never fires" in x.text()


def test_processing_time_timer_pending() -> None:
    h = harness(tm.TumblingProcessingTimeWindows.of(10))
    feed(h, ("pt", 3), (1, None), ("pt", 5), (2, None))
    x = h.explain()
    wait = x.window(0, 10).waiting
    assert wait is not None and (wait.kind, wait.timer) == ("processing_time_timer", 9)
    feed(h, ("pt", 12))
    x = h.explain()
    assert [(f.cause, f.processing_time) for f in x.firings] == [("processing_time_timer", 12)]
    assert fates(x) == ["in_result", "in_result"] and h.output() == [(3, 9)]


def test_dataflow_early_on_time_and_late_panes() -> None:
    trigger = tm.AfterWatermark(early=tm.AfterCount(2), late=tm.AfterCount(1))
    h = harness(
        tm.TumblingEventTimeWindows.of(10),
        trigger=trigger,
        allowed_lateness=10,
        accumulation_mode=tm.AccumulationMode.ACCUMULATING,
    )
    feed(h, (1, 1), (2, 2), (3, 3), 9, (4, 4))
    x = h.explain()
    timings = [(f.timing, f.pane, f.cause) for f in x.firings]
    assert timings == [
        ("early", 0, "element"),
        ("on_time", 1, "event_time_timer"),
        ("late", 2, "late_element"),
    ]
    assert [p.timing.value.lower() for _, _, p, _ in h.pane_output()] == [
        "early",
        "on_time",
        "late",
    ]
    assert x.firings[2].elements == (0, 1, 2, 3)  # accumulating: every element again


# ---------------------------------------------------------------------------- sessions, evictors


def test_session_merged_into_a_bigger_one() -> None:
    h = harness(tm.EventTimeSessionWindows.with_gap(3))
    feed(h, (1, 1), (2, 8), (3, 5), 20)
    x = h.explain()
    assert x.window(8, 11).status == "merged" and x.window(8, 11).merged_into == (5, 11)
    assert x.window(5, 11).merged_from == ((8, 11),)
    assert x.elements[1].merged_into == (5, 11) and x.elements[1].windows == ((5, 11),)
    assert [(f.window, f.results) for f in x.firings] == [((1, 4), ("1",)), ((5, 11), ("5",))]


@pytest.mark.parametrize(
    ("after", "fates_", "results"),
    [
        pytest.param(False, ["evicted", "in_result", "in_result"], [(5, 9)], id="before"),
        pytest.param(True, ["in_result"] * 3, [(6, 9)], id="after"),
    ],
)
def test_evicted_before_or_after(after, fates_, results) -> None:  # type: ignore[no-untyped-def]
    h = harness(tm.TumblingEventTimeWindows.of(10), evictor=tm.CountEvictor.of(2, after))
    feed(h, (1, 1), (2, 2), (3, 3), 9)
    x = h.explain()
    assert fates(x) == fates_ and h.output() == results
    evicted = x.elements[0]
    assert evicted.evicted_by == repr(tm.CountEvictor.of(2, after))
    assert evicted.evicted_when == ("after" if after else "before")


# ---------------------------------------------------------------------------- the watermark


def test_last_windows_wait_for_a_watermark_that_never_comes() -> None:
    h = harness(tm.TumblingEventTimeWindows.of(10))
    feed(h, (1, 3), (2, 14), 13)  # the watermark follows the data: 14 - 0 - 1
    x = h.explain()
    wait = x.window(10, 20).waiting
    assert wait is not None and (wait.kind, wait.timer, wait.gap) == ("input_not_ended", 19, 6)
    assert fates(x) == ["in_result", "open"]
    h.process_watermark(LONG_MAX)
    x = h.explain()
    assert x.window(10, 20).status == "fired" and x.firings[-1].cause == "end_of_input"


def _held_events() -> list:  # type: ignore[type-arg]
    return [Element(1, 1_000), Element(2, 7_000), Watermark(2_999)]


def test_a_partition_holding_the_watermark() -> None:
    spec = OperatorSpec(tm.TumblingEventTimeWindows.of(5_000), window_logic(add))
    partitions = [
        PartitionState(0, max_event_time=9_000, watermark=8_999),
        PartitionState(1, max_event_time=3_000, watermark=2_999, last_batch=4),
    ]
    x = explain_events(
        spec, "k", _held_events(), mode="streaming", partitions=partitions, idleness=False
    )
    assert x.holder == partitions[1]
    wait = x.window(0, 5_000).waiting
    assert wait is not None and wait.kind == "event_time_timer" and wait.holder == partitions[1]
    assert (
        "Partition 1 sets the watermark at 2999, the lowest of the partitions not idle: it last saw event time 3000"
        in x.text()
    )
    assert "idleness is off" in x.text()


def test_an_idle_partition_leaves_the_minimum() -> None:
    spec = OperatorSpec(tm.TumblingEventTimeWindows.of(5_000), window_logic(add))
    partitions = [
        PartitionState(0, max_event_time=9_000, watermark=8_999),
        PartitionState(1, max_event_time=3_000, watermark=2_999, idle=True),
        PartitionState(2, max_event_time=4_000, watermark=3_999),
    ]
    x = explain_events(
        spec, "k", _held_events(), mode="streaming", partitions=partitions, idleness=True
    )
    assert x.holder == partitions[2]
    assert "idleness is on, yet it is not idle" in x.text()


def test_sliding_gap_skip() -> None:
    h = harness(tm.SlidingEventTimeWindows.of(2, 5))  # windows [0, 2), [5, 7), ...
    feed(h, (1, 1), (2, 3), 10)
    x = h.explain()
    assert fates(x) == ["in_result", "skipped"]
    assert x.elements[1].windows == () and h.num_late_records_dropped == 1


# ---------------------------------------------------------------------------- forms


def test_micro_batches_are_named() -> None:
    spec = OperatorSpec(tm.TumblingEventTimeWindows.of(10), window_logic(add))
    events = [MicroBatch(0), Element(1, 1), Watermark(0), MicroBatch(1), Element(2, 12)]
    events += [Watermark(11), MicroBatch(2), EndOfInput()]
    x = explain_events(spec, "k", events, mode="streaming")
    assert [(f.window, f.batch) for f in x.firings] == [((0, 10), 1), ((10, 20), 2)]
    assert [e.batch for e in x.elements] == [0, 1]
    assert "micro-batch 1" in x.text()


def test_to_dict_is_json_and_focus() -> None:
    h = harness(tm.TumblingEventTimeWindows.of(10))
    feed(h, (1, 1), (2, 12), 10)
    x = h.explain(window=(10, 20))
    json.dumps(x.to_dict())
    assert x.focus_window == (10, 20)
    assert x.text().splitlines()[2] == "[10, 20): NOT FIRED YET"
    by_ts = h.explain(timestamp=1)
    assert "#0 1@1: IN_RESULT" in by_ts.text()
    ranged = h.explain(time_range=(10, 20))
    assert [w.window for w in ranged.windows] == [(10, 20)]


def test_epoch_times_in_the_time_zone() -> None:
    h = harness(tm.TumblingEventTimeWindows.of(5_000))
    feed(h, (1, 1_590_292_801_000), 1_590_292_805_999)
    text = h.explain(time_zone="Asia/Shanghai").text()
    assert "[2020-05-24T12:00:00+08:00, 2020-05-24T12:00:05+08:00)" in text


# ---------------------------------------------------------------------------- bad questions


def test_errors_name_the_parameter() -> None:
    spec = OperatorSpec(tm.TumblingEventTimeWindows.of(10), window_logic(add))
    events = [Element(1, 1)]
    with pytest.raises(ExplainError, match=r"`mode` must be one of .*; got 'live'"):
        explain_events(spec, "k", events, mode="live")
    with pytest.raises(ExplainError, match=r"`events` must hold at least one Element"):
        explain_events(spec, "k", [Watermark(3)], mode="engine")
    with pytest.raises(
        ExplainError, match=r"`window` must be one of key 'k'.*\[0, 10\).*\[10, 20\)"
    ):
        explain_events(spec, "k", events, mode="engine", window=(10, 20))
    with pytest.raises(ExplainError, match=r"`timestamp` must be one of .*\(1\); got 5"):
        explain_events(spec, "k", events, mode="engine", timestamp=5)
    with pytest.raises(InputDataError, match=r"Element at position 0 must have an int ms"):
        explain_events(spec, "k", [Element(1, None)], mode="engine")
    with pytest.raises(InputDataError, match=r"an Element after EndOfInput \(position 1"):
        explain_events(spec, "k", [EndOfInput(), Element(1, 1)], mode="engine")
    with pytest.raises(
        InputDataError, match=r"`events` must hold Element, .*; got 3 at position 1"
    ):
        explain_events(spec, "k", [Element(1, 1), 3], mode="engine")  # type: ignore[list-item]
    with pytest.raises(ExplainError, match=r"`time_zone` must be an IANA zone"):
        explain_events(spec, "k", events, mode="engine", time_zone="Mars/Olympus")
    with pytest.raises(InputDataError, match=r"timestamp"):
        explain_events(spec, "k", [Element(1, tm.LONG_MAX)], mode="engine")
    with pytest.raises(ExplainError, match=r"`time_range` must be \[start, end\)"):
        explain_events(spec, "k", events, mode="engine", time_range=(5, 5))
    h = WindowOperatorHarness(tm.TumblingEventTimeWindows.of(10), add)
    with pytest.raises(ExplainError, match=r"make the harness with explain=True"):
        h.explain()


# ---------------------------------------------------------------------------- pictures


def test_picture_marks_the_window_and_the_holder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tidemark.explain.picture import explanation_trace
    from tidemark.timeline import validate_trace

    spec = OperatorSpec(tm.TumblingEventTimeWindows.of(5_000), window_logic(add))
    partitions = [
        PartitionState(0, max_event_time=9_000, watermark=8_999),
        PartitionState(1, max_event_time=3_000, watermark=2_999),
    ]
    x = explain_events(spec, "k", _held_events(), mode="streaming", partitions=partitions)
    trace = explanation_trace(x)
    validate_trace(trace)
    assert trace["focus"]["start"] == 0 and "NOT FIRED YET" in trace["focus"]["note"]
    assert trace["watermark_note"] == "watermark 2999, held by partition 1"
    assert [p["ts"] for p in trace["partition_watermarks"]] == [8_999, 2_999]
    for suffix in ("png", "html"):
        path = x.picture(tmp_path / f"why.{suffix}")
        assert path.stat().st_size > 1000
    html = (tmp_path / "why.html").read_text()
    assert "held by partition 1" in html and "NOT FIRED YET" in html


def test_picture_needs_event_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = harness(tm.TumblingProcessingTimeWindows.of(10))
    feed(h, ("pt", 3), (1, None))
    with pytest.raises(ExplainError, match=r"`picture` draws event time"):
        h.explain().picture(tmp_path / "x.png")


def test_a_focus_must_be_a_listed_window() -> None:
    from tidemark.timeline import TraceError, validate_trace

    trace = {"elements": [], "watermarks": [], "windows": [], "firings": []}
    trace["focus"] = {"key": "k", "start": 0, "end": 10, "note": "why"}
    with pytest.raises(TraceError, match=r"trace\['focus'\] must be one of trace\['windows'\]"):
        validate_trace(trace)


def test_tidemark_explain_is_loaded_when_asked() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tidemark; assert 'tidemark.explain' not in sys.modules; "
        "assert tidemark.explain.explain_events.__name__ == 'explain_events'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_docs_pictures_draw(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "docs" / "examples"))
    import why_no_result

    paths = why_no_result.draw(tmp_path)
    assert [p.name for p in paths] == ["why-held.png", "why-late.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)


# ---------------------------------------------------------------------------- a restored state


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="tumbling"),
        pytest.param({"allowed_lateness": 5}, id="lateness"),
        pytest.param({"trigger": tm.CountTrigger.of(2)}, id="count"),
        pytest.param({"evictor": tm.CountEvictor.of(2)}, id="evictor"),
        pytest.param({"assigner": tm.EventTimeSessionWindows.with_gap(3)}, id="sessions"),
        pytest.param({"assigner": tm.SlidingEventTimeWindows.of(10, 5)}, id="sliding"),
    ],
)
def test_from_an_initial_state_the_later_firings_are_the_same(options) -> None:  # type: ignore[no-untyped-def]
    """A checkpoint's state and the events after it give the firings the whole run
    gives after it (what a streaming query's retained batches are explained from)."""
    from tidemark.explain import InitialState

    assigner = options.pop("assigner", tm.TumblingEventTimeWindows.of(10))
    spec = OperatorSpec(assigner, window_logic(add), **_spec_options(options))
    before = [Element(1, 1), Element(2, 3), Watermark(9), Element(3, 4), Element(4, 12)]
    after = [Element(5, 13), Watermark(14), Element(6, 6), Element(7, 15), Watermark(30)]
    h = WindowOperatorHarness(assigner, add, **options)  # the checkpoint: after `before`
    feed(h, *[(e.value, e.timestamp) if isinstance(e, Element) else e.timestamp for e in before])
    state = InitialState(h.operator.keys[None], h.current_watermark)
    whole = explain_events(spec, None, before + after, mode="replay")
    part = explain_events(spec, None, after, mode="streaming", initial_state=state)

    def firing(f):  # type: ignore[no-untyped-def]
        return (f.window, f.watermark, f.timing, f.values)

    assert [firing(f) for f in part.firings] == [
        firing(f) for f in whole.firings if f.elements_seen > 4
    ]
    assert [e.timestamp for e in part.elements] == [13, 6, 15]


def _spec_options(options: dict) -> dict:  # type: ignore[type-arg]
    renamed = {"allowed_lateness": "allowed_lateness_ms"}
    return {renamed.get(k, k): v for k, v in options.items()}


def test_a_restored_harness_explains_from_its_snapshot() -> None:
    h = harness(tm.TumblingEventTimeWindows.of(10), allowed_lateness=5)
    feed(h, (1, 1), (2, 3), 9)
    snapshot = h.snapshot()
    h.restore(snapshot)
    feed(h, (3, 4), (4, 12), 20)
    x = h.explain()
    assert [(f.window, f.timing, f.values) for f in x.firings] == [
        ((0, 10), "late", (6,)),
        ((10, 20), "on_time", (4,)),
    ]
    assert [e.timestamp for e in x.elements] == [4, 12]
