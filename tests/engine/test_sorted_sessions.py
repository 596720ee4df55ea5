"""The sorted-session operator (BATCH sessions folded by a linear scan) is the general
operator, only faster: random BATCH inputs run both ways (``fast_paths`` on and off)
must give the same output, side output, watermarks seen and state left at each key's end.

Also pinned: which pipelines get it, that a run out of time order takes the general path,
and named cases (sessions one gap apart merge; a closed session fires at once or waits
for the key's end by its allowed lateness; the merging set's self-mapping quirk).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fast_paths import IdList, WatermarkSeen, concat_ids
from test_properties import CountAndSum, examples, sum_reduce, window_label

from tidemark import (
    LONG_MAX,
    CountEvictor,
    CountTrigger,
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    OutputTag,
    ProcessWindowFunction,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
)
from tidemark._engine.create import SortedSessionOperator
from tidemark._engine.operator import WindowOperator
from tidemark.testing import WindowOperatorHarness

CLEARED = OutputTag("cleared")
FIRINGS = ValueStateDescriptor("firings")


class FiringsAndClears(ProcessWindowFunction):
    """Counts the key's firings in global state (so a clear or a firing out of place
    shows in the next firing's number) and reports each clear on a side output."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        state = context.global_state().get_state(FIRINGS)
        firing = (state.value() or 0) + 1
        state.update(firing)
        window = window_label(context.window())
        yield (key, window, firing, context.current_watermark(), tuple(elements))

    def clear(self, context):  # type: ignore[no-untyped-def]
        state = context.global_state().get_state(FIRINGS)
        state.update((state.value() or 0) + 100)
        context.output(CLEARED, (window_label(context.window()), context.current_watermark()))


def drawn_gap(value: tuple[str, int, int]) -> int:
    """A dynamic gap: the element's own, 1 to 30 ms."""
    return value[2]


def _function(kind: str) -> Any:
    return {
        "reduce": lambda: sum_reduce,
        "concat_reduce": lambda: concat_ids,
        "aggregate": CountAndSum,
        "concat_aggregate": IdList,
        "reduce_seen": lambda: (sum_reduce, WatermarkSeen()),
        "aggregate_seen": lambda: (CountAndSum(), FiringsAndClears()),
        "elements_seen": WatermarkSeen,
        "elements_cleared": FiringsAndClears,
    }[kind]()


@dataclass(frozen=True)
class Case:
    """A session pipeline: a static ``gap`` (None: each element's own) and a function."""

    gap: int | None
    function: str
    allowed_lateness: int
    keep_all_elements: bool | None = None  # a dynamic gap's, see test_dynamic_gap_elements

    def harness(self, fast_paths: bool) -> WindowOperatorHarness:
        if self.gap is None:
            assigner: Any = DynamicEventTimeSessionWindows.with_dynamic_gap(
                drawn_gap, keep_all_elements=self.keep_all_elements
            )
        else:
            assigner = EventTimeSessionWindows.with_gap(self.gap)
        return WindowOperatorHarness(
            assigner,
            _function(self.function),
            key_selector=lambda value: value[0],
            allowed_lateness=self.allowed_lateness,
            fast_paths=fast_paths,
            batch_mode=True,
        )


cases = st.builds(
    Case,
    gap=st.one_of(st.none(), st.integers(1, 30)),
    keep_all_elements=st.sampled_from((None, True)),
    function=st.sampled_from(
        (
            "reduce",
            "concat_reduce",
            "aggregate",
            "concat_aggregate",
            "reduce_seen",
            "aggregate_seen",
            "elements_seen",
            "elements_cleared",
        )
    ),
    allowed_lateness=st.one_of(st.just(0), st.integers(0, 60)),
)


@st.composite
def key_inputs(draw: Any, ordered: bool = True) -> list[tuple[str, list[tuple[int, int]]]]:
    """Keys with ``(timestamp, gap)`` per element, in time order (ties and duplicates
    often: timestamps step by 0 to 40 ms), and where a key's runs are cut."""
    keys = []
    for key in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True)):
        steps = draw(st.lists(st.sampled_from((0, 0, 1, 3, 5, 10, 20, 40)), min_size=1))
        stamps = [draw(st.integers(-100, 100))]
        for step in steps[1:30]:
            stamps.append(stamps[-1] + step)
        if not ordered:
            stamps = draw(st.permutations(stamps))
        gaps = draw(st.lists(st.integers(1, 30), min_size=len(stamps), max_size=len(stamps)))
        keys.append((key, list(zip(stamps, gaps))))
    return keys


def run_batch(harness: WindowOperatorHarness, keys: Any, cuts: Any) -> Any:
    """A BATCH Spark task: each key's runs, +inf, the key's state (then it goes).
    Returns what it emitted and left, and the key's sessions after each run."""
    operator = harness.operator
    next_id, left, between = 0, {}, []
    for key, elements in keys:
        values = [(key, next_id + i, gap) for i, (_, gap) in enumerate(elements)]
        stamps = [ts for ts, _ in elements]
        next_id += len(elements)
        bounds = [0, *sorted(set(cuts(len(stamps)))), len(stamps)]
        for start, end in zip(bounds, bounds[1:]):
            if start < end:
                operator.process_elements(key, values[start:end], stamps[start:end])
                between.append(sessions(operator.keys[key]))
        operator.process_watermark(LONG_MAX)
        ks = operator.evict_key(key)
        left[key] = None if ks is None else ks.__getstate__()
        operator.reset_clocks()
    emitted = (list(operator.output), operator.side_outputs, operator.num_late_records_dropped)
    return emitted, left, between


def sessions(ks: Any) -> dict[Any, Any]:
    """A key's in-flight sessions: window -> (state window, its contents, the window's
    timers); timers of no in-flight window under None."""
    timers: dict[Any, set[int]] = {}
    for time, window in ks.event_timers:
        timers.setdefault(window if window in ks.merging else None, set()).add(time)
    found: dict[Any, Any] = {
        window: (state, ks.contents.get(state), timers.get(window))
        for window, state in ks.merging.items()
    }
    found[None] = timers.get(None)
    return found


def agree_between_runs(fast: list[Any], general: list[Any]) -> None:
    """After each run, the fast way's sessions are the general way's but for those it
    fired at once: sessions that end before all it still holds."""
    for fast_sessions, general_sessions in zip(fast, general):
        assert fast_sessions.pop(None) is None  # no timer of a window gone
        assert general_sessions.pop(None) is None
        for window, entry in fast_sessions.items():
            assert general_sessions.pop(window) == entry
        first = min(window[0] for window in fast_sessions)
        assert all(window[1] < first for window in general_sessions)


def both_ways(case: Case, keys: Any, cuts: Any) -> tuple[Any, Any]:
    """Both ways, each key's runs cut where ``cuts(number of elements)`` says."""
    drawn: dict[int, list[int]] = {}

    def drawn_cuts(n: int) -> list[int]:
        return drawn.setdefault(len(drawn), cuts(n))

    fast_harness, general_harness = case.harness(True), case.harness(False)
    assert isinstance(fast_harness.operator, SortedSessionOperator)
    assert type(general_harness.operator) is WindowOperator
    fast, fast_left, fast_between = run_batch(fast_harness, keys, drawn_cuts)
    replayed = iter(drawn.values())
    general, general_left, general_between = run_batch(
        general_harness, keys, lambda n: next(replayed)
    )
    agree_between_runs(fast_between, general_between)
    return (fast, fast_left), (general, general_left)


@settings(max_examples=examples(400), deadline=None)
@given(case=cases, keys=key_inputs(), data=st.data())
def test_sorted_sessions_equal_the_general_operator_in_batch(
    case: Case, keys: Any, data: Any
) -> None:
    cuts = lambda n: data.draw(st.lists(st.integers(0, n), max_size=3))  # noqa: E731
    fast, general = both_ways(case, keys, cuts)
    assert fast == general


@st.composite
def disordered_then_ordered(draw: Any) -> tuple[Any, list[int]]:
    """Keys whose elements come as one run out of time order (when the timestamps
    differ), then a run in order starting anywhere; and where the first run ends."""
    keys, ends = [], []
    for (key, first), (_, second) in zip(draw(key_inputs()), draw(key_inputs())):
        shuffled = draw(st.permutations(first))
        if [ts for ts, _ in shuffled] == sorted(ts for ts, _ in shuffled):
            shuffled.reverse()  # out of order, or all at one time (one session)
        keys.append((key, shuffled + second))
        ends.append(len(first))
    return keys, ends


@settings(max_examples=examples(300), deadline=None)
@given(case=cases, inputs=disordered_then_ordered())
def test_runs_out_of_time_order_take_the_general_path(case: Case, inputs: Any) -> None:
    """The first run is out of order: the general path. The second is in order but may
    start before a session of the first: the general path too. (BATCH promises order
    across a key's runs: a session fired at once cannot take an element that comes
    later; none fires at once here before the second run.)"""
    keys, ends = inputs
    first_runs = iter(ends)
    fast, general = both_ways(case, keys, lambda n: [next(first_runs)])
    assert fast == general


# ---------------------------------------------------------------- which operator


def harness(assigner: Any, **options: Any) -> WindowOperatorHarness:
    options.setdefault("batch_mode", True)
    return WindowOperatorHarness(assigner, sum_reduce, key_selector=lambda v: v[0], **options)


class OwnSessions(EventTimeSessionWindows):
    """A subclass may assign or merge its own way: it loses the fast path."""


def test_batch_event_time_sessions_get_the_sorted_session_operator() -> None:
    sessions = EventTimeSessionWindows.with_gap(10)
    dynamic = DynamicEventTimeSessionWindows.with_dynamic_gap(drawn_gap)
    assert isinstance(harness(sessions).operator, SortedSessionOperator)
    assert isinstance(harness(dynamic).operator, SortedSessionOperator)
    default = EventTimeTrigger.create()
    assert isinstance(harness(sessions, trigger=default).operator, SortedSessionOperator)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"batch_mode": False}, id="not-batch"),
        pytest.param({"fast_paths": False}, id="fast-paths-off"),
        pytest.param({"trigger": CountTrigger.of(2)}, id="own-trigger"),
        pytest.param({"evictor": CountEvictor.of(2)}, id="evictor"),
        pytest.param({"assigner": OwnSessions(10)}, id="assigner-subclass"),
        pytest.param({"assigner": TumblingEventTimeWindows.of(10)}, id="not-sessions"),
    ],
)
def test_other_pipelines_do_not_get_the_sorted_session_operator(options: dict[str, Any]) -> None:
    assigner = options.pop("assigner", EventTimeSessionWindows.with_gap(10))
    assert not isinstance(harness(assigner, **options).operator, SortedSessionOperator)


# ---------------------------------------------------------------- named cases


def fired(case: Case, stamps_and_gaps: list[tuple[int, int]], cuts: list[int]) -> Any:
    """Both ways on one key; the fast way's (output, side outputs), checked equal."""
    results = []
    for fast_paths in (True, False):
        operator = case.harness(fast_paths).operator
        values = [("k", i, gap) for i, (_, gap) in enumerate(stamps_and_gaps)]
        stamps = [ts for ts, _ in stamps_and_gaps]
        bounds = [0, *cuts, len(stamps)]
        for start, end in zip(bounds, bounds[1:]):
            operator.process_elements("k", values[start:end], stamps[start:end])
        before_end = list(operator.output)
        operator.process_watermark(LONG_MAX)
        results.append((before_end, list(operator.output), dict(operator.side_outputs)))
    assert results[0][1:] == results[1][1:]
    return results[0]


def test_sessions_one_gap_apart_merge() -> None:
    #  0         10        20
    #  |a---------|                a: [0, 10)
    #             |b---------|     b at 10 touches a: one session [0, 20)
    before_end, output, _ = fired(Case(10, "reduce", 0), [(0, 1), (10, 1)], [])
    assert before_end == []
    assert output == [(("k", 1, 2), 19)]


def test_a_closed_session_fires_at_once_when_its_cleanup_precedes_the_next_firing() -> None:
    #  0    5         15   20        30
    #  |a---------|                      [0, 10), cleanup at 9 + 5 = 14
    #                 |b---------|       [15, 25): end timer 24 > 14, so a fires at once
    case = Case(10, "elements_cleared", 5)
    before_end, output, sides = fired(case, [(0, 1), (15, 1)], [])
    assert before_end == [(("k", (0, 10), 1, LONG_MAX, (("k", 0, 1),)), 9)]
    assert [result for result, _ in output] == [
        ("k", (0, 10), 1, LONG_MAX, (("k", 0, 1),)),
        ("k", (15, 25), 102, LONG_MAX, (("k", 1, 1),)),
    ]
    assert sides[CLEARED] == [(((0, 10), LONG_MAX), 9), (((15, 25), LONG_MAX), 24)]


@pytest.mark.parametrize(
    ("lateness", "at_once", "b_firing"),
    [
        pytest.param(15, True, 102, id="cleanup-at-the-next-end-timer"),
        pytest.param(16, False, 2, id="cleanup-after-the-next-end-timer"),
    ],
)
def test_a_closed_session_waits_for_the_key_end_when_it_is_cleaned_up_after_the_next_fires(
    lateness: int, at_once: bool, b_firing: int
) -> None:
    #  0         10   15        25
    #  |a---------|                   [0, 10), cleanup at 9 + lateness
    #                 |b---------|    [15, 25), end timer at 24
    # At 24 both, a's cleanup first (registered first): a fires and goes at once. At 25
    # b fires before a is cleaned up: a waits for the key's end.
    case = Case(10, "elements_cleared", lateness)
    before_end, output, sides = fired(case, [(0, 10), (15, 10)], [])
    assert bool(before_end) is at_once
    assert [result[2] for result, _ in output] == [1, b_firing]
    assert [side[0][0] for side in sides[CLEARED]] == [(0, 10), (15, 25)]


def test_an_element_whose_window_equals_a_grown_session_starts_new_contents() -> None:
    #  0    5    10
    #  |a---|               a at 0, gap 5: [0, 5)
    #  |b--------|          b at 0, gap 10: merged, [0, 10) kept in a's namespace [0, 5)
    #  |c--------|          c at 0, gap 10: its window IS [0, 10): no merge, Flink maps
    #                       [0, 10) to itself and c starts new contents there (a and b
    #                       are never fired)
    case = Case(None, "elements_seen", 0)
    for cuts in ([], [1], [2]):
        _, output, _ = fired(case, [(0, 5), (0, 10), (0, 10)], cuts)
        assert output == [(("k", (0, 10), LONG_MAX, (("k", 2, 10),)), 9)]


def failing_reduce(a: Any, b: Any) -> Any:
    if 3 in (a[1], b[1]):
        raise ValueError("no element 3")
    return sum_reduce(a, b)


@pytest.mark.parametrize(
    ("assigner", "function"),
    [
        pytest.param(EventTimeSessionWindows.with_gap(10), failing_reduce, id="reduce"),
        pytest.param(
            DynamicEventTimeSessionWindows.with_dynamic_gap(lambda v: 0 if v[1] == 3 else 5),
            sum_reduce,
            id="dynamic-gap",
        ),
    ],
)
def test_a_failing_user_function_raises_the_general_operators_error(
    assigner: Any, function: Any
) -> None:
    messages = []
    for fast_paths in (True, False):
        operator = WindowOperatorHarness(
            assigner, function, key_selector=lambda v: v[0], fast_paths=fast_paths, batch_mode=True
        ).operator
        with pytest.raises(Exception) as raised:
            operator.process_elements("k", [("k", i, 0) for i in range(5)], [0, 4, 8, 20, 22])
        messages.append((type(raised.value), str(raised.value)))
    assert messages[0] == messages[1]
    assert "k" in messages[0][1]
