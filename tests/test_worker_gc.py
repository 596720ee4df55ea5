"""The Python workers' garbage collector: raised once per Spark worker process, kept, and
left alone outside a Spark task (a test or a driver running the processor by hand)."""

from __future__ import annotations

import gc

import pytest

from tidemark.spark import worker_gc


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
    from spark_state_fakes import StateHandle, TimerValues

    from tidemark import TumblingEventTimeWindows
    from tidemark._engine.create import window_operator
    from tidemark._engine.functions import window_logic
    from tidemark.spark.columns import TS
    from tidemark.spark.streaming.worker.bindings import WindowStatefulProcessor
    from tidemark.spark.streaming.worker.config import ProcessorConfig

    config = ProcessorConfig(
        make_operator=lambda: window_operator(TumblingEventTimeWindows.of(100), window_logic(max)),
        time_mode="EventTime",
        value_names=("key", "v"),
        value_types=("LongType", "LongType"),
        value_positions=(0, 1),
        result_names=("v",),
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
