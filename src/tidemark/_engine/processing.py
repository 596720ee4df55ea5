"""The processing-time aligned path: the general path, but faster for
tumbling and sliding processing-time windows with the default trigger, fed runs of
elements at one processing time (a BATCH key's run, the clock read once for it; a
streaming call's run of one key, all at the micro-batch's processing time).

A processing-time assigner puts an element in the windows of the current processing
time, whatever the element; :class:`~tidemark.triggers.ProcessingTimeTrigger` registers
a processing-time timer at each window's end and fires there; a processing-time window's
cleanup time is that same end, and no processing-time window is late. So while the clock
stands still, the general path does the same for every element of a run: add it to the
windows of now, and register each window's end timer once (the first element does; the
others find it registered). This path computes the windows once per run and adds the
run's elements to them: the user's ``add`` (or reduce) sees the same calls in the same
order, the timers are registered in the same order, and firing is the core's. Results,
side outputs and state are the general path's (the property tests run both and
compare).
"""

from __future__ import annotations

from typing import Any

from tidemark._engine.contract import ElementPath, OperatorCore, RunPath
from tidemark._engine.paths import WindowPath
from tidemark._engine.spec import OperatorSpec
from tidemark.triggers.builtin import is_plain_processing_time_trigger

__all__ = [
    "ProcessingTimeAlignedPath",
    "processing_time_aligned_serve",
]


def processing_time_aligned_serve(spec: OperatorSpec, tracer: Any = None) -> bool:
    """Whether :class:`ProcessingTimeAlignedPath` serves ``spec``: fast paths on,
    tumbling or sliding processing-time windows (``aligned_layout()``), a trigger that
    behaves as :class:`~tidemark.triggers.ProcessingTimeTrigger` (it or a subclass
    overriding none of its callbacks), no evictor, no tracer (a trace records each
    element's calls)."""
    return (
        spec.fast_paths
        and tracer is None
        and spec.evictor is None
        and not spec.is_event_time
        and spec.assigner.aligned_layout() is not None
        and is_plain_processing_time_trigger(spec.window_trigger)
    )


class ProcessingTimeAlignedPath(WindowPath):
    """:class:`~tidemark._engine.paths.WindowPath`, but faster for runs of elements at
    one processing time in aligned processing-time windows."""

    serves_runs_at_one_processing_time = True  # see tidemark.spark.batch.worker

    def bind(self, op: OperatorCore) -> tuple[ElementPath, RunPath]:
        self.op = op
        return op.assign_and_add, self.process_elements

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """A run of ``key``'s elements with the windows of the current processing time
        computed once: each element is added to each of them in turn."""
        if not values:
            return
        op = self.op
        ks = op.key_state(key)
        try:
            windows = op.assigner.assign_windows(values[0], timestamps[0], op.clock)
        except Exception as exc:
            raise op.user_error("the window assigner", key, None, exc) from exc
        contents, register = ks.contents, op.processing_time_timers.register
        if len(windows) == 1:
            (window,) = windows
            contents[window] = op.fold(key, window, contents.get(window), values)
            register(key, ks, window.max_timestamp(), window)
            return
        for index, value in enumerate(values):
            for window in windows:
                contents[window] = op.fold(key, window, contents.get(window), (value,))
                if index == 0:  # the trigger's end timer, which is the cleanup timer
                    register(key, ks, window.max_timestamp(), window)
