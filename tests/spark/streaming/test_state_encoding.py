"""How the streaming state stores a key's state and a group's keys: the compact forms
(``KeyState.packed`` for time windows' contents and timers, ``state.dump_keys`` for a
group's keys as columns) restore exactly what was stored; every other state is stored as
the object, as before; and what earlier code stored still loads.

Each case runs an engine operator part way, stores every key's state, restores it into a
fresh operator and checks that both finish with the same output.
"""

from __future__ import annotations

import math
import pickle
import random

import pytest

from tidemark import (
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from tidemark._engine.create import window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.keystate import KeyState
from tidemark._engine.operator import WindowOperator
from tidemark.spark.protocol.codec import row_type_of
from tidemark.spark.streaming.worker.state import (
    NEW_KEY,
    StoredGroup,
    StoredKey,
    dump_key_state,
    dump_keys,
    dumps,
    load_keys,
)
from tidemark.time import LONG_MAX
from tidemark.windows import TimeWindow


class Elements(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield sorted(elements)


CASES = {
    "tumbling": (lambda: window_operator(TumblingEventTimeWindows.of(10), window_logic(max)), True),
    "tumbling, elements kept": (
        lambda: window_operator(TumblingEventTimeWindows.of(10), window_logic(Elements())),
        True,
    ),
    "sliding": (
        lambda: window_operator(SlidingEventTimeWindows.of(30, 10), window_logic(max)),
        True,
    ),
    "sessions": (
        lambda: window_operator(EventTimeSessionWindows.with_gap(5), window_logic(max)),
        False,
    ),
    "global, count trigger": (
        lambda: window_operator(
            GlobalWindows.create(), window_logic(max), trigger=CountTrigger.of(3)
        ),
        False,
    ),
    "processing time": (
        lambda: window_operator(TumblingProcessingTimeWindows.of(10), window_logic(max)),
        True,
    ),
}


def _feed(op: WindowOperator, rng: random.Random, steps: int) -> None:
    for _ in range(steps):
        key, time = rng.randint(0, 5), rng.randint(0, 200)
        op.process_element(key, rng.randint(0, 99), time)
        if rng.random() < 0.2:
            op.process_watermark(max(op.current_watermark, time - 40))
        if rng.random() < 0.1:
            op.advance_processing_time(op.current_processing_time + rng.randint(0, 7))


def _finish(op: WindowOperator, rng: random.Random) -> list[object]:
    """What ``op`` emits and drops from here on, fed more elements to the end."""
    emitted, dropped = len(op.output), op.num_late_records_dropped
    _feed(op, rng, 30)
    op.advance_processing_time(10_000)
    op.process_watermark(LONG_MAX)
    return [sorted(map(repr, op.output[emitted:])), op.num_late_records_dropped - dropped]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_key_state_stored_and_restored_carries_on_exactly(case, seed):
    make, packs = CASES[case]
    straight, stopped = make(), make()
    for op in (straight, stopped):
        _feed(op, random.Random(seed), 60)
    assert straight.keys
    restored = make()
    restored.current_watermark = stopped.current_watermark
    restored.current_processing_time = stopped.current_processing_time
    forms = set()
    for key in list(stopped.keys):
        ks = stopped.snapshot_key(key)
        assert ks is not None
        forms.add(ks.packed() is not None)
        blob = load_keys(dump_keys({key: StoredKey(dump_key_state(ks), 5)}))[key].key_state
        back = StoredKey(blob).load_state()
        assert back is not None
        restored.restore_key(key, back)
    assert forms == {packs}  # the time windows' states packed, the others as objects
    expected = _finish(straight, random.Random(seed + 10))
    assert _finish(restored, random.Random(seed + 10)) == expected and expected[0]


def test_a_packed_state_is_restored_with_the_same_windows_and_order():
    ks = KeyState()
    for start in (20, 0, 10):
        ks.contents[TimeWindow(start, start + 10)] = [start]
        ks.event_timers[(start + 9, TimeWindow(start, start + 10))] = start
    ks.processing_timers[(5, TimeWindow(0, 10))] = 7
    back = StoredKey(dump_key_state(ks)).load_state()
    assert back is not None
    for name in KeyState.__slots__:
        assert list(getattr(back, name).items()) == list(getattr(ks, name).items()), name
    assert all(type(w) is TimeWindow for w in back.contents)


def test_a_window_s_rows_are_stored_as_columns_and_restored_as_the_same_rows():
    """Rows of one reader's row type are stored as columns (no reduction per Row) and
    come back as equal Rows of that type, in order; one Row, Rows of two types and
    other values are stored as they are. Rows stored one by one (before) still load."""
    row_type, other = row_type_of(("user", "amount", "nested")), row_type_of(("user",))
    nested = tuple.__new__(other, ("n",))
    rows = [
        tuple.__new__(row_type, (f"u{i}", i * 0.5 if i else math.nan, nested)) for i in range(5)
    ]
    rows.append(tuple.__new__(row_type, (None, None, None)))
    ks = KeyState()
    ks.contents[TimeWindow(0, 10)] = rows
    ks.contents[TimeWindow(10, 20)] = rows[:1]
    ks.contents[TimeWindow(20, 30)] = [rows[0], tuple.__new__(other, ("x",))]
    ks.contents[TimeWindow(30, 40)] = [3, 1, 2]
    ks.contents[TimeWindow(40, 50)] = [(row, 40 + i) for i, row in enumerate(rows)]  # evictor's
    ks.contents[TimeWindow(50, 60)] = [(rows[0], 50), (rows[1], 51, 0)]
    blob = dump_key_state(ks)
    assert b"restored_row" not in blob.split(b"rows_from_columns")[0]  # the 5-Row window
    back = StoredKey(blob).load_state()
    assert back is not None
    for window, value in ks.contents.items():
        got = back.contents[window]
        assert repr(got) == repr(value) and [type(v) for v in got] == [type(v) for v in value]
    assert type(back.contents[TimeWindow(0, 10)][1][2]) is other
    flat = [tuple.__new__(other, (f"u{i}",)) for i in range(3)]
    evicting = KeyState()
    evicting.contents[TimeWindow(0, 10)] = [(row, i) for i, row in enumerate(flat)]
    assert b"restored_row" not in dump_key_state(evicting)  # the pairs' Rows as columns
    before = dumps(ks.packed())  # as earlier code stored it: Rows one by one
    assert repr(StoredKey(before).load_state().contents) == repr(ks.contents)


def test_a_key_state_pickled_whole_still_loads():
    ks = KeyState()
    ks.contents[TimeWindow(0, 10)] = 3
    ks.event_timers[(9, TimeWindow(0, 10))] = 0
    back = StoredKey(pickle.dumps(ks, protocol=pickle.HIGHEST_PROTOCOL)).load_state()
    assert back is not None and back.contents == ks.contents
    assert back.event_timers == ks.event_timers


def test_keys_as_columns_round_trip_with_dropped_keys():
    keys = {
        "a": StoredKey(b"state", 5, 1, 9, None, None, None),
        ("t", 2): StoredKey(None, 7, 0, None, 11, 3, 4),
        "gone": None,
    }
    back = load_keys(dump_keys(keys))
    assert back == keys and all(type(v) is StoredKey for v in back.values() if v is not None)
    assert back["a"].event_timer == 9 and back[("t", 2)].seen_at == 4
    assert load_keys(dump_keys({})) == {}


def test_keys_pickled_as_a_dict_before_still_load():
    keys = {"a": StoredKey(b"state", 5), "b": NEW_KEY}
    assert load_keys(pickle.dumps(keys, protocol=pickle.HIGHEST_PROTOCOL)) == keys
    row = (8, pickle.dumps(keys, protocol=pickle.HIGHEST_PROTOCOL), 9, None, 3)
    assert StoredGroup.decode(row, 8).keys == keys


def test_the_group_s_earliest_timers_skip_keys_without_one():
    group = StoredGroup(
        {
            "a": StoredKey(None, 0, 0, None, 40),
            "b": StoredKey(None, 0, 0, 30, None),
            "c": StoredKey(None, 0, 0, 20, 50),
        }
    )
    assert group.earliest_timers() == (20, 40)
    assert StoredGroup({"a": NEW_KEY}).earliest_timers() == (None, None)
