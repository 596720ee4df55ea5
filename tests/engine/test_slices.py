"""Sliding windows stored once per slice (the sliced operator), named cases.

Every case runs twice, sliced (fast paths on) and on the general operator (off), and
requires the same output, watermarks seen, side output, dropped count, state count and
timers; then pins the output itself. The random cases are in test_fast_paths.py.

Slices are ``gcd(size, slide)`` wide, aligned to the offset; ``|`` marks slice edges,
``[`` window starts in the timelines below.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tidemark import (
    LONG_MAX,
    AggregateFunction,
    CountEvictor,
    OutputTag,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
)
from tidemark._engine.create import AlignedWindowOperator, SlicedWindowOperator
from tidemark._engine.operator import WindowOperator
from tidemark._engine.trace import Tracer
from tidemark.errors import UserFunctionError
from tidemark.spark.aggregations import MinBy, Sum
from tidemark.testing import Watermark, WindowOperatorHarness

LATE = OutputTag("late")
FIRINGS = ValueStateDescriptor("firings")


def key_sum(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    return (a[0], a[1] + b[1])


class Seen(ProcessWindowFunction):
    """``(key, start, end, watermark seen, firing number, values in the order seen)``;
    the firing number lives in per-window state, cleared with the window."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        window = context.window()
        state = context.window_state().get_state(FIRINGS)
        firing = (state.value() or 0) + 1
        state.update(firing)
        values = tuple(e[1] for e in elements)
        yield (key, window.start, window.end, context.current_watermark(), firing, values)

    def clear(self, context):  # type: ignore[no-untyped-def]
        context.window_state().get_state(FIRINGS).clear()


class Average(AggregateFunction):
    """Mutates its accumulator in add and its first argument in merge, as Flink allows."""

    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return [0, 0]

    def add(self, value, accumulator):  # type: ignore[no-untyped-def]
        accumulator[0] += value[1]
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator):  # type: ignore[no-untyped-def]
        return (accumulator[0], accumulator[1])

    def merge(self, a, b):  # type: ignore[no-untyped-def]
        a[0] += b[0]
        a[1] += b[1]
        return a


def run(assigner: Any, function: Any, events: list[Any], **options: Any) -> Any:
    """``events`` (``(value, ts)`` or an int watermark, then the final watermark) through
    the sliced and the general operator: everything observable, once, after checking
    that both agree."""
    seen = []
    for fast in (True, False):
        h = WindowOperatorHarness(
            assigner,
            function,
            key_selector=lambda v: v[0],
            fast_paths=fast,
            **options,
            slice_incremental=True,
        )
        assert isinstance(h.operator, SlicedWindowOperator) == fast
        observed = []
        for event in [*events, LONG_MAX]:
            if isinstance(event, int):
                h.process_watermark(event)
            else:
                h.process_element(*event)
            observed.append((h.num_keyed_state_entries(), h.num_event_time_timers()))
        late = h.side_output(LATE) if options.get("late_data_tag") else None
        seen.append((h.output_with_watermarks(), late, h.num_late_records_dropped, observed))
    assert seen[0] == seen[1]
    return seen[0]


def results(outcome: Any) -> list[Any]:
    """The ``(value, timestamp)`` records emitted, without the watermarks."""
    return [item for item in outcome[0] if isinstance(item, tuple)]


def values(outcome: Any) -> list[Any]:
    return [value for value, _ in results(outcome)]


def test_an_element_exactly_at_a_slice_edge_goes_into_the_slice_it_starts():
    """size 6, slide 2 (slices of 2):

    |0 1|2 3|4 5|6 7|
    [0        6)         ts 2 is the first of slice [2, 4):
        [2        8)     in [0, 6), [2, 8) and [-2, 4), not in [4, 10)
    """
    outcome = run(SlidingEventTimeWindows.of(6, 2), Seen(), [(("a", 2), 2), (("a", 1), 1)])
    assert [(r[1], r[2], r[5]) for r in values(outcome)] == [
        (-4, 2, (1,)),
        (-2, 4, (2, 1)),  # arrival order, not time order
        (0, 6, (2, 1)),
        (2, 8, (2,)),
    ]


def test_an_element_at_a_window_s_last_millisecond_fires_with_it():
    """ts 5 is the max_timestamp of [0, 6): watermark 5 fires [0, 6) with it; [2, 8)
    and [4, 10) wait for watermarks 7 and 9."""
    outcome = run(SlidingEventTimeWindows.of(6, 2), key_sum, [(("a", 1), 5), 5, 7])
    assert outcome[0][:4] == [(("a", 1), 5), Watermark(5), (("a", 1), 7), Watermark(7)]
    assert results(outcome)[2:] == [(("a", 1), 9)]


@pytest.mark.parametrize(
    "offset",
    [
        pytest.param(0, id="no-offset"),
        pytest.param(-3, id="offset-3"),
        pytest.param(4, id="offset4"),
    ],
)
def test_negative_timestamps_with_offsets(offset: int):
    """size 10, slide 5, slices of 5 shifted by ``offset``; elements on both sides of
    zero, one on a slice edge (``offset - 5``)."""
    events = [(("a", 1), -12), (("a", 2), offset - 5), (("a", 4), -1), -6, (("a", 8), 3)]
    outcome = run(SlidingEventTimeWindows.of(10, 5, offset), Seen(), events)
    windows = {(r[1], r[2]): r[5] for r in values(outcome)}
    elements = [event for event in events if not isinstance(event, int)]
    assert windows
    for (start, end), seen in windows.items():
        assert (end - start, (start - offset) % 5) == (10, 0)
        assert seen == tuple(value for (_, value), ts in elements if start <= ts < end)


def test_size_not_a_multiple_of_slide_slices_by_their_gcd():
    """size 10, slide 4: slices of gcd 2; windows [-8, 2), [-4, 6), [0, 10), [4, 14),
    [8, 18). Each element is in two or three windows."""
    events = [(("a", 1), 1), (("a", 2), 5), (("a", 4), 9), (("a", 8), 3), (("a", 16), 0)]
    outcome = run(SlidingEventTimeWindows.of(10, 4), key_sum, events)
    assert results(outcome) == [
        (("a", 17), 1),  # [-8, 2)
        (("a", 27), 5),  # [-4, 6)
        (("a", 31), 9),  # [0, 10)
        (("a", 6), 13),  # [4, 14)
        (("a", 4), 17),  # [8, 18)
    ]


def test_a_late_element_within_lateness_refires_every_window_it_reaches():
    """size 6, slide 2, lateness 4; watermark 9 fires [4, 10), [2, 8), [0, 6) ... and
    cleans up [0, 6) (at 5 + 4). An element at 5 then re-fires [4, 10) and [2, 8) at
    once (their second firing, latest window first, seeing watermark 9), and skips
    [0, 6), which is gone. Its slice [4, 6) stays until [4, 10) is cleaned up (13).

        |0 1|2 3|4 5|6 7|8 9|
        [0        6)           cleaned up at 9
            [2        8)       cleanup 11
                [4        10)  cleanup 13
    """
    events = [(("a", 1), 1), (("a", 2), 4), 9, (("a", 4), 5), 11, 13]
    outcome = run(
        SlidingEventTimeWindows.of(6, 2), Seen(), events, allowed_lateness=4, late_data_tag=LATE
    )
    fired = [(r[1], r[3], r[4], r[5]) for r in values(outcome)]
    assert fired == [
        (-4, 9, 1, (1,)),
        (-2, 9, 1, (1,)),
        (0, 9, 1, (1, 2)),
        (2, 9, 1, (2,)),
        (4, 9, 1, (2,)),
        (4, 9, 2, (2, 4)),
        (2, 9, 2, (2, 4)),
    ]
    assert outcome[1] == []
    # (state entries, timers) after each event: windows counted as Flink's harness does
    assert outcome[3] == [(3, 6), (5, 10), (4, 2), (4, 2), (2, 1), (0, 0), (0, 0)]


def test_an_element_late_for_every_window_goes_to_the_side_output():
    """At watermark 20 every window of ts 5 ([0, 6), [2, 8), [4, 10)) is late; ts 15's
    ([10, 16) ... [14, 20)) too; ts 21's are not."""
    events = [(("a", 1), 1), 20, (("a", 2), 5), (("a", 3), 15), (("a", 4), 21)]
    outcome = run(SlidingEventTimeWindows.of(6, 2), key_sum, events, late_data_tag=LATE)
    assert outcome[1] == [(("a", 2), 5), (("a", 3), 15)]
    assert [r[1] for r in results(outcome)] == [1, 3, 5, 21, 23, 25]


def test_out_of_order_arrivals_keep_flink_s_order_for_order_sensitive_functions():
    """Sum keeps the first-arrived element's other fields, MinBy the first-arrived of its
    ties. Elements arrive at 7, 1, 7, 3: slices [6, 8) and [0, 2) interleave, so the
    windows holding both see their runs in arrival order, not in time order."""
    from pyspark.sql import Row

    rows = [Row(k="a", v=v, n=n) for v, n in [(5, 0), (2, 1), (2, 2), (5, 3)]]
    stamps = [7, 1, 7, 3]
    summed = run_rows(Sum("v"), rows, stamps)
    assert summed == [
        (("a", 2, 1), 1),  # [-6, 2)
        (("a", 7, 1), 3),  # [-4, 4): first arrived is n=1 (ts 1), then n=3
        (("a", 7, 1), 5),
        (("a", 14, 0), 7),  # [0, 8): n=0 arrived first
        (("a", 12, 0), 9),  # [2, 10)
        (("a", 7, 0), 11),
        (("a", 7, 0), 13),
    ]
    least = run_rows(MinBy("v"), rows, stamps)
    assert [r[0][2] for r in least] == [1, 1, 1, 1, 2, 2, 2]  # n=1 before n=2 (tie at 2)


def run_rows(function: Any, rows: list[Any], stamps: list[int]) -> list[Any]:
    seen = []
    for fast in (True, False):
        h = WindowOperatorHarness(
            SlidingEventTimeWindows.of(8, 2),
            function,
            key_selector=lambda r: r.k,
            fast_paths=fast,
            slice_incremental=True,
        )
        for row, ts in zip(rows, stamps):
            h.process_element(row, ts)
        h.process_watermark(LONG_MAX)
        seen.append([(tuple(v), ts) for v, ts in h.output()])
    assert seen[0] == seen[1]
    return seen[0]


def test_an_aggregate_whose_merge_reuses_its_first_argument_leaves_the_slices_intact():
    """size 4, slide 2, lateness 10. Watermark 3 fires [-2, 2) and [0, 4) (merging
    slices [0, 2) and [2, 4)); the late element at 0 re-fires them: [-2, 2) must still
    see slice [0, 2) as it was, not with [2, 4) merged into it."""
    events = [(("a", 1), 1), (("a", 2), 3), 3, (("a", 4), 0)]
    outcome = run(SlidingEventTimeWindows.of(4, 2), Average(), events, allowed_lateness=10)
    assert results(outcome) == [
        ((1, 1), 1),
        ((3, 2), 3),
        ((7, 3), 3),  # [0, 4) again: latest window first
        ((5, 2), 1),  # [-2, 2) again
        ((2, 1), 5),
    ]


def test_each_element_is_stored_once_and_the_count_is_flink_s():
    """size 10, slide 2: an element is in five windows, stored once; the harness counts
    the five windows holding it, as Flink's does."""
    h = WindowOperatorHarness(
        SlidingEventTimeWindows.of(10, 2),
        key_sum,
        key_selector=lambda v: v[0],
        slice_incremental=True,
    )
    for ts in (0, 1, 2):
        h.process_element(("a", 1), ts)
    operator = h.operator
    assert isinstance(operator, SlicedWindowOperator)
    assert operator.num_stored_contents() == 2  # slices [0, 2) and [2, 4)
    assert h.num_keyed_state_entries() == 6  # [-8, 2) ... [2, 12)
    assert h.num_event_time_timers() == 6


def test_batch_mode_sliced_equals_the_general_operator():
    outs = []
    for fast in (True, False):
        h = WindowOperatorHarness(
            SlidingEventTimeWindows.of(6, 4),
            Seen(),
            key_selector=lambda v: v[0],
            fast_paths=fast,
            batch_mode=True,
            slice_incremental=True,
        )
        h.operator.process_elements("a", [("a", i) for i in range(6)], [0, 1, 3, 4, 4, 9])
        h.process_watermark(LONG_MAX)
        outs.append((h.output(), h.num_keyed_state_entries()))
    assert outs[0] == outs[1]
    assert outs[0][0][0] == (("a", -4, 2, LONG_MAX, 1, (0, 1)), 1)


# ---------------------------------------------------------------- which operator


def operator_for(assigner: Any, function: Any = key_sum, **options: Any) -> WindowOperator:
    options.setdefault("slice_incremental", True)
    return WindowOperatorHarness(
        assigner, function, key_selector=lambda v: v[0], **options
    ).operator


class NoMerge(AggregateFunction):
    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return 0

    def add(self, value, accumulator):  # type: ignore[no-untyped-def]
        return accumulator + 1

    def get_result(self, accumulator):  # type: ignore[no-untyped-def]
        return accumulator


def test_sliding_windows_are_sliced_only_where_contents_merge_and_fast_paths_are_on():
    sliding = SlidingEventTimeWindows.of(10, 2)
    assert type(operator_for(sliding)) is SlicedWindowOperator
    assert type(operator_for(sliding, Seen())) is SlicedWindowOperator
    assert type(operator_for(sliding, (Average(), Seen()))) is SlicedWindowOperator
    assert type(operator_for(sliding, NoMerge())) is AlignedWindowOperator
    # incremental functions only when asked (merge is called where Flink does not)
    assert type(operator_for(sliding, slice_incremental=False)) is AlignedWindowOperator
    assert type(operator_for(sliding, Seen(), slice_incremental=False)) is SlicedWindowOperator
    assert type(operator_for(sliding, tracer=Tracer())) is AlignedWindowOperator
    assert type(operator_for(TumblingEventTimeWindows.of(10))) is AlignedWindowOperator
    assert type(operator_for(sliding, fast_paths=False)) is WindowOperator
    assert type(operator_for(sliding, evictor=CountEvictor.of(2))) is WindowOperator


# ---------------------------------------------------------------- state of the earlier code

# WindowOperatorHarness(SlidingEventTimeWindows.of(10, 5), add, key_selector=lambda v:
# "k" if v < 100 else "j", allowed_lateness=5, slice_incremental=True) fed (1, 1), (2, 7), (3, 12), (200, 3),
# (4, 4), watermark 9, (5, 6), then snapshot() by the unsliced code (commit eefb848):
# windows [0, 10), [5, 15), [10, 20) of "k" and [0, 10) of "j" with their contents.
SLIDING_SNAPSHOT_EEFB848 = bytes.fromhex(
    "800495e900000000000000287d94288c016b948c19746964656d61726b2e5f656e67696e652e6b65797374"
    "617465948c084b65795374617465949394298194287d94288c10746964656d61726b2e77696e646f777394"
    "8c0a54696d6557696e646f779493944b004b0a869452944b0c68094b054b0f869452944b0a68094b0a4b14"
    "869452944b03757d947d947d947d947d94284b0e680b86944b024b0e680d86944b054b13680d86944b064b"
    "13680f86944b074b18680f86944b08757d947494628c016a946804298194287d94680b4bc8737d947d947d"
    "947d947d944b0e680b86944b0a737d94749462754b094b004b0074942e"
)


def add(a: int, b: int) -> int:
    return a + b


def test_a_snapshot_of_the_unsliced_code_restores_and_carries_on_exactly():
    """A restored key keeps its windows' contents and is served per window until they
    are gone; then its new windows are sliced."""
    outs = []
    for fast in (True, False):
        h = WindowOperatorHarness(
            SlidingEventTimeWindows.of(10, 5),
            add,
            key_selector=lambda v: "k" if v < 100 else "j",
            allowed_lateness=5,
            fast_paths=fast,
            slice_incremental=True,
        )
        h.restore(SLIDING_SNAPSHOT_EEFB848)
        counts = []
        for events, watermark in [
            ([(6, 8), (7, 13), (300, 2), (8, 16)], 14),
            ([(9, 22), (10, 30)], 45),
            ([(11, 50), (12, 52)], LONG_MAX),
        ]:
            for value, ts in events:
                h.process_element(value, ts)
            counts.append((h.num_keyed_state_entries(), h.num_event_time_timers()))
            if fast and watermark == LONG_MAX:  # one slice, [50, 55), for two windows
                assert h.operator.num_stored_contents() == 1  # type: ignore[attr-defined]
            h.process_watermark(watermark)
        outs.append((h.output(), counts))
    assert outs[0] == outs[1]
    assert outs[0][0] == [
        (18, 9),  # the late element 6 re-fires the restored [0, 10)
        (500, 9),
        (23, 14),  # [5, 15): 10 restored + 6 + 7
        (18, 19),
        (17, 24),
        (9, 29),
        (10, 34),
        (10, 39),
        (23, 54),  # sliced: [45, 55) and [50, 60) share the slice [50, 55)
        (23, 59),
    ]
    assert outs[0][1] == [(5, 8), (6, 11), (2, 4)]


def test_a_sliced_snapshot_pickles_and_restores():
    h = WindowOperatorHarness(
        SlidingEventTimeWindows.of(6, 2),
        Seen(),
        key_selector=lambda v: v[0],
        slice_incremental=True,
    )
    h.process_element(("a", 1), 3)
    h.process_element(("a", 2), 1)
    blob = h.snapshot()
    h.process_element(("a", 4), 3)
    restored = WindowOperatorHarness(
        SlidingEventTimeWindows.of(6, 2),
        Seen(),
        key_selector=lambda v: v[0],
        slice_incremental=True,
    )
    restored.restore(pickle.loads(pickle.dumps(blob)))
    restored.process_element(("a", 4), 3)  # after the restored runs, not inside one
    h.process_watermark(LONG_MAX)
    restored.process_watermark(LONG_MAX)
    assert restored.output() == h.output()
    assert [r[0][5] for r in h.output()] == [(2,), (1, 2, 4), (1, 2, 4), (1, 4)]


# ---------------------------------------------------------------- errors


class BadMerge(Average):
    def merge(self, a, b):  # type: ignore[no-untyped-def]
        raise ValueError("no merging today")


def test_a_failing_merge_names_the_merge_function_the_key_and_the_window():
    """The sliced operator merges a window's slices when it fires: the error is the
    merge function's, with the window that fired (the general operator never merges
    sliding windows)."""
    h = WindowOperatorHarness(
        SlidingEventTimeWindows.of(4, 2),
        BadMerge(),
        key_selector=lambda v: v[0],
        slice_incremental=True,
    )
    h.process_element(("a", 1), 1)
    h.process_element(("a", 2), 3)
    with pytest.raises(UserFunctionError) as caught:
        h.process_watermark(3)
    assert str(caught.value) == (
        "the merge function raised ValueError: no merging today "
        "(key='a', window=TimeWindow[0, 4), watermark=3)"
    )


def test_a_failing_reduce_names_the_latest_window_of_the_element_as_the_general_operator():
    def bad(a: Any, b: Any) -> Any:
        raise KeyError("boom")

    messages = []
    for fast in (True, False):
        h = WindowOperatorHarness(
            SlidingEventTimeWindows.of(6, 2),
            bad,
            key_selector=lambda v: v[0],
            fast_paths=fast,
            slice_incremental=True,
        )
        h.process_element(("a", 1), 1)
        with pytest.raises(UserFunctionError) as caught:
            h.process_element(("a", 2), 1)
        messages.append(str(caught.value))
    assert (
        messages[0]
        == messages[1]
        == (
            "the reduce/aggregate function raised KeyError: 'boom' "
            "(key='a', window=TimeWindow[0, 6), watermark=-9223372036854775808)"
        )
    )


@pytest.mark.parametrize(
    "function",
    [
        pytest.param(Seen, id="process"),
        pytest.param(lambda: key_sum, id="reduce"),
        pytest.param(Average, id="aggregate"),
    ],
)
def test_a_sliced_snapshot_restores_with_fast_paths_off(function: Any):
    """A query checkpointed with slices restarts on the general operator (fast paths
    turned off): the slices become the windows' contents, and the run carries on as if
    the general operator had run all along."""
    first = [(("a", 1), 1), (("a", 2), 7), (("b", 3), 2), (("a", 4), 3), 5]
    then = [(("a", 8), 4), (("a", 16), 9), (("b", 32), 6), 9, (("a", 64), 12)]

    def harness(fast: bool) -> WindowOperatorHarness:
        return WindowOperatorHarness(
            SlidingEventTimeWindows.of(6, 2),
            function(),
            key_selector=lambda v: v[0],
            allowed_lateness=3,
            fast_paths=fast,
            slice_incremental=True,
        )

    def feed(h: WindowOperatorHarness, events: list[Any]) -> None:
        for event in events:
            if isinstance(event, int):
                h.process_watermark(event)
            else:
                h.process_element(*event)

    sliced, general = harness(True), harness(False)
    feed(sliced, first)
    restarted = harness(False)
    restarted.restore(sliced.snapshot())
    feed(general, first)
    assert restarted.num_keyed_state_entries() == general.num_keyed_state_entries()
    for h in (restarted, general):
        feed(h, [*then, LONG_MAX])
    assert restarted.output() == general.output()[-len(restarted.output()) :]
    assert len(restarted.output()) > 4
