"""The deltas state layout's cache protocol (``worker/deltas.py``), on a fake handle: a
worker's copy of a group is used only at a version it saw, caught up by deltas checked
token by token, read cold otherwise; a failed call leaves no copy behind; the cache is
bounded; compaction folds the deltas into a new base; on PySpark 4.0 no value passes its
state server's limit (SPARK-53870). Then the layout through the processor, against the
row layout on the same calls."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
from collections import Counter
from typing import Any

import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.errors import PySparkRuntimeError
from pyspark.sql.types import LongType, StructField, StructType
from spark_state_fakes import StateHandle, TimerValues

from tidemark import TumblingEventTimeWindows
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import SessionSetupError, WindowSpecError
from tidemark.spark.protocol.columns import TS
from tidemark.spark.streaming.worker import bindings
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.deltas import (
    CACHE,
    KEPT_DELTAS,
    STATE_SERVER_VALUE_BYTES,
    DeltaState,
    _Entry,
    value_bytes_limit,
)
from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
from tidemark.spark.streaming.worker.state import NEW_KEY, KeyTimers, StoredGroup, StoredKey
from tidemark.spark.streaming.worker.variables import (
    BASE_KEY,
    BASE_VALUE,
    DELTA_KEY,
    DELTA_VALUE,
    DELTAS,
    META_SCHEMA,
    ROW,
    STATE_SCHEMA,
    StateLayout,
    register,
)

LAYOUT = StateLayout(DELTAS, cache_keys=1_000, compact_bytes=1 << 20)


@pytest.fixture(autouse=True)
def _empty_cache():
    CACHE.clear()
    yield
    CACHE.clear()


class _Boom(Exception):
    pass


def _call(
    handle: StateHandle,
    changes: dict[str, int | None],
    layout: StateLayout = LAYOUT,
    fail: bool = False,
    value_bytes: int | None = None,
    key_state: bytes | None = None,
) -> StoredGroup:
    """One call of a group: read it, set (key -> watermark, with ``key_state``) or drop
    (None) keys, write; ``value_bytes``: the state server's limit on a value's bytes."""
    state = DeltaState(register(handle, layout), 8, layout, value_bytes)
    group = state.read()
    for key, value in changes.items():
        group.changed.add(key)
        if value is None:
            group.keys.pop(key, None)
        else:
            own = None if key_state is None else key_state + key.encode()  # not memoised
            group.keys[key] = StoredKey(own, value)
    if fail:
        raise _Boom
    if group.keys:
        state.write(group)
    else:
        state.clear(group)
    return group


def _read(handle: StateHandle, layout: StateLayout = LAYOUT) -> dict[str, int]:
    group = DeltaState(register(handle, layout), 8, layout).read()
    return {key: stored.watermark for key, stored in group.keys.items()}


def _truth(handle: StateHandle) -> dict[str, int]:
    """The keys as a worker that never saw the group reads them."""
    CACHE.clear()
    return _read(handle)


def _meta(handle: StateHandle) -> Any:
    return handle.values["meta"].row


def _cold_reads(handle: StateHandle) -> int:
    return handle.maps["deltas"].iterations


def test_a_current_copy_is_used_without_reading_the_store():
    handle = StateHandle()
    _call(handle, {"a": 1, "b": 2})
    _call(handle, {"a": 3})
    assert _read(handle) == {"a": 3, "b": 2}
    assert _cold_reads(handle) == 0
    assert _truth(handle) == {"a": 3, "b": 2} and _cold_reads(handle) == 1


def test_a_copy_behind_is_caught_up_by_the_deltas_it_missed():
    handle = StateHandle()
    _call(handle, {"a": 1, "b": 2})
    store = _meta(handle)[1]
    seen = CACHE.take(store)
    assert seen is not None
    behind = _Entry(seen.version, seen.token, dict(seen.keys))
    _call(handle, {"a": 5, "c": 6})  # another worker's calls (a cold read)
    _call(handle, {"b": None})
    CACHE.take(store)
    CACHE.put(store, behind, LAYOUT.cache_keys)  # this worker only saw version 1
    cold = _cold_reads(handle)
    assert _read(handle) == {"a": 5, "c": 6}
    assert _cold_reads(handle) == cold  # caught up with two deltas, no cold read


def test_a_retried_batch_does_not_trust_the_copy_its_failed_attempt_wrote():
    """Spark rolls the state back to the version before a failed batch; this worker's
    copy is one version ahead of it, and is read cold."""
    handle = StateHandle()
    _call(handle, {"a": 1})
    before = handle.snapshot()
    _call(handle, {"a": 2, "b": 2})  # written, cached; then the batch fails
    handle.restore(before)
    assert _read(handle) == {"a": 1}
    assert _cold_reads(handle) == 1


def test_a_copy_of_the_same_version_number_with_another_token_is_read_cold():
    """The failed attempt of version 2 (on this worker) and its retry (elsewhere)
    share the number, not the token: the copy of the failed attempt is never used."""
    handle = StateHandle()
    _call(handle, {"a": 1})
    before = handle.snapshot()
    _call(handle, {"a": 2, "b": 2})
    store = _meta(handle)[1]
    failed = CACHE.take(store)
    assert failed is not None
    handle.restore(before)
    _call(handle, {"c": 3})  # the retry, on another worker: version 2 again
    CACHE.take(store)
    CACHE.put(store, failed, LAYOUT.cache_keys)
    assert _meta(handle)[2] == failed.version == 2
    assert _read(handle) == {"a": 1, "c": 3}
    assert _cold_reads(handle) >= 2


def _copies_until_a_compaction(handle: StateHandle, layout: StateLayout) -> dict[int, _Entry]:
    """Calls (a key changed each) until one compacts after at least KEPT_DELTAS + 2
    versions: a copy of the cached entry at every version."""
    copies: dict[int, _Entry] = {}
    for step in range(1, 200):
        _call(handle, {f"k{step % 5}": step}, layout)
        meta = _meta(handle)
        entry = CACHE.take(meta[1])
        assert entry is not None
        copies[entry.version] = _Entry(entry.version, entry.token, dict(entry.keys))
        CACHE.put(meta[1], entry, layout.cache_keys)
        if meta[4] == meta[2] and meta[2] >= KEPT_DELTAS + 2:
            return copies
    raise AssertionError("no compaction")


@pytest.mark.parametrize("behind", [1, KEPT_DELTAS])
def test_a_copy_a_few_versions_behind_a_compaction_catches_up_without_the_base(behind):
    """The other worker's copy, behind the compaction by up to KEPT_DELTAS versions,
    catches up with the deltas kept, rather than reading the new base whole."""
    handle, small = StateHandle(), StateLayout(DELTAS, 1_000, compact_bytes=1)
    copies = _copies_until_a_compaction(handle, small)
    version, store = _meta(handle)[2], _meta(handle)[1]
    want = _truth(handle)
    cold = _cold_reads(handle)
    CACHE.put(store, copies[version - behind], small.cache_keys)
    assert _read(handle, small) == want
    assert _cold_reads(handle) == cold


def test_a_copy_further_behind_a_compaction_is_read_cold_from_the_new_base():
    handle, small = StateHandle(), StateLayout(DELTAS, 1_000, compact_bytes=1)
    copies = _copies_until_a_compaction(handle, small)
    version, store = _meta(handle)[2], _meta(handle)[1]
    assert sorted(v for (v,) in handle.maps["deltas"].rows) == list(
        range(version - KEPT_DELTAS + 1, version + 1)
    )  # the compaction's own delta and those before it, KEPT_DELTAS in all
    want = _truth(handle)
    cold = _cold_reads(handle)
    CACHE.put(store, copies[version - KEPT_DELTAS - 1], small.cache_keys)
    assert _read(handle, small) == want
    assert _cold_reads(handle) == cold + 1


def test_groups_alike_compact_at_different_calls():
    """Groups of one query grow alike; each compacts at its own share of its base
    (drawn per base), so their compactions spread over the calls rather than all
    falling in one micro-batch."""
    small = StateLayout(DELTAS, 1_000_000, compact_bytes=1)
    handles = [StateHandle() for _ in range(8)]
    compacted_at: list[set[int]] = [set() for _ in handles]
    for step in range(1, 300):
        for handle, calls in zip(handles, compacted_at):
            _call(handle, {f"k{step % 97}": step}, small)
            if _meta(handle)[4] == _meta(handle)[2]:
                calls.add(step)
    late = [frozenset(c for c in calls if c > 150) for calls in compacted_at]
    assert all(late) and len(set(late)) > 1


def test_a_failed_call_leaves_no_copy_behind():
    handle = StateHandle()
    _call(handle, {"a": 1})
    store = _meta(handle)[1]
    with pytest.raises(_Boom):
        _call(handle, {"a": 99, "z": 1}, fail=True)  # mutated the keys, then failed
    assert store not in CACHE
    assert _read(handle) == {"a": 1}


def test_the_cache_keeps_the_most_recently_used_groups_within_its_bound():
    bounded = StateLayout(DELTAS, cache_keys=3)
    x, y, z = StateHandle(), StateHandle(), StateHandle()
    _call(x, {"a": 1, "b": 1}, bounded)
    _call(y, {"c": 1, "d": 1}, bounded)
    assert _meta(x)[1] not in CACHE and _meta(y)[1] in CACHE and CACHE.keys == 2
    _call(z, {"e": 1, "f": 1, "g": 1, "h": 1}, bounded)  # larger than the bound: not kept
    assert _meta(z)[1] not in CACHE and _meta(y)[1] in CACHE
    assert _read(x, bounded) == {"a": 1, "b": 1}  # evicted: read cold, still right


def test_compaction_at_a_small_threshold_keeps_every_version_readable():
    rng = random.Random(7)
    handle, small = StateHandle(), StateLayout(DELTAS, 1_000, compact_bytes=64)
    want: dict[str, int] = {}
    compactions = 0
    for step in range(60):
        changes: dict[str, int | None] = {}
        for _ in range(rng.randint(1, 4)):
            key = f"k{rng.randint(0, 12)}"
            changes[key] = None if rng.random() < 0.3 else step
        _call(handle, changes, small)
        for key, value in changes.items():
            if value is None:
                want.pop(key, None)
            else:
                want[key] = value
        meta = _meta(handle)
        if meta is None:
            assert want == {}
            continue
        compactions += meta[4] == meta[2]
        assert meta[8] <= max(1.5 * meta[7], small.compact_bytes)  # within 1.5 bases
        kept = [v for (v,) in handle.maps["deltas"].rows]
        assert min(kept) > meta[4] - KEPT_DELTAS and max(kept) == meta[2]
        if rng.random() < 0.3:
            CACHE.clear()  # another worker's call
        assert _read(handle, small) == want
    assert compactions >= 3


def test_a_group_without_keys_leaves_no_state():
    handle = StateHandle()
    _call(handle, {"a": 1})
    _call(handle, {"a": None})
    assert _meta(handle) is None and handle.maps["deltas"].rows == {}
    assert handle.maps["base"].rows == {} and CACHE.keys == 0


def test_another_number_of_key_groups_is_refused():
    handle = StateHandle()
    _call(handle, {"a": 1})
    with pytest.raises(WindowSpecError, match="has 8 key groups, this query 4"):
        DeltaState(register(handle, LAYOUT), 4, LAYOUT).read()


def test_an_unknown_layout_is_refused_naming_the_choices():
    with pytest.raises(WindowSpecError, match=r"must be one of \['row', 'deltas'\]; got 'rows'"):
        StateLayout("rows")


# ------------------------------------------------- PySpark 4.0's state server (SPARK-53870)


def _largest_values(handle: StateHandle) -> dict[str, int]:
    """The bytes of the largest value each of the handle's maps was given, from now on."""
    largest = {"deltas": 0, "base": 0}
    for name, index in (("deltas", 2), ("base", 0)):
        state = handle.maps[name]
        update = state.updateValue

        def recorded(
            key: tuple, value: tuple, name: str = name, index: int = index, update: Any = update
        ) -> None:
            largest[name] = max(largest[name], len(value[index]))
            update(key, value)

        state.updateValue = recorded  # type: ignore[method-assign]
    return largest


def test_pyspark_40_alone_limits_a_state_values_bytes():
    assert [value_bytes_limit(v) for v in ("4.0.0", "4.0.5", "4.1.1", "4.2.0", "4.3.0")] == [
        STATE_SERVER_VALUE_BYTES,
        STATE_SERVER_VALUE_BYTES,
        None,
        None,
        None,
    ]


def test_a_worker_writes_no_value_its_state_server_cannot_read_whole():
    """As a worker builds it (the running PySpark's limit): 400 keys of 2 KB each, a delta
    and a base of 800 KB at one call, beyond PySpark 4.0's limit (the largest request
    its state server read whole on 4.0.0 was ~3 MB, and it read 2 MB in part)."""
    handle = StateHandle()
    register(handle, LAYOUT)
    largest = _largest_values(handle)
    limit = value_bytes_limit() or (1 << 40)
    keys = {f"k{i}": 1 for i in range(400)}
    one_call = StateLayout(DELTAS, 1_000, compact_bytes=1)  # a delta, then a base
    _call(handle, keys, one_call, value_bytes=value_bytes_limit(), key_state=b"x" * 2_000)
    assert 0 < max(largest.values()) <= limit
    assert _truth(handle) == keys


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_values_within_the_limit_hold_what_one_value_holds(seed):
    """Calls of a few keys of 40-400 bytes each, at a limit of 600 bytes: every value
    written is within it (a delta over it goes as several versions, a base in chunks of
    it), and the keys read back are the same as read by a worker of any PySpark, with
    its copy current, behind, or none (a checkpoint moved from 4.0 to a later release,
    or back: each reads what the other wrote)."""
    rng = random.Random(seed)
    handle, small = StateHandle(), StateLayout(DELTAS, 1_000, compact_bytes=2_000)
    register(handle, small)
    largest = _largest_values(handle)
    want: dict[str, int] = {}
    for step in range(60):
        changes: dict[str, int | None] = {}
        for _ in range(rng.randint(1, 12)):
            changes[f"k{rng.randint(0, 30)}"] = None if rng.random() < 0.2 else step
        limit = 600 if rng.random() < 0.7 else None  # a restart on another PySpark
        _call(handle, changes, small, value_bytes=limit, key_state=b"s" * rng.randint(40, 400))
        want = {k: v for k, v in {**want, **changes}.items() if v is not None}
        if rng.random() < 0.3:
            CACHE.clear()
        assert _read(handle, small) == want
    assert 0 < max(largest.values())
    assert _truth(handle) == want


def test_a_delta_over_the_limit_goes_as_several_versions_a_copy_behind_catches_up_with():
    handle = StateHandle()
    _call(handle, {"a": 1}, value_bytes=600)
    store = _meta(handle)[1]
    seen = CACHE.take(store)
    assert seen is not None
    behind = _Entry(seen.version, seen.token, dict(seen.keys))
    _call(handle, {f"k{i}": 2 for i in range(10)}, value_bytes=600, key_state=b"s" * 200)
    assert _meta(handle)[2] >= 4 and _meta(handle)[4] == 0  # versions, no compaction
    CACHE.take(store)
    CACHE.put(store, behind, LAYOUT.cache_keys)
    cold = _cold_reads(handle)
    assert _read(handle) == {"a": 1, **{f"k{i}": 2 for i in range(10)}}
    assert _cold_reads(handle) == cold


class _ServerReadInPart:
    """A ValueState whose update fails as PySpark 4.0's state server fails a large value."""

    def update(self, row: Any) -> None:
        raise PySparkRuntimeError("Error updating value state: invalid pickle opcode: 0")


@pytest.mark.parametrize("size", [100, 70_000])
def test_a_row_the_state_server_failed_is_refused_naming_the_fix(monkeypatch, size):
    """The row layout cannot split a group's row: where PySpark 4.0 fails one over its
    limit, the error names the release, the Spark issue and the ways out."""
    monkeypatch.setattr(bindings, "value_bytes_limit", lambda: STATE_SERVER_VALUE_BYTES)
    group = StoredGroup({"a": StoredKey(b"s" * size, 1)})
    if size < STATE_SERVER_VALUE_BYTES:
        with pytest.raises(PySparkRuntimeError):  # not this failure: as Spark said it
            bindings._OneRow(_ServerReadInPart(), 8).write(group)
        return
    with pytest.raises(SessionSetupError) as raised:
        bindings._OneRow(_ServerReadInPart(), 8).write(group)
    assert str(raised.value) == str(bindings.row_too_large(len(group.encode(8)[1])))
    assert str(bindings.row_too_large(70_123, "4.0.0")).startswith(
        "PySpark 4.0.0's state server failed to read a key group's state row of 70,123 bytes "
        "whole (SPARK-53870: Spark 4.0 may read a large state value in part; fixed in 4.1.0). "
        "Nothing of the failed micro-batch was committed: restart the query on PySpark 4.1 or "
        "later, or start it on a new checkpoint in the deltas state layout "
        "(spark.tidemark.streaming.stateLayout=deltas)"
    )


def test_a_key_over_the_limit_alone_is_written_in_a_new_base():
    """A key whose state alone passes the limit cannot be a delta: the call compacts,
    the base in chunks within the limit, and a copy behind reads the group cold."""
    handle = StateHandle()
    register(handle, LAYOUT)
    largest = _largest_values(handle)
    _call(handle, {"a": 1}, value_bytes=600)
    store = _meta(handle)[1]
    seen = CACHE.take(store)
    assert seen is not None
    behind = _Entry(seen.version, seen.token, dict(seen.keys))
    _call(handle, {"big": 2}, value_bytes=600, key_state=b"s" * 5_000)
    meta = _meta(handle)
    assert meta[4] == meta[2] == 2 and meta[6] >= 9  # a base at version 2, in chunks
    assert (2,) not in handle.maps["deltas"].rows
    assert max(largest.values()) <= 600
    CACHE.take(store)
    CACHE.put(store, behind, LAYOUT.cache_keys)
    cold = _cold_reads(handle)
    assert _read(handle) == {"a": 1, "big": 2}
    assert _cold_reads(handle) == cold + 1
    _call(handle, {"a": 3}, value_bytes=600)  # deltas again after it
    assert _meta(handle)[2] == 3 and _truth(handle) == {"a": 3, "big": 2}


# ---------------------------------------------------------------------- through the processor


def _processor(
    layout: StateLayout, pickled: bool = False
) -> tuple[WindowStatefulProcessor, StateHandle]:
    """A processor on a fake handle; ``pickled``: the copy a Spark task unpickles."""
    config = ProcessorConfig(
        spec=OperatorSpec(TumblingEventTimeWindows.of(100), window_logic(max)),
        time_mode="EventTime",
        value_names=("key", "v"),
        value_types=("StringType", "LongType"),
        value_positions=(0, 1),
        result_schema=StructType([StructField("v", LongType())]),
        result_to_row=lambda result, ts: (result[1],),
        spark_offset_ms=0,
        state_layout=layout,
    )
    processor, handle = WindowStatefulProcessor(config), StateHandle()
    if pickled:
        processor = pickle.loads(cloudpickle.dumps(processor))
    processor.init(handle)  # type: ignore[arg-type]
    return processor, handle


def _outputs(frames: Any) -> Counter:
    return Counter(tuple(r) for frame in frames for r in frame.itertuples(index=False))


def _random_calls(
    rng: random.Random, runs: dict[str, tuple[WindowStatefulProcessor, StateHandle]]
) -> dict[str, Counter]:
    """The same 40 calls (rows of 30 keys, a watermark moving on, the timers due) through
    each processor; the rows each emitted."""
    got: dict[str, Counter] = {name: Counter() for name in runs}
    watermark = 1_000
    seen: list[_Entry] = []
    for step in range(40):
        rows = [(f"k{rng.randint(0, 30)}", watermark + rng.randint(0, 300)) for _ in range(10)]
        frame = pd.DataFrame([(k, t, t) for k, t in rows], columns=["key", "v", TS], dtype=object)
        watermark += rng.randint(0, 60)
        for name, (processor, handle) in runs.items():
            values = TimerValues(watermark, step)
            got[name] += _outputs(processor.handleInputRows((0,), iter([frame.copy()]), values))  # type: ignore[arg-type]
            for expiry in sorted(t for t in handle.timers if t <= watermark):
                handle.timers.discard(expiry)
                got[name] += _outputs(processor.handleExpiredTimer((0,), values, _Expired(expiry)))  # type: ignore[arg-type]
        if "d" in runs:
            _other_worker(rng, runs["d"][1], seen)
    return got


@pytest.mark.parametrize("seed", [1, 2])
def test_the_deltas_layout_emits_what_the_row_layout_emits(seed):
    """The same calls through both layouts, with a compaction threshold that compacts
    often and copies lost at random."""
    small = StateLayout(DELTAS, 1_000, compact_bytes=256)
    runs = {name: _processor(layout) for name, layout in (("row", StateLayout(ROW)), ("d", small))}
    got = _random_calls(random.Random(seed), runs)
    assert got["row"] == got["d"] and sum(got["row"].values()) > 20
    assert runs["row"][1].timers == runs["d"][1].timers


@pytest.mark.parametrize("layout", [StateLayout(ROW), LAYOUT])
def test_a_processor_unpickled_as_in_a_task_runs_as_the_one_built(layout):
    """Spark's tasks run a copy unpickled from the driver's, whose configuration comes as
    bytes, loaded at its first call (``worker/processor.py``)."""
    runs = {"built": _processor(layout), "task": _processor(layout, pickled=True)}
    assert runs["task"][0]._config is None  # not loaded before a call
    got = _random_calls(random.Random(3), runs)
    assert got["built"] == got["task"] and sum(got["built"].values()) > 20
    assert runs["built"][1].timers == runs["task"][1].timers


_PLANNER = """
import pickle, sys
# PySpark's own modules of the shipped function (4.0's load numpy)
import pyspark.sql.streaming.stateful_processor
try:
    import pyspark.sql.streaming.stateful_processor_util
except ImportError:
    pass
heavy = ("pandas", "pyarrow", "numpy", "tidemark._engine", "tidemark.spark.protocol.codec")
def loaded():
    return {m for m in sys.modules if m.split(".")[0] in heavy or m in heavy}
pyspark_loads = loaded()
shipped = pickle.loads(sys.stdin.buffer.read())
registered = []
class Handle:
    def getValueState(self, name, schema):
        registered.append(("value", name, schema.simpleString()))
    def getMapState(self, name, key, value):
        registered.append(("map", name, key.simpleString(), value.simpleString()))
# the processor in the function Spark ships (4.1+), or the processor alone (4.0)
getattr(getattr(shipped, "__self__", None), "_stateful_processor", shipped).init(Handle())
print(sorted(loaded() - pyspark_loads))
print(registered)
"""


def _shipped(processor: WindowStatefulProcessor) -> Any:
    """What Spark pickles for the processor: the bound method of PySpark's own wrapper
    (4.1+); PySpark 4.0 has no wrapper class and ships a closure over the processor, so
    there the processor alone is pickled (its closure's other cells are PySpark's)."""
    try:
        from pyspark.sql.streaming.stateful_processor_util import (
            TransformWithStateInPandasUdfUtils,
        )
    except ImportError:  # PySpark 4.0
        return processor
    return TransformWithStateInPandasUdfUtils(processor, "EventTime").transformWithStateUDF


@pytest.mark.parametrize("layout", [StateLayout(ROW), LAYOUT])
def test_spark_plans_the_processor_without_pandas_or_the_engine(layout):
    """At a query's first micro-batch Spark unpickles the processor (in the function it
    ships) in a new Python process on the driver and runs only its ``init``, to learn
    its state variables: that process loads neither pandas, pyarrow nor the engine
    (beyond what PySpark's own stateful processor module loads: numpy on 4.0)."""
    processor, _ = _processor(layout)
    done = subprocess.run(
        [sys.executable, "-c", _PLANNER],
        input=cloudpickle.dumps(_shipped(processor)),
        capture_output=True,
        check=True,
        timeout=120,
    )
    loaded, registered = done.stdout.decode().splitlines()
    assert loaded == "[]"
    if layout.name == ROW:
        expected = [("value", "tidemark", STATE_SCHEMA.simpleString())]
    else:
        expected = [
            ("value", "meta", META_SCHEMA.simpleString()),
            ("map", "deltas", DELTA_KEY.simpleString(), DELTA_VALUE.simpleString()),
            ("map", "base", BASE_KEY.simpleString(), BASE_VALUE.simpleString()),
        ]
    assert registered == repr(expected)


def _other_worker(rng: random.Random, handle: StateHandle, seen: list[_Entry]) -> None:
    """As if the next call landed on another worker: keep a copy of the current entry,
    then at random leave the cache as it is, empty it, or put back an older copy."""
    meta = handle.values["meta"].row
    if meta is None:
        return
    entry = CACHE.take(meta[1])
    if entry is not None:
        seen.append(_Entry(entry.version, entry.token, dict(entry.keys)))
        CACHE.put(meta[1], entry, 1_000)
    draw = rng.random()
    if draw < 0.2:
        CACHE.clear()
    elif draw < 0.6 and seen:
        old = rng.choice(seen)
        CACHE.take(meta[1])
        CACHE.put(meta[1], _Entry(old.version, old.token, dict(old.keys)), 1_000)


class _Expired:
    def __init__(self, expiry: int) -> None:
        self.expiry = expiry

    def getExpiryTimeInMs(self) -> int:  # noqa: N802
        return self.expiry


# ---------------------------------------------------------------------- the keys' timers


def test_the_timers_kept_key_by_key_match_a_pass_over_the_keys():
    """Keys stored, changed and dropped at random: the group's earliest timers kept key
    by key (the deltas layout's) equal a pass over every key (the row layout's)."""
    rng = random.Random(3)
    kept = StoredGroup({}, timers=KeyTimers({}))
    for step in range(3_000):
        key = f"k{rng.randint(0, 40)}"
        old = kept.keys.get(key, NEW_KEY)
        if rng.random() < 0.25:
            new = None
        else:
            timer = rng.choice([None, rng.randint(0, 30)])
            new = StoredKey(None, step, 0, timer, rng.choice([None, rng.randint(0, 30)]))
        kept.replace(key, old, new)
        assert kept.earliest_timers() == StoredGroup(dict(kept.keys)).earliest_timers()
    assert kept.timers is not None and kept.keys


def test_a_copy_caught_up_by_deltas_keeps_its_timers_right():
    handle = StateHandle()
    state = DeltaState(register(handle, LAYOUT), 8, LAYOUT)
    group = state.read()
    for key, timer in (("a", 5), ("b", 3)):
        group.replace(key, NEW_KEY, StoredKey(None, 0, 0, timer))
    state.write(group)
    store = _meta(handle)[1]
    seen = CACHE.take(store)
    assert seen is not None and seen.timers is not None
    behind = _Entry(seen.version, seen.token, dict(seen.keys), KeyTimers(seen.keys))
    CACHE.put(store, seen, LAYOUT.cache_keys)
    state = DeltaState(register(handle, LAYOUT), 8, LAYOUT)
    group = state.read()
    group.replace("b", group.keys["b"], None)  # another worker drops the earliest
    group.replace("c", NEW_KEY, StoredKey(None, 0, 0, 9, 4))
    state.write(group)
    CACHE.take(store)
    CACHE.put(store, behind, LAYOUT.cache_keys)
    group = DeltaState(register(handle, LAYOUT), 8, LAYOUT).read()
    assert group.timers is behind.timers  # caught up, not rebuilt
    assert group.earliest_timers() == (5, 4)
