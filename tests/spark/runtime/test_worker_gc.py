"""The Python workers' garbage collector: raised once per Spark worker process, kept, and
left alone outside a Spark task (a test or a driver running the processor by hand); after
a streaming call, the call's cycles freed and what it kept frozen, thawed now and then."""

from __future__ import annotations

import gc
import itertools
import weakref

import pytest

from tidemark.spark.runtime import worker_gc


@pytest.fixture
def restored_gc():
    before = gc.get_threshold()
    worker_gc._set_once.cache_clear()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)
    worker_gc._set_once.cache_clear()


def test_outside_a_spark_task_nothing_changes(restored_gc):
    before = gc.get_threshold()
    worker_gc.fewer_gc_passes()
    assert gc.get_threshold() == before


def test_in_a_task_the_setting_is_made_once_and_kept(restored_gc, monkeypatch):
    monkeypatch.setattr(worker_gc.TaskContext, "get", staticmethod(lambda: object()))
    gc.set_threshold(700, 10, 10)
    worker_gc.fewer_gc_passes()
    assert gc.get_threshold() == (50_000, 10, 10)
    assert gc.get_freeze_count() > 0
    gc.set_threshold(700, 10, 10)  # a later call does not set it again
    worker_gc.fewer_gc_passes()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_streaming_call_leaves_its_keys_state_to_reference_counting():
    """A call's window operators are in reference cycles (path and timers call back into
    them): released at the call's end, the key states they held are freed at once, not
    left for the cyclic collector to walk (the keys' states of 1,000 keys here)."""
    import pandas as pd
    from pyspark.sql.types import LongType, StructField, StructType
    from spark_state_fakes import StateHandle, TimerValues

    from tidemark import TumblingEventTimeWindows
    from tidemark._engine.functions import window_logic
    from tidemark._engine.spec import OperatorSpec
    from tidemark.spark.protocol.columns import TS
    from tidemark.spark.streaming.worker.config import ProcessorConfig
    from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor

    config = ProcessorConfig(
        spec=OperatorSpec(TumblingEventTimeWindows.of(100), window_logic(max)),
        time_mode="EventTime",
        value_names=("key", "v"),
        value_types=("LongType", "LongType"),
        value_positions=(0, 1),
        result_schema=StructType([StructField("v", LongType())]),
        result_to_row=lambda result, ts: (result[1],),
        spark_offset_ms=0,
    )
    processor, handle = WindowStatefulProcessor(config), StateHandle()
    processor.init(handle)  # type: ignore[arg-type]
    frame = pd.DataFrame(
        [(k, k, 500) for k in range(1_000)], columns=["key", "v", TS], dtype=object
    )
    gc.collect()
    gc.disable()
    try:
        list(processor.handleInputRows((0,), iter([frame]), TimerValues(0)))  # type: ignore[arg-type]
        assert gc.collect() < 200
    finally:
        gc.enable()


class _Node:
    me: object = None


def test_after_a_call_its_cycles_are_freed_and_what_survives_is_frozen(restored_gc, monkeypatch):
    monkeypatch.setattr(worker_gc.TaskContext, "get", staticmethod(lambda: object()))
    monkeypatch.setattr(worker_gc, "_CALLS", itertools.count(1))
    worker_gc.fewer_gc_passes()
    kept = [[n] for n in range(1_000)]  # what a call keeps (a cache)
    node = _Node()
    node.me = node
    dropped = weakref.ref(node)
    del node
    assert _walked(kept) == len(kept)
    worker_gc.freeze_survivors()
    assert dropped() is None
    assert _walked(kept) == 0  # frozen: no pass of any generation walks them


def _walked(objects: list) -> int:
    """How many of ``objects`` a collector pass walks (frozen ones are in none of the
    generations ``gc.get_objects`` lists). Counted by identity, not by the freeze count,
    which other objects freed meanwhile also lower."""
    tracked = {id(o) for o in gc.get_objects()}
    return sum(id(o) in tracked for o in objects)


def test_a_frozen_cycle_dropped_later_is_freed_at_the_next_thaw(restored_gc, monkeypatch):
    monkeypatch.setattr(worker_gc.TaskContext, "get", staticmethod(lambda: object()))
    monkeypatch.setattr(worker_gc, "_CALLS", itertools.count(1))
    monkeypatch.setattr(worker_gc, "THAW_EVERY", 3)
    worker_gc.fewer_gc_passes()
    node = _Node()
    node.me = node
    dropped = weakref.ref(node)
    worker_gc.freeze_survivors()  # call 1: frozen alive
    del node
    gc.collect()
    assert dropped() is not None  # no pass sees a frozen object
    worker_gc.freeze_survivors()  # call 2
    assert dropped() is not None
    worker_gc.freeze_survivors()  # call 3: everything thawed and collected
    assert dropped() is None


def test_outside_a_spark_task_nothing_is_frozen(restored_gc):
    frozen = gc.get_freeze_count()
    worker_gc.freeze_survivors()
    assert gc.get_freeze_count() == frozen
