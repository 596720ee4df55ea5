"""Python's garbage collector in a Spark worker that turns batches of rows into objects."""

from __future__ import annotations

import functools
import gc
import itertools

from pyspark import TaskContext

__all__ = ["fewer_gc_passes", "freeze_survivors"]


def fewer_gc_passes() -> None:
    """Run Python's cyclic garbage collector less often in this Spark worker process,
    from the first call on (later calls, and calls outside a Spark task, do nothing).

    By default it scans after every 700 net allocations, which costs a task that turns
    rows into Python objects a third of its time and frees nothing (Rows, accumulators
    and key states form no cycles). What the worker has loaded by then (PySpark, pandas,
    tidemark, the user's functions) is frozen: no pass walks it again. Cycles are still
    collected, later.

    Set once and kept, not restored after each call: restoring it put every loaded
    object back among those the collector walks, and PySpark's own code between the
    calls ran with the default threshold (measured with ``gc.callbacks`` in the workers;
    the figures are in benchmarks/README.md). A worker runs the
    tasks of one application; Python functions it runs later keep the setting.
    """
    if TaskContext.get() is not None:
        _set_once()


@functools.cache
def _set_once(young: int = 50_000) -> None:
    before = gc.get_threshold()
    gc.set_threshold(max(young, before[0]), *before[1:])
    gc.freeze()


def freeze_survivors() -> None:
    """After a streaming call, where :func:`fewer_gc_passes` took effect: free what the
    call left in reference cycles, then freeze what survives it.

    What survives a call is mostly the state a worker keeps between calls (the deltas
    layout's cache of key groups: a tuple per live key, which the collector can never
    free), yet every pass of the older generations walked it: at 1.8M live keys about a
    second a pass, a tenth of the calls' time (benchmarks/README.md). Frozen, an object
    is still freed by reference counting once dropped, and no pass walks it. An object
    frozen and later dropped in a cycle would wait: every :data:`THAW_EVERY` calls
    everything is thawed and collected once.
    """
    if not _set_once.cache_info().currsize:
        return
    if next(_CALLS) % THAW_EVERY == 0:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


THAW_EVERY = 1_000
"""Calls between two collections of everything (:func:`freeze_survivors`)."""

_CALLS = itertools.count(1)
