"""A key's Rows in the state store: written as their row type, restored as the Rows the
reader builds (equal, with the same fields), and state written before that still loads.

The streaming runtime pickles each key's state per call (``state.dump_key_state``) and
unpickles it at the key's next call (``StoredKey.load_state``). A window keeping its
elements (a process window function) keeps the reader's Rows (``codec.row_type_of``).
"""

from __future__ import annotations

import pickle

from pyspark.sql import Row

from tidemark._engine.keystate import KeyState
from tidemark.spark.protocol.codec import row_type_of
from tidemark.spark.streaming.worker.state import StoredGroup, StoredKey, dump_key_state
from tidemark.windows import TimeWindow

NAMES = ("auction", "num", "starttime", "endtime")


def _rows(n: int) -> list[Row]:
    row_type = row_type_of(NAMES)
    return [tuple.__new__(row_type, (i, i % 3, 0, 10_000)) for i in range(n)]


def _key_state(rows: list[Row]) -> KeyState:
    ks = KeyState()
    window = TimeWindow(0, 10_000)
    ks.contents[window] = [(row, 9_999) for row in rows]
    ks.global_state["last"] = rows[-1]
    ks.event_timers[(9_999, window)] = 1
    return ks


def _state_of(ks: KeyState) -> tuple[object, ...]:
    return tuple(getattr(ks, name) for name in KeyState.__slots__)


def test_rows_restore_as_the_readers_rows():
    rows = _rows(5)
    restored = StoredKey(dump_key_state(_key_state(rows))).load_state()
    assert restored is not None
    (elements,) = restored.contents.values()
    assert [row for row, _ in elements] == rows
    assert all(type(row) is row_type_of(NAMES) for row, _ in elements)
    assert type(restored.global_state["last"]) is row_type_of(NAMES)
    assert elements[4][0].num == 1 and elements[4][0].asDict()["auction"] == 4


def test_restored_state_equals_the_stored_one():
    ks = _key_state(_rows(50))
    ks.trigger_state[TimeWindow(0, 10_000)] = {"count": Row(a=1, b=Row(c=2))}
    restored = StoredKey(dump_key_state(ks)).load_state()
    assert restored is not None
    assert _state_of(restored) == _state_of(ks)
    nested = restored.trigger_state[TimeWindow(0, 10_000)]["count"]
    assert nested.b.c == 2 and nested.__fields__ == ["a", "b"]


def test_state_pickled_as_before_still_loads():
    # what the store held before: the KeyState pickled whole, Rows as plain Rows
    ks = _key_state(_rows(3))
    before = pickle.dumps(ks, protocol=pickle.HIGHEST_PROTOCOL)
    restored = StoredKey(before).load_state()
    assert restored is not None
    assert _state_of(restored) == _state_of(ks)


def test_a_group_row_round_trips_with_rows_in_its_keys():
    group = StoredGroup.decode(None, 8)
    group.keys[10_000] = StoredKey(dump_key_state(_key_state(_rows(2))), 9_000)
    back = StoredGroup.decode(group.encode(8), 8)
    restored = back.keys[10_000].load_state()
    assert restored is not None
    assert [row for row, _ in restored.contents[TimeWindow(0, 10_000)]] == _rows(2)


def test_states_large_and_small_in_turn_each_restore_exactly():
    # one pickler is reused between calls (and rebuilt after a large pickle): nothing
    # of one state may leak into the next one's bytes
    small, large = _key_state(_rows(1)), _key_state(_rows(2_000))
    for ks in (small, large, small, small, large, small):
        restored = StoredKey(dump_key_state(ks)).load_state()
        assert restored is not None
        assert _state_of(restored) == _state_of(ks)


def test_a_state_only_cloudpickle_writes_leaves_the_next_one_intact():
    # a lambda fails the pickler partway; cloudpickle writes that state, and the
    # reused pickler still writes the next state whole
    odd = _key_state(_rows(2))
    odd.global_state["f"] = lambda x: x + 1
    restored = StoredKey(dump_key_state(odd)).load_state()
    assert restored is not None and restored.global_state["f"](1) == 2
    plain = _key_state(_rows(3))
    again = StoredKey(dump_key_state(plain)).load_state()
    assert again is not None and _state_of(again) == _state_of(plain)
