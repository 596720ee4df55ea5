"""The session operator (event-time sessions, per element, outside BATCH) is the general
operator, only faster: random streams run both ways (``fast_paths`` on and off) must give
the same output with the watermarks between, side outputs, dropped count, user-function
calls in the same order, and the same key states, dict order and timer sequence numbers
included, at every snapshot (a restart may resume with the other operator).

Also pinned: which pipelines get it, that its common steps (an element inside the key's
one open session, or extending it) call nothing but the user's function, and named
cases (an element bridging two sessions, a late one, one into a session the watermark
passed within the allowed lateness).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fast_paths import IdList, WatermarkSeen, concat_ids
from test_properties import CountAndSum, examples, sum_reduce
from test_sorted_sessions import FiringsAndClears

from tidemark import (
    LONG_MAX,
    AggregateFunction,
    CountEvictor,
    CountTrigger,
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    OutputTag,
    TumblingEventTimeWindows,
    UserFunctionError,
)
from tidemark._engine.create import SessionWindowOperator, SortedSessionOperator
from tidemark._engine.operator import WindowOperator
from tidemark._engine.status import ADDED
from tidemark.testing import WindowOperatorHarness

LATE = OutputTag("late")


class LoggedAggregate(AggregateFunction):
    """Counts, and logs every call it gets (so the order of add and merge shows)."""

    def __init__(self) -> None:
        self.log: list[Any] = []

    def create_accumulator(self):  # type: ignore[no-untyped-def]
        self.log.append("create")
        return [0, ()]

    def add(self, value, accumulator):  # type: ignore[no-untyped-def]
        self.log.append(("add", value[1]))
        return [accumulator[0] + 1, (*accumulator[1], value[1])]

    def get_result(self, accumulator):  # type: ignore[no-untyped-def]
        self.log.append("get_result")
        return tuple(accumulator)

    def merge(self, acc_a, acc_b):  # type: ignore[no-untyped-def]
        self.log.append(("merge", acc_a[1], acc_b[1]))
        return [acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]]


class LoggedGap:
    """A dynamic gap, the element's own, logging each call."""

    def __init__(self) -> None:
        self.log: list[int] = []

    def extract(self, value: tuple[str, int, int]) -> int:
        self.log.append(value[1])
        return value[2]


def _function(kind: str) -> Any:
    return {
        "reduce": lambda: sum_reduce,
        "concat_reduce": lambda: concat_ids,
        "aggregate": CountAndSum,
        "concat_aggregate": IdList,
        "logged_aggregate": LoggedAggregate,
        "reduce_seen": lambda: (sum_reduce, WatermarkSeen()),
        "aggregate_seen": lambda: (LoggedAggregate(), FiringsAndClears()),
        "elements_seen": WatermarkSeen,
        "elements_cleared": FiringsAndClears,
    }[kind]()


FUNCTIONS = (
    "reduce",
    "concat_reduce",
    "aggregate",
    "concat_aggregate",
    "logged_aggregate",
    "reduce_seen",
    "aggregate_seen",
    "elements_seen",
    "elements_cleared",
)


@dataclass(frozen=True)
class Case:
    """A session pipeline: a static ``gap`` (None: each element's own) and a function."""

    gap: int | None
    function: str
    allowed_lateness: int
    late_tag: bool
    keep_all_elements: bool | None = None  # a dynamic gap's, see test_dynamic_gap_elements

    def harness(self, fast_paths: bool) -> WindowOperatorHarness:
        assigner: Any
        if self.gap is None:
            assigner = DynamicEventTimeSessionWindows.with_dynamic_gap(
                LoggedGap(), keep_all_elements=self.keep_all_elements
            )
        else:
            assigner = EventTimeSessionWindows.with_gap(self.gap)
        return WindowOperatorHarness(
            assigner,
            _function(self.function),
            key_selector=lambda value: value[0],
            allowed_lateness=self.allowed_lateness,
            late_data_tag=LATE if self.late_tag else None,
            fast_paths=fast_paths,
        )


cases = st.builds(
    Case,
    gap=st.one_of(st.none(), st.integers(1, 30)),
    keep_all_elements=st.sampled_from((None, True)),
    function=st.sampled_from(FUNCTIONS),
    allowed_lateness=st.sampled_from((0, 0, 1, 7, 25)),
    late_tag=st.booleans(),
)


@st.composite
def session_streams(draw: Any) -> list[tuple[Any, ...]]:
    """Elements of a few keys around the watermark (bounded disorder: some behind it,
    late or within the lateness, most ahead), each with its own gap; watermarks advance
    between them."""
    watermark = draw(st.integers(-60, 0))
    events: list[tuple[Any, ...]] = []
    for next_id in range(draw(st.integers(1, 60))):
        if draw(st.integers(0, 4)) == 0:
            watermark += draw(st.sampled_from((0, 1, 3, 8, 20)))
            events.append(("watermark", watermark))
            continue
        key = draw(st.sampled_from("abc"))
        ts = watermark + draw(st.integers(-12, 35))
        events.append(("element", (key, next_id, draw(st.integers(1, 30))), ts))
    return events


def ordered_state(operator: WindowOperator) -> list[Any]:
    """Every key's state in the order it is kept (dict order, timer numbers)."""
    return [
        (key, [list(part.items()) for part in ks.__getstate__()])
        for key, ks in operator.keys.items()
    ]


def user_logs(harness: WindowOperatorHarness) -> list[Any]:
    """What the logging user functions recorded (the gap's and the aggregate's)."""
    operator = harness.operator
    logs = [getattr(operator.assigner, "extract", None), operator.logic.aggregate]
    return [getattr(getattr(owner, "__self__", owner), "log", None) for owner in logs]


def run(harness: WindowOperatorHarness, events: Any, restores: Any, in_runs: bool) -> Any:
    """Feed ``events`` (each key's elements between watermarks as one run, as a
    streaming call does, when ``in_runs``); snapshot and restore before each index in
    ``restores``. Returns everything observable, the states at each snapshot included."""
    operator, snapshots = harness.operator, []
    pending: list[tuple[Any, int]] = []

    def flush() -> None:
        for key in dict.fromkeys(value[0] for value, _ in pending):
            run = [(value, ts) for value, ts in pending if value[0] == key]
            operator.process_elements(key, [v for v, _ in run], [ts for _, ts in run])
        pending.clear()
        harness._collect()

    for index, event in enumerate(events):
        if index in restores:
            flush()
            snapshots.append(ordered_state(operator))
            harness.restore(harness.snapshot())
        if event[0] == "watermark":
            flush()
            harness.process_watermark(event[1])
        elif in_runs:
            pending.append((event[1], event[2]))
        else:
            harness.process_element(event[1], event[2])
    flush()
    side = {tag.tag_id: list(values) for tag, values in operator.side_outputs.items()}
    observed = (harness.output_with_watermarks(), side, harness.num_late_records_dropped)
    return observed, snapshots, ordered_state(operator), user_logs(harness)


def both_ways(case: Case, events: Any, restores: Any, in_runs: bool) -> tuple[Any, Any]:
    fast, general = case.harness(True), case.harness(False)
    assert type(fast.operator) is SessionWindowOperator
    assert type(general.operator) is WindowOperator
    return run(fast, events, restores, in_runs), run(general, events, restores, in_runs)


@settings(max_examples=examples(500), deadline=None)
@given(
    case=cases,
    events=session_streams(),
    restores=st.frozensets(st.integers(0, 60), max_size=4),
    in_runs=st.booleans(),
    final=st.booleans(),
)
def test_session_operator_equals_the_general_operator(
    case: Case, events: Any, restores: Any, in_runs: bool, final: bool
) -> None:
    events = [*events, ("watermark", LONG_MAX)] if final else events
    fast, general = both_ways(case, events, restores, in_runs)
    assert fast == general


# ---------------------------------------------------------------- which operator


def harness(assigner: Any, **options: Any) -> WindowOperatorHarness:
    return WindowOperatorHarness(assigner, sum_reduce, key_selector=lambda v: v[0], **options)


class OwnSessions(EventTimeSessionWindows):
    """A subclass may assign or merge its own way: it loses the fast path."""


def test_event_time_sessions_outside_batch_get_the_session_operator() -> None:
    sessions = EventTimeSessionWindows.with_gap(10)
    dynamic = DynamicEventTimeSessionWindows.with_dynamic_gap(lambda value: 5)
    default = EventTimeTrigger.create()
    for operator in (
        harness(sessions).operator,
        harness(dynamic).operator,
        harness(sessions, trigger=default, allowed_lateness=5, late_data_tag=LATE).operator,
    ):
        assert type(operator) is SessionWindowOperator
    batch = harness(sessions, batch_mode=True).operator
    assert isinstance(batch, SortedSessionOperator)
    assert isinstance(batch, SessionWindowOperator)  # its single elements are served too


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"fast_paths": False}, id="fast-paths-off"),
        pytest.param({"trigger": CountTrigger.of(2)}, id="own-trigger"),
        pytest.param({"evictor": CountEvictor.of(2)}, id="evictor"),
        pytest.param({"assigner": OwnSessions(10)}, id="assigner-subclass"),
        pytest.param({"assigner": TumblingEventTimeWindows.of(10)}, id="not-sessions"),
    ],
)
def test_other_pipelines_do_not_get_the_session_operator(options: dict[str, Any]) -> None:
    assigner = options.pop("assigner", EventTimeSessionWindows.with_gap(10))
    assert not isinstance(harness(assigner, **options).operator, SessionWindowOperator)


# ---------------------------------------------------------------- cheap


def python_calls(step: Callable[[], Any]) -> list[str]:
    """The Python functions ``step()`` calls (by name, in call order, itself excluded)."""
    called: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)

    gc.disable()  # no collection (and no finaliser it runs) among the calls counted
    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
        gc.enable()
    return called[1:]  # the lambda that is `step`


def session_operator(function: Any = sum_reduce, **options: Any) -> WindowOperator:
    operator = harness(EventTimeSessionWindows.with_gap(10), **options).operator
    assert type(operator) is SessionWindowOperator
    operator.process_watermark(0)
    operator.process_element("k", ("k", 0, 1), 3)  # [3, 13)
    return operator


def test_an_element_inside_the_open_session_calls_only_the_user_function() -> None:
    #  0  3    5    8         15   18
    #     |a----------|                 a: [3, 13)
    #          |b----------|            b at 8: the session grows to [3, 18)
    #       |c----------|               c at 5: [5, 15) inside it, no merge (nor merge call)
    operator = session_operator()
    operator.process_element("k", ("k", 1, 2), 8)
    calls = python_calls(lambda: operator.process_element("k", ("k", 2, 4), 5))
    assert calls == ["process_element", "sum_reduce"]
    ks = operator.keys["k"]
    assert ks.merging == {(3, 18): (3, 13)}
    assert ks.contents == {(3, 13): ("k", 3, 7)}
    assert ks.event_timers == {(17, (3, 18)): 2}


def test_an_element_whose_window_equals_the_session_takes_the_general_path() -> None:
    #  3          13
    #  |a----------|       a: [3, 13)
    #  |b----------|       b at 3: the same window, which Flink maps to itself anew
    operator = session_operator()
    calls = python_calls(lambda: operator.process_element("k", ("k", 1, 2), 3))
    assert calls[:2] == ["process_element", "_unusual"]
    assert operator.keys["k"].contents == {(3, 13): ("k", 1, 3)}


def test_an_element_extending_the_open_session_merges_without_a_merge_call() -> None:
    #  0  3    8      13   18
    #     |a----------|          a: [3, 13), its timer at 12
    #          |b----------|     b at 8: [8, 18) merges, [3, 18) in a's namespace
    #                            (Flink folds nothing: no merge function is called);
    #                            the end timer moves to 17 (queued), the cleanup timer
    #                            from 12 + 5 to 17 + 5
    operator = session_operator()
    calls = python_calls(lambda: operator.process_element("k", ("k", 1, 2), 8))
    assert calls == ["process_element", "_merge_into_cover", "push", "sum_reduce"]
    ks = operator.keys["k"]
    assert ks.merging == {(3, 18): (3, 13)}
    assert ks.contents == {(3, 13): ("k", 1, 3)}
    assert ks.event_timers == {(17, (3, 18)): 2}
    late = session_operator(allowed_lateness=5)
    assert late.keys["k"].event_timers == {(12, (3, 13)): 1, (17, (3, 13)): 2}
    late.process_element("k", ("k", 1, 2), 8)
    assert late.keys["k"].event_timers == {(17, (3, 18)): 3, (22, (3, 18)): 4}


def test_an_element_opening_a_session_registers_its_timers() -> None:
    #  3          13 14         24
    #  |a----------|              a: [3, 13)
    #                |b----------|  b at 14: its own session, both in flight
    operator = session_operator()
    assert operator.process_element("k", ("k", 1, 2), 14) == ADDED
    ks = operator.keys["k"]
    assert ks.merging == {(3, 13): (3, 13), (14, 24): (14, 24)}
    assert ks.event_timers == {(12, (3, 13)): 1, (23, (14, 24)): 2}


# ---------------------------------------------------------------- named cases


def fired(case: Case, elements: list[tuple[int, int]], watermarks: dict[int, int]) -> Any:
    """Both ways on one key, the watermark moved before the elements ``watermarks``
    names; the fast way's (output, side outputs, dropped), checked equal."""
    results = []
    for fast_paths in (True, False):
        harness = case.harness(fast_paths)
        for index, (ts, gap) in enumerate(elements):
            if index in watermarks:
                harness.process_watermark(watermarks[index])
            harness.process_element(("k", index, gap), ts)
        harness.process_watermark(LONG_MAX)
        side = {tag.tag_id: values for tag, values in harness.operator.side_outputs.items()}
        results.append((harness.output_with_watermarks(), side, harness.num_late_records_dropped))
    assert results[0] == results[1]
    return results[0]


def test_an_element_bridging_two_sessions_merges_them_in_flinks_order() -> None:
    #  0         10 12        22
    #  |a---------|               a: [0, 10)
    #               |b---------|  b: [12, 22)
    #         |c---------|        c at 8: [8, 18) bridges: one session [0, 22)
    #                             b's namespace takes a's contents (Java's hash order)
    output, _, _ = fired(Case(10, "logged_aggregate", 0, False), [(0, 1), (12, 1), (8, 1)], {})
    assert output[:-1] == [((3, (1, 0, 2)), 21)]


def test_late_and_within_lateness_elements_match_the_general_operator() -> None:
    #  0         10 12   watermark 12, lateness 5
    #  |a---------|      a: [0, 10) fired when the watermark passed 9
    #    |b---------|    b at 2: [2, 12) ends behind the watermark but within the
    #                    lateness: merged into [0, 12), which fires at once
    #  c at -20          late: to the side output
    output, side, dropped = fired(
        Case(10, "elements_seen", 5, True), [(0, 1), (2, 1), (-20, 1)], {1: 12}
    )
    windows = [(record[0][1], record[0][2]) for record in output if isinstance(record, tuple)]
    assert windows == [((0, 10), 12), ((0, 12), 12)]
    assert [value[1] for value, _ in side["late"]] == [2]
    assert dropped == 0


def test_a_raising_reduce_on_the_element_path_names_key_window_and_watermark() -> None:
    def broken(a: Any, b: Any) -> Any:
        raise KeyError("missing")

    messages = []
    for fast_paths in (True, False):
        sessions = EventTimeSessionWindows.with_gap(10)
        operator = WindowOperatorHarness(
            sessions, broken, key_selector=lambda v: v[0], fast_paths=fast_paths
        ).operator
        operator.process_watermark(2)
        operator.process_element("k", ("k", 0, 1), 3)
        with pytest.raises(UserFunctionError) as info:
            operator.process_element("k", ("k", 1, 1), 8)
        messages.append(str(info.value))
        assert isinstance(info.value.__cause__, KeyError)
    assert messages[0] == messages[1]
    assert "key='k', window=TimeWindow[3, 18), watermark=2" in messages[0]
