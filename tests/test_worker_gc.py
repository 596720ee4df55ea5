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
