"""The aligned operator's per-element and per-watermark paths stay cheap, and stay exact.

Cheap is pinned as the Python calls a step makes (counted with ``sys.setprofile``, not
timed: a count does not depend on the machine's load). An element added to a tumbling
window that already holds contents calls nothing but the user's function; a watermark
with no timer due calls nothing but the clock's advance. ``benchmarks/README.md``
("The per-element path made cheap") has the figures these calls cost.

Exact is the differential law of ``test_fast_paths``, here with the key states
snapshotted and restored mid-stream (the tumbling element path relies on a window that
holds contents having its timers, which a restore must keep true), and with errors
raised by the user's function on the fast path.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fast_paths import Case, cases, state_left
from test_properties import examples, feed, streams, with_final_watermark

from tidemark import AggregateFunction, TumblingEventTimeWindows, UserFunctionError
from tidemark._engine.create import AlignedWindowOperator, window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.operator import WindowOperator
from tidemark._engine.status import ADDED


def add_values(a: int, b: int) -> int:
    return a + b


class Total(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: int, accumulator: int) -> int:
        return accumulator + value

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


def python_calls(step: Callable[[], Any]) -> list[str]:
    """The Python functions ``step()`` calls (by name, in call order, itself excluded).
    The garbage collector is held off meanwhile: a collection that happens to run inside
    the step (on a loaded run, finalizers of earlier tests' objects) is not the step's."""
    called: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)

    collecting = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
        if collecting:
            gc.enable()
    return called[1:]  # the lambda that is `step`


def tumbling(function: Any) -> WindowOperator:
    operator = window_operator(TumblingEventTimeWindows.of(10), window_logic(function))
    assert type(operator) is AlignedWindowOperator
    return operator


@pytest.mark.parametrize(
    ("function", "user_call"),
    [(add_values, "add_values"), (Total(), "add")],
    ids=["reduce", "aggregate"],
)
def test_an_element_into_a_window_with_contents_calls_only_the_user_function(
    function: Any, user_call: str
) -> None:
    operator = tumbling(function)
    operator.process_element("k", 1, 3)
    calls = python_calls(lambda: operator.process_element("k", 2, 4))
    assert calls == ["process_element", user_call]
    assert operator.keys["k"].contents == {(0, 10): 3}


def test_a_short_run_outside_batch_takes_the_element_path() -> None:
    """The streaming worker hands the engine each key's few elements of a micro-batch."""
    operator = tumbling(add_values)
    operator.process_element("k", 1, 3)
    calls = python_calls(lambda: operator.process_elements("k", [2, 4], [5, 4]))
    assert calls == ["process_elements", *["process_element", "add_values"] * 2]
    assert operator.keys["k"].contents == {(0, 10): 7}


def test_an_element_opening_a_window_adds_it_and_registers_its_timer() -> None:
    operator = tumbling(add_values)
    assert operator.process_element("k", 1, 3) == ADDED
    assert operator.keys["k"].event_timers == {(9, (0, 10)): 1}
    assert operator.num_event_time_timers() == 1


def test_a_watermark_with_no_timer_due_calls_only_the_clock() -> None:
    operator = tumbling(add_values)
    operator.process_element("k", 1, 3)
    calls = python_calls(lambda: operator.process_watermark(5))
    assert calls == ["process_watermark", "begin_advance"]
    assert operator.current_watermark == 5
    operator.process_watermark(9)
    assert operator.output == [(1, 9)]


def test_a_raising_reduce_on_the_element_path_names_key_window_and_watermark() -> None:
    def broken(a: int, b: int) -> int:
        raise KeyError("missing")

    operator = tumbling(broken)
    operator.process_element("k", 1, 3)
    operator.process_watermark(2)
    with pytest.raises(UserFunctionError) as info:
        operator.process_element("k", 2, 4)
    assert "key='k', window=TimeWindow[0, 10), watermark=2" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)


@settings(max_examples=examples(300), deadline=None)
@given(
    case=cases(aligned_only=True),
    events=streams(),
    restores=st.frozensets(st.integers(0, 40), max_size=4),
    final=st.booleans(),
)
def test_fast_paths_equal_the_general_operator_across_restores(
    case: Case, events: list[tuple[Any, ...]], restores: frozenset[int], final: bool
) -> None:
    events = with_final_watermark(events) if final else events
    fast, general = case.harness(True), case.harness(False)
    assert isinstance(fast.operator, AlignedWindowOperator)
    assert not isinstance(general.operator, AlignedWindowOperator)
    fast_run, general_run = feed(fast, events, restores), feed(general, events, restores)
    assert (fast_run, state_left(fast)) == (general_run, state_left(general))


class CallLog(AggregateFunction):
    """Sums, logging every ``add`` as ``(value, accumulator)`` in one list shared by all
    windows: the order of the user's calls across windows too."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: int, accumulator: int) -> int:
        self.calls.append((value, accumulator))
        return accumulator + value

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


# A stream's micro-batch for one key: out of order, long stretches in one 10 ms window
DISORDERED = [12] * 30 + [5, 7] * 15 + [13] * 20 + [25] * 16 + [18] * 20 + [9] * 17 + [24] * 3


@pytest.mark.parametrize("lateness", [0, 5])
@pytest.mark.parametrize("watermark", [None, 4, 8, 9, 10, 13, 14, 19, 20])
def test_a_disordered_run_folds_stretches_as_the_element_path_adds(
    watermark: int | None, lateness: int
) -> None:
    """Stretches of one window are folded at once; a window late or due at the
    watermark (its end at or before it, its cleanup after it or not) goes element by
    element: the same output, late count, state and user calls, in the same order."""
    results = []
    for fast in (True, False):
        function = CallLog()
        operator = window_operator(
            TumblingEventTimeWindows.of(10),
            window_logic(function),
            allowed_lateness_ms=lateness,
            fast_paths=fast,
        )
        if watermark is not None:
            operator.process_watermark(watermark)
        values = list(range(1, len(DISORDERED) + 1))
        operator.process_elements("k", values, DISORDERED)
        operator.process_watermark(30)
        state = operator.snapshot_key("k")
        results.append(
            (
                function.calls,
                list(operator.output),
                operator.num_late_records_dropped,
                None if state is None else state.__getstate__(),
            )
        )
    assert results[0] == results[1]
    assert results[0][0]  # the function was called
