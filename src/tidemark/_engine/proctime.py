"""The processing-time runs operator: the general window operator, but faster for a run of
one key's elements in processing-time tumbling windows under the default trigger.

Every element of a run arrives at the same processing time, so the assigner gives each
the same window, and :class:`~tidemark.triggers.ProcessingTimeTrigger` registers the
same timer at its end for each (the cleanup timer is that timer too): after the first
element, the general path only adds the element to the window's contents. This operator
assigns the window once, adds the run's elements in order (the user's function sees
exactly the calls of the per-element path), and registers the timers once, in the
general path's order. Everything else (timers firing, restoring, snapshots) is the
general operator's. The results, side outputs, counts and state left are the general
operator's (``tests/test_processing_time_runs.py`` runs both and compares).
"""

from __future__ import annotations

from typing import Any

from tidemark._engine.keystate import KeyState
from tidemark._engine.operator import WindowOperator
from tidemark._engine.spec import OperatorSpec
from tidemark.triggers.builtin import is_plain_processing_time_trigger
from tidemark.windows import Window

__all__ = ["ProcessingTimeRunOperator", "processing_time_runs_serve"]


def processing_time_runs_serve(spec: OperatorSpec, tracer: Any = None) -> bool:
    """Whether :class:`ProcessingTimeRunOperator` serves ``spec``: fast paths on,
    processing-time tumbling windows of the assigner's own layout, a
    :class:`~tidemark.triggers.ProcessingTimeTrigger` that overrides no callback, no
    evictor, no tracer."""
    if not spec.fast_paths or spec.is_event_time or spec.evictor is not None:
        return False
    if tracer is not None or not is_plain_processing_time_trigger(spec.window_trigger):
        return False
    layout = spec.assigner.aligned_layout()
    return layout is not None and layout.size_ms == layout.slide_ms


class ProcessingTimeRunOperator(WindowOperator):
    """:class:`WindowOperator`, but a run of elements (:meth:`process_elements`) is
    assigned its window and given its timers once (see the module docstring)."""

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> None:
        """:meth:`WindowOperator.process_elements`: the first element as the general
        operator takes it (window, contents, the trigger's timer, the cleanup timer),
        the others only added to the same window's contents, in order."""
        if not values:
            return
        self.process_element(key, values[0], timestamps[0])
        if len(values) == 1:
            return
        ks = self.keys.get(key)
        if ks is None:  # not kept (never, for a window just added to): as the general path
            super().process_elements(key, values[1:], timestamps[1:])
            return
        try:
            (window,) = self.assigner.assign_windows(values[0], timestamps[0], self._clock)
        except Exception as exc:
            raise self._user_error("the window assigner", key, None, exc) from exc
        self._fold_into(key, ks, window, values, 1)

    def _fold_into(
        self, key: Any, ks: KeyState, window: Window, values: list[Any], start: int
    ) -> None:
        """Add ``values[start:]`` to ``window``'s contents, one ``add`` call each."""
        add, contents = self.logic.add, ks.contents
        current = contents.get(window)
        try:
            for index in range(start, len(values)):
                current = add(current, values[index])
        except Exception as exc:
            raise self._user_error("the reduce/aggregate function", key, window, exc) from exc
        finally:
            contents[window] = current
