"""The processing-time aligned operator outside BATCH (a streaming call hands it runs of
one key's elements, all at the micro-batch's processing time) is the general operator,
only faster: random runs of elements of processing-time tumbling and sliding windows,
with processing time advancing between them and snapshots restored, give the same
output, side outputs, dropped count and state left both ways (``fast_paths`` on and
off), whatever the function.

Also pinned here: which pipelines get it (a trigger subclass that changes a callback,
an evictor or ``fast_paths=False`` keep the general operator).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_fast_paths import FUNCTIONS, _function, state_left
from test_properties import KEYS, examples, sum_reduce

from tidemark import (
    CountEvictor,
    ProcessingTimeTrigger,
    SlidingProcessingTimeWindows,
    TumblingProcessingTimeWindows,
)
from tidemark._engine.create import ProcessingTimeAlignedOperator
from tidemark._engine.operator import WindowOperator
from tidemark.testing import WindowOperatorHarness

Step = tuple[Any, ...]
"""("run", key, [values]) or ("advance", processing time) or ("restore",)."""


@st.composite
def steps(draw: Any) -> list[Step]:
    """Runs of one key's elements (ids in arrival order), processing time advancing
    between some of them (sometimes exactly to a window's end), a snapshot and restore
    now and then."""
    now = draw(st.integers(0, 30))
    drawn: list[Step] = [("advance", now)]
    next_id = 0
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(("run", "run", "advance", "restore")))
        if kind == "run":
            key = draw(st.sampled_from(KEYS))
            values = [
                (key, next_id + i, draw(st.integers(0, 9))) for i in range(draw(st.integers(1, 6)))
            ]
            next_id += len(values)
            drawn.append(("run", key, values))
        elif kind == "advance":
            now += draw(st.sampled_from((0, 1, 3, 9, 10, 17, 40)))
            drawn.append(("advance", now))
        else:
            drawn.append(("restore",))
    return [*drawn, ("advance", now + 1_000)]


def run(harness: WindowOperatorHarness, drawn: list[Step]) -> tuple[Any, ...]:
    operator = harness.operator
    for step in drawn:
        if step[0] == "run":
            _, key, values = step
            operator.process_elements(key, values, [None if v[2] % 3 else v[1] for v in values])
            harness._collect()
        elif step[0] == "advance":
            harness.set_processing_time(step[1])
        else:
            harness.restore(harness.snapshot())
            operator = harness.operator
    return (
        harness.output_with_watermarks(),
        harness.num_late_records_dropped,
        harness.num_keyed_state_entries(),
        state_left(harness),
    )


def harness(function: Any, fast_paths: bool = True, **options: Any) -> WindowOperatorHarness:
    return WindowOperatorHarness(
        options.pop("assigner", TumblingProcessingTimeWindows.of(10, options.pop("offset", 0))),
        function,
        key_selector=lambda value: value[0],
        fast_paths=fast_paths,
        **options,
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    function=st.sampled_from(FUNCTIONS),
    offset=st.sampled_from((0, 3, -4)),
    lateness=st.sampled_from((0, 5)),
    sliding=st.booleans(),
    drawn=steps(),
)
def test_processing_time_runs_equal_the_general_operator(
    function: str, offset: int, lateness: int, sliding: bool, drawn: list[Step]
) -> None:
    options: dict[str, Any] = {"offset": offset, "allowed_lateness": lateness}
    if sliding:
        options = {
            "assigner": SlidingProcessingTimeWindows.of(10, 5, offset),
            "allowed_lateness": lateness,
        }
    fast = harness(_function(function), **options)
    general = harness(_function(function), fast_paths=False, **options)
    assert isinstance(fast.operator, ProcessingTimeAlignedOperator)
    assert not isinstance(general.operator, ProcessingTimeAlignedOperator)
    assert run(fast, drawn) == run(general, drawn)


class CountingProcessingTimeTrigger(ProcessingTimeTrigger):
    """Overrides a callback: loses the fast path, and is called for every element."""

    def __init__(self) -> None:
        self.calls = 0

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super().on_element(element, timestamp, window, ctx)


class RenamedProcessingTimeTrigger(ProcessingTimeTrigger):
    """Changes nothing it is called for: keeps the fast path."""


def test_only_plain_processing_time_windows_get_the_aligned_operator() -> None:
    def operator(**options: Any) -> WindowOperator:
        return harness(sum_reduce, **options).operator

    assert isinstance(operator(), ProcessingTimeAlignedOperator)
    assert isinstance(
        operator(trigger=RenamedProcessingTimeTrigger()), ProcessingTimeAlignedOperator
    )
    sliding = operator(assigner=SlidingProcessingTimeWindows.of(10, 5))
    assert isinstance(sliding, ProcessingTimeAlignedOperator)
    for options in (
        {"fast_paths": False},
        {"trigger": CountingProcessingTimeTrigger()},
        {"evictor": CountEvictor.of(2)},
    ):
        chosen = operator(**options)
        assert type(chosen) is WindowOperator, options


def test_a_trigger_that_overrides_a_callback_is_called_for_every_element() -> None:
    counting = CountingProcessingTimeTrigger()
    h = harness(sum_reduce, trigger=counting)
    h.operator.process_elements("a", [("a", 1, 1), ("a", 2, 1), ("a", 3, 1)], [None] * 3)
    h.set_processing_time(100)
    assert counting.calls == 3
    assert h.output() == [(("a", 6, 3), 9)]
