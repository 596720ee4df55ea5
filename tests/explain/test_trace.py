"""Tests for the engine's run tracer (`tidemark._engine.trace`) and `replay_trace`.

Engine only: no Spark. The seed case is the article's user-behaviour example; its trace
must equal the hand-checked ``tests/data/seed_trace.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tidemark as tm
from tidemark._engine.create import window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.status import (
    ADDED,
    ADDED_LATE,
    DROPPED,
    SIDE_OUTPUT,
    SKIPPED,
)
from tidemark._engine.trace import TRACE_STATUS, Tracer
from tidemark.testing import replay_trace
from tidemark.timeline import load_trace, save_trace, timeline, validate_trace

SEED = Path(__file__).parents[1] / "data" / "seed_trace.json"
T0 = 1590292800000  # 2020-05-24 12:00:00 +08:00
END = 2**63 - 1

# (action, id, seconds after 12:00:00), in the article's arrival order.
EVENTS = [
    ("pv", "event1", 0),
    ("cart", "event2", 1),
    ("pv", "event4", 4),
    ("pv", "event5", 5),
    ("buy", "event7", 7),
    ("buy", "event3", 3),
    ("cart", "event6", 6),
    ("buy", "event8", 8),
    ("pv", "event9", 9),
]


class Count(tm.ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield sum(1 for _ in elements)


def seed_trace(**options: Any) -> dict[str, Any]:
    elements = [((action, ident), T0 + s * 1000, ident) for action, ident, s in EVENTS]
    return replay_trace(
        tm.TumblingEventTimeWindows.of(5000),
        Count(),
        elements,
        key_selector=lambda v: v[0],
        time_zone="Asia/Shanghai",
        title="user behaviour, 5 s tumbling windows keyed by action",
        **options,
    )


def status_of(trace: dict[str, Any], label: str) -> str:
    return next(e["status"] for e in trace["elements"] if e["label"] == label)


def test_seed_trace_matches_the_hand_checked_one() -> None:
    trace = seed_trace()
    validate_trace(trace)
    expected = load_trace(SEED)
    for part in ("title", "time_zone", "elements", "watermarks", "windows"):
        assert trace[part] == expected[part], part
    # Firings within one watermark step may come in any order.
    assert sorted(map(json.dumps, trace["firings"])) == sorted(map(json.dumps, expected["firings"]))


def test_seed_trace_round_trips_and_draws(tmp_path: Path) -> None:
    trace = seed_trace()
    assert load_trace(save_trace(trace, tmp_path / "run.json")) == trace
    page = tm.timeline(trace, tmp_path / "run.html").read_text(encoding="utf-8")
    assert "event3" in page and "[12:00:00, 12:00:05)" in page


@pytest.mark.parametrize(
    ("lateness_ms", "status", "late_firings"),
    [
        # event3 (12:00:03) arrives at watermark 12:00:06.999; [12:00:00, 12:00:05) is cleaned
        # at max_timestamp + allowed_lateness = 12:00:04.999 + lateness.
        pytest.param(0, "dropped", [], id="no-lateness"),
        pytest.param(2000, "dropped", [], id="cleaned-exactly-at-the-watermark"),
        pytest.param(2001, "late_firing", [("buy", T0, 5, T0 + 6999, "1")], id="one-ms-more"),
        pytest.param(3000, "late_firing", [("buy", T0, 5, T0 + 6999, "1")], id="three-seconds"),
    ],
)
def test_allowed_lateness_boundary(
    lateness_ms: int, status: str, late_firings: list[tuple[Any, ...]]
) -> None:
    trace = seed_trace(allowed_lateness=lateness_ms)
    validate_trace(trace)
    assert status_of(trace, "event3") == status
    late = [
        (f["key"], f["start"], f["arrival"], f["watermark"], f["result"])
        for f in trace["firings"]
        if f["kind"] == "late"
    ]
    assert late == late_firings
    assert {f["kind"] for f in trace["firings"]} <= {"on_time", "late"}


def test_side_output_status() -> None:
    trace = seed_trace(late_data_tag=tm.OutputTag("late"))
    assert [e["label"] for e in trace["elements"] if e["status"] != "on_time"] == ["event3"]
    assert status_of(trace, "event3") == "side_output"


def test_firing_kinds_with_continuous_trigger_and_lateness() -> None:
    elements = [
        (1, 1, "a"),
        (1, 5, "b"),
        (1, 9, "c"),
        (1, 10, "d"),
        (1, 3, "e"),
        (1, 15, "f"),
        (1, 2, "g"),
    ]
    trace = replay_trace(
        tm.TumblingEventTimeWindows.of(10),
        lambda x, y: x + y,
        elements,
        trigger=tm.ContinuousEventTimeTrigger.of(4),
        allowed_lateness=5,
    )
    validate_trace(trace)
    first = [
        (f["arrival"], f["watermark"], f["kind"], f["result"])
        for f in trace["firings"]
        if f["start"] == 0
    ]
    assert first == [
        (1, 4, "early", "2"),  # continuous timer at 4, before the end (max_ts 9)
        (2, 8, "early", "3"),
        (3, 9, "on_time", "3"),  # the watermark reaches max_ts
        (4, 9, "late", "4"),  # e (ts 3) admitted within the lateness fires again
    ]
    assert [(e["label"], e["status"]) for e in trace["elements"]][4:] == [
        ("e", "late_firing"),
        ("f", "on_time"),
        ("g", "dropped"),
    ]
    assert trace["watermarks"][-1] == {"arrival": 7, "ts": END}


def test_session_windows_list_only_the_merged_result() -> None:
    elements = [(1, 1, "a"), (1, 2, "b"), (1, 3, "c"), (1, 10, "d")]
    trace = replay_trace(
        tm.EventTimeSessionWindows.with_gap(3), lambda x, y: x + y, elements, out_of_orderness=5
    )
    validate_trace(trace)
    assert trace["windows"] == [
        {"key": None, "start": 1, "end": 6},
        {"key": None, "start": 10, "end": 13},
    ]
    assert [(f["start"], f["end"], f["result"]) for f in trace["firings"]] == [
        (1, 6, "3"),
        (10, 13, "1"),
    ]


def test_tuple_keys_become_lists_and_validate(tmp_path: Path) -> None:
    elements = [(("a", 1), 1, "x"), (("a", 1), 7, "y"), (("b", 2), 8, "z")]
    trace = replay_trace(
        tm.TumblingEventTimeWindows.of(5), lambda x, y: x, elements, key_selector=lambda v: v
    )
    validate_trace(trace)
    assert trace["elements"][0]["key"] == ["a", 1]
    assert {tuple(w["key"]) for w in trace["windows"]} == {("a", 1), ("b", 2)}
    assert load_trace(save_trace(trace, tmp_path / "t.json")) == trace


def test_status_codes_map_to_trace_statuses() -> None:
    assert TRACE_STATUS == {
        ADDED: "on_time",
        ADDED_LATE: "late_firing",
        SIDE_OUTPUT: "side_output",
        DROPPED: "dropped",
        SKIPPED: "dropped",
    }


def test_driving_by_hand_with_begin_and_status() -> None:
    tracer = Tracer(title="by hand", describe=lambda r: f"sum={r}")
    op = window_operator(
        tm.TumblingEventTimeWindows.of(5), window_logic(lambda x, y: x + y), tracer=tracer
    )
    tracer.watermark(-1)  # a watermark before any element
    arrival = tracer.begin_element("k", 2, "first")
    tracer.element_status(arrival, op.process_element("k", 10, 2))
    tracer.held_state("k", list(op.keys["k"].contents))
    tracer.end_of_input()
    tracer.watermark(END)
    op.process_watermark(END)
    trace = tracer.trace()
    validate_trace(trace)
    assert trace["watermarks"] == [{"arrival": -1, "ts": -1}, {"arrival": 1, "ts": END}]
    assert trace["firings"][0]["result"] == "sum=10"
    assert trace["firings"][0]["arrival"] == 1


def test_long_results_are_shortened() -> None:
    trace = replay_trace(
        tm.TumblingEventTimeWindows.of(5), lambda x, y: x + y, [("x" * 100, 1, "long")]
    )
    assert len(trace["firings"][0]["result"]) == 40
    assert trace["firings"][0]["result"].endswith("…")


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        pytest.param(
            lambda t: t.begin_element("k", None, "x"),
            TypeError,
            "`timestamp` must be int ms (event time); got None",
            id="no-timestamp",
        ),
        pytest.param(
            lambda t: t.element_status(t.begin_element("k", 1, "x"), 9),
            ValueError,
            "`code` must be a process_element status (0-4); got 9",
            id="bad-code",
        ),
        pytest.param(
            lambda t: (t.end_of_input(), t.begin_element("k", 1, "x")),
            RuntimeError,
            "begin_element() after end_of_input()",
            id="after-end",
        ),
        pytest.param(
            lambda t: (t.begin_element("k", 1, "x"), t.trace()),
            RuntimeError,
            "element(s) at arrival [0] have no status",
            id="pending-status",
        ),
    ],
)
def test_tracer_errors_name_the_problem(call: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        call(Tracer())
    assert message in str(info.value)


def test_top_level_timeline_is_callable_after_importing_the_module(tmp_path: Path) -> None:
    import importlib

    module = importlib.import_module("tidemark.timeline")  # rebinds tidemark.timeline
    out = tm.timeline(seed_trace(), tmp_path / "t.html")
    assert out.exists() and module.timeline is timeline
    assert tm.timeline(seed_trace(), tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
