"""``MergingWindowSet`` alone, as tables: which window an added window ends in, which
window holds its state, and what the merge callback is told.

Each case adds windows one at a time to an empty set of a session assigner with a 3 ms
gap (so ``[ts, ts + 3)`` per element; windows that overlap or touch merge). A step is
``(added, returned, merge)``: the window added, the window ``add_window`` returns, and
the one merge callback call expected, ``(result, merged, state_window, merged_states)``,
or None for no call. The final mapping (in-flight window -> state window) is pinned too.

Flink's ``MergingWindowSetTest`` cases are here under their Flink names; where Flink
accepts any of several state windows (its ``HashSet`` order is left open), the table pins
the one Flink picks: the state window of the first merged window in Java's ``HashSet``
iteration order (:func:`~tidemark._engine.merging.java_hash_order`).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Collection, Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemark import EventTimeSessionWindows, TumblingEventTimeWindows
from tidemark._engine.merging import MergingWindowSet, java_hash_order
from tidemark.assigners import MergingWindowAssigner
from tidemark.windows import TimeWindow, Window

W = TimeWindow
Merge = tuple[Window, list[Window], Window, list[Window]]
Step = tuple[Window, Window, Merge | None]

SESSIONS = EventTimeSessionWindows.with_gap(3)


def add_all(window_set: MergingWindowSet, steps: list[Step]) -> None:
    """Add each step's window; check the window returned and the merge callback's calls."""
    calls: list[Merge] = []
    for added, returned, merge in steps:
        calls.clear()
        result = window_set.add_window(added, lambda *args: calls.append(args))
        assert (added, result, calls) == (added, returned, [merge] if merge else [])


# 0   3   5   8   11  13     two sessions grow apart, then [5, 8) touches both: the
# [---)       [---)          result holds the state window of the session Java's
#   [---)       [---)        HashSet iterates first, [8, 13) -> [8, 11) (a state
#         [---)              window two merges old); [0, 5)'s [0, 3) is folded into it
CHAIN_OF_MERGED_SESSIONS: list[Step] = [
    (W(0, 3), W(0, 3), None),
    (W(8, 11), W(8, 11), None),
    (W(2, 5), W(0, 5), (W(0, 5), [W(0, 3)], W(0, 3), [])),
    (W(10, 13), W(8, 13), (W(8, 13), [W(8, 11)], W(8, 11), [])),
    (W(5, 8), W(0, 13), (W(0, 13), [W(8, 13), W(0, 5)], W(8, 11), [W(0, 3)])),
]

CASES = [
    # 0   3        10  13
    # [---)        [---)        two windows far apart: neither merges
    pytest.param(
        [(W(0, 3), W(0, 3), None), (W(10, 13), W(10, 13), None)],
        {W(0, 3): W(0, 3), W(10, 13): W(10, 13)},
        id="merges-nothing",
    ),
    # 0   3
    # [---)
    #   [---)    [2, 5) overlaps [0, 3): the result [0, 5) keeps [0, 3)'s state window;
    #   2   5    the new window lends none, so no state window is folded in
    pytest.param(
        [(W(0, 3), W(0, 3), None), (W(2, 5), W(0, 5), (W(0, 5), [W(0, 3)], W(0, 3), []))],
        {W(0, 5): W(0, 3)},
        id="merges-one",
    ),
    # 0   3
    # [---)
    #     [---)  [3, 6) touches [0, 3) (end == start): touching windows merge
    #     3   6
    pytest.param(
        [(W(0, 3), W(0, 3), None), (W(3, 6), W(0, 6), (W(0, 6), [W(0, 3)], W(0, 3), []))],
        {W(0, 6): W(0, 3)},
        id="merges-a-touching-window",
    ),
    # 0   3     6   9   10  13
    # [---)     [---)   [---)
    # [-------------------------)   [0, 13) covers all three: Java's HashSet iterates
    # 0                        13   [6, 9) first, so its state window holds the result
    pytest.param(
        [
            (W(0, 3), W(0, 3), None),
            (W(6, 9), W(6, 9), None),
            (W(10, 13), W(10, 13), None),
            (
                W(0, 13),
                W(0, 13),
                (W(0, 13), [W(6, 9), W(0, 3), W(10, 13)], W(6, 9), [W(0, 3), W(10, 13)]),
            ),
        ],
        {W(0, 13): W(6, 9)},
        id="merges-several-state-window-in-java-hash-order",
    ),
    # 0  2  4  6
    # [--)  [--)
    #    [--)      [2, 4) bridges [0, 2) and [4, 6) (touching both)
    pytest.param(
        [
            (W(0, 2), W(0, 2), None),
            (W(4, 6), W(4, 6), None),
            (W(2, 4), W(0, 6), (W(0, 6), [W(0, 2), W(4, 6)], W(0, 2), [W(4, 6)])),
        ],
        {W(0, 6): W(0, 2)},
        id="bridges-two",
    ),
    # 0   3               a chain: each window extends the last result, whose state
    # [---)               window stays the first window's, [0, 3)
    #   [---)   -> [0, 5)
    #     [---) -> [0, 7)
    #       [---) -> [0, 9)
    pytest.param(
        [
            (W(0, 3), W(0, 3), None),
            (W(2, 5), W(0, 5), (W(0, 5), [W(0, 3)], W(0, 3), [])),
            (W(4, 7), W(0, 7), (W(0, 7), [W(0, 5)], W(0, 3), [])),
            (W(6, 9), W(0, 9), (W(0, 9), [W(0, 7)], W(0, 3), [])),
        ],
        {W(0, 9): W(0, 3)},
        id="chain-keeps-the-first-state-window",
    ),
    pytest.param(CHAIN_OF_MERGED_SESSIONS, {W(0, 13): W(8, 11)}, id="chain-of-merged-sessions"),
    # 0   3   6
    # [-------)     [2, 5) falls inside the merged [0, 6): no merge, no new window
    #   [---)
    pytest.param(
        [
            (W(0, 3), W(0, 3), None),
            (W(3, 6), W(0, 6), (W(0, 6), [W(0, 3)], W(0, 3), [])),
            (W(2, 5), W(0, 6), None),
        ],
        {W(0, 6): W(0, 3)},
        id="inside-a-merged-window",
    ),
    # ---------------------------------------------------------------- Flink's cases
    # 0    4 5 6      10 11   14 15
    # [----)           [---)            testIncrementalMerging: [0, 4) grows to [0, 6),
    #    [-)             [--)           [11, 14) to [10, 15); windows inside a merged
    #     [-)           [---)           window merge nothing
    pytest.param(
        [
            (W(0, 4), W(0, 4), None),
            (W(0, 4), W(0, 4), None),
            (W(3, 5), W(0, 5), (W(0, 5), [W(0, 4)], W(0, 4), [])),
            (W(4, 6), W(0, 6), (W(0, 6), [W(0, 5)], W(0, 4), [])),
            (W(1, 4), W(0, 6), None),
            (W(0, 4), W(0, 6), None),
            (W(3, 5), W(0, 6), None),
            (W(4, 6), W(0, 6), None),
            (W(11, 14), W(11, 14), None),
            (W(10, 13), W(10, 14), (W(10, 14), [W(11, 14)], W(11, 14), [])),
            (W(12, 15), W(10, 15), (W(10, 15), [W(10, 14)], W(11, 14), [])),
            (W(11, 14), W(10, 15), None),
        ],
        {W(0, 6): W(0, 4), W(10, 15): W(11, 14)},
        id="flink-incremental-merging",
    ),
    # 0  3 5  8 10 13
    # [--) [--) [--)        testLateMerging: [8, 10) joins the later two, then [3, 5)
    #         [-)           joins everything; Flink allows any state window, the one
    #    [-)                it picks is [5, 8)'s, then [0, 3)'s (Java's HashSet order)
    pytest.param(
        [
            (W(0, 3), W(0, 3), None),
            (W(5, 8), W(5, 8), None),
            (W(10, 13), W(10, 13), None),
            (W(8, 10), W(5, 13), (W(5, 13), [W(5, 8), W(10, 13)], W(5, 8), [W(10, 13)])),
            (W(5, 8), W(5, 13), None),
            (W(8, 10), W(5, 13), None),
            (W(10, 13), W(5, 13), None),
            (W(3, 5), W(0, 13), (W(0, 13), [W(0, 3), W(5, 13)], W(0, 3), [W(5, 8)])),
        ],
        {W(0, 13): W(0, 3)},
        id="flink-late-merging",
    ),
    # 0 1 2 3
    #   [-)         testMergeLargeWindowCoveringSingleWindow: [0, 3) covers [1, 2) and
    # [-----)       takes its state window
    pytest.param(
        [(W(1, 2), W(1, 2), None), (W(0, 3), W(0, 3), (W(0, 3), [W(1, 2)], W(1, 2), []))],
        {W(0, 3): W(1, 2)},
        id="flink-large-window-covering-single-window",
    ),
    # 1 2
    # [-)           testAddingIdenticalWindows: the same window again merges nothing
    # [-)
    pytest.param(
        [(W(1, 2), W(1, 2), None), (W(1, 2), W(1, 2), None)],
        {W(1, 2): W(1, 2)},
        id="flink-adding-identical-windows",
    ),
    # 0 1  3  5  8 10  13
    #   [--)  [--)  [--)        testMergeLargeWindowCoveringMultipleWindows: Flink allows
    # [----------------)        any of the three state windows; it picks [1, 3)'s
    pytest.param(
        [
            (W(1, 3), W(1, 3), None),
            (W(5, 8), W(5, 8), None),
            (W(10, 13), W(10, 13), None),
            (
                W(0, 13),
                W(0, 13),
                (W(0, 13), [W(1, 3), W(5, 8), W(10, 13)], W(1, 3), [W(5, 8), W(10, 13)]),
            ),
        ],
        {W(0, 13): W(1, 3)},
        id="flink-large-window-covering-multiple-windows",
    ),
]


@pytest.mark.parametrize(("steps", "mapping"), CASES)
def test_add_window(steps: list[Step], mapping: dict[Window, Window]) -> None:
    window_set = MergingWindowSet(SESSIONS, {})
    add_all(window_set, steps)
    assert window_set.mapping == mapping
    for window, state_window in mapping.items():
        assert window_set.get_state_window(window) == state_window


def test_the_state_window_is_the_first_in_java_hash_order() -> None:
    """The pick in ``merges-several-state-window-in-java-hash-order`` is not the
    earliest window: Java's ``HashSet`` puts [6, 9) first (its hash bucket is lower)."""
    assert java_hash_order([W(0, 3), W(6, 9), W(10, 13), W(0, 13)])[0] == W(6, 9)


class NonEagerlyMergingWindowAssigner(MergingWindowAssigner):
    """Flink's test assigner that merges lazily: it merges the windows that start inside
    the earliest one into ``[earliest.start, earliest.end + 1)``, whether or not they
    overlap the window just added."""

    def __init__(self, session_timeout: int):
        self.session_timeout = session_timeout

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[Window]:
        assert timestamp is not None
        return [TimeWindow(timestamp, timestamp + self.session_timeout)]

    def get_default_trigger(self) -> Any:
        return TumblingEventTimeWindows.of(1).get_default_trigger()

    def is_event_time(self) -> bool:
        return True

    def merge_windows(
        self, windows: Iterable[Window], callback: Callable[[Collection[Window], Window], Any]
    ) -> None:
        time_windows: list[Any] = list(windows)
        earliest = min(time_windows, key=lambda w: w.start)
        associated = [w for w in time_windows if earliest.start <= w.start < earliest.end]
        if len(associated) > 1:
            callback(associated, TimeWindow(earliest.start, earliest.end + 1))


def test_flink_non_eager_merging_keeps_a_state_window_for_every_result() -> None:
    """testNonEagerMerging: merges of windows the added one does not overlap leave
    every returned window with a state window."""
    window_set = MergingWindowSet(NonEagerlyMergingWindowAssigner(3000), {})
    for added in (W(0, 2), W(2, 5), W(1, 2), W(10, 12)):
        result = window_set.add_window(added, lambda *args: None)
        assert window_set.get_state_window(result) is not None


# ---------------------------------------------------------------- persist, restore, retire


def test_the_set_persists_in_the_mapping_it_was_given() -> None:
    """The key's state owns the mapping (Flink's persist): every add writes into it."""
    mapping: dict[Window, Window] = {}
    window_set = MergingWindowSet(SESSIONS, mapping)
    window_set.add_window(W(1, 2), lambda *args: None)
    window_set.add_window(W(17, 42), lambda *args: None)
    assert mapping == {W(1, 2): W(1, 2), W(17, 42): W(17, 42)}


def test_a_restored_mapping_gives_its_state_windows_and_is_left_as_it_was() -> None:
    """testRestoreFromState and testPersistOnlyIfHaveUpdates: a set made over a stored
    mapping answers from it, and reading it changes nothing."""
    stored = {W(17, 42): W(20, 25), W(1, 2): W(3, 4)}
    window_set = MergingWindowSet(SESSIONS, pickle.loads(pickle.dumps(stored)))
    assert window_set.get_state_window(W(17, 42)) == W(20, 25)
    assert window_set.get_state_window(W(1, 2)) == W(3, 4)
    assert window_set.get_state_window(W(5, 8)) is None
    assert window_set.mapping == stored


@pytest.mark.parametrize(
    "split",
    [pytest.param(n, id=f"restored-after-{n}-adds") for n in range(1, 5)],
)
def test_a_set_restored_from_its_pickled_mapping_merges_as_the_uninterrupted_one(
    split: int,
) -> None:
    # 0   3   5   8   11  13
    # [---)       [---)      CHAIN_OF_MERGED_SESSIONS, its mapping pickled and restored
    #   [---)       [---)    after `split` adds (as Spark's state store keeps it)
    #         [---)
    steps = CHAIN_OF_MERGED_SESSIONS
    straight = MergingWindowSet(SESSIONS, {})
    add_all(straight, steps)
    first = MergingWindowSet(SESSIONS, {})
    add_all(first, steps[:split])
    restored = MergingWindowSet(SESSIONS, pickle.loads(pickle.dumps(first.mapping)))
    add_all(restored, steps[split:])
    assert restored.mapping == straight.mapping


def test_retire_window_forgets_it_and_leaves_the_others() -> None:
    """The end of testIncrementalMerging: retiring [0, 6) (its state was cleared)
    leaves [10, 15) -> [11, 14)."""
    window_set = MergingWindowSet(SESSIONS, {W(0, 6): W(0, 4), W(10, 15): W(11, 14)})
    window_set.retire_window(W(0, 6))
    assert window_set.get_state_window(W(0, 6)) is None
    assert window_set.mapping == {W(10, 15): W(11, 14)}


def test_a_retired_window_merges_no_more() -> None:
    # 0   3   6
    # [---)          [0, 3) retired (late): [3, 6) touches where it was, but starts alone
    #     [---)
    window_set = MergingWindowSet(SESSIONS, {})
    window_set.add_window(W(0, 3), lambda *args: None)
    window_set.retire_window(W(0, 3))
    add_all(window_set, [(W(3, 6), W(3, 6), None)])
    assert window_set.mapping == {W(3, 6): W(3, 6)}


def test_retiring_a_window_not_in_flight_is_an_error() -> None:
    window_set = MergingWindowSet(SESSIONS, {W(0, 3): W(0, 3)})
    with pytest.raises(RuntimeError) as info:
        window_set.retire_window(W(5, 8))
    assert str(info.value) == "window TimeWindow[5, 8) is not in the in-flight window set"
    assert window_set.mapping == {W(0, 3): W(0, 3)}


def calls_into(calls: list[Merge]) -> Callable[..., None]:
    return lambda *args: calls.append(args)


class SweepingSessions(EventTimeSessionWindows):
    """Merges exactly as its parent, through a method of its own: the set then takes
    its general path for every window (the reference for the one-window fast path)."""

    def merge_windows(self, windows, callback):  # type: ignore[no-untyped-def]
        super().merge_windows(windows, callback)


def test_a_session_set_holding_one_window_takes_the_fast_path_only_for_sessions() -> None:
    assert MergingWindowSet(SESSIONS, {}).merges_one_by_sweep
    assert not MergingWindowSet(SweepingSessions.with_gap(3), {}).merges_one_by_sweep


@settings(max_examples=300, deadline=None)
@given(
    starts=st.lists(
        st.tuples(st.integers(0, 40), st.integers(1, 6), st.integers(0, 9)),
        min_size=1,
        max_size=25,
    )
)
def test_the_one_window_fast_path_equals_the_general_sweep(
    starts: list[tuple[int, int, int]],
) -> None:
    # windows [s, s + length) added one by one (equal ones and ones inside others
    # included); now and then the last result is retired, as a late window is
    fast = MergingWindowSet(SESSIONS, {})
    general = MergingWindowSet(SweepingSessions.with_gap(3), {})
    for start, length, retire in starts:
        seen = []
        for window_set in (fast, general):
            calls: list[Merge] = []
            result = window_set.add_window(W(start, start + length), calls_into(calls))
            if retire == 0:
                window_set.retire_window(result)
            seen.append((result, calls, list(window_set.mapping.items())))
        assert seen[0] == seen[1]
