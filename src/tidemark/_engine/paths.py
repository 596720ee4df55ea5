"""Paths: how elements reach a key's windows, how due windows are taken, and how a
window's contents are stored. The window operator holds one, chosen once
(:func:`~tidemark._engine.create.create_window_operator`).

:class:`WindowPath` is the general path, serving every pipeline through the core's own
helpers (the assigner, the merging window set, the trigger driver). A fast path
subclasses it and is *the same, but faster* for the pipelines it serves (as Beam's
specialised trigger drivers are): its element callable and run callable, bound once in
:meth:`WindowPath.bind`, place elements without the general path's per-element calls,
and where it takes due windows itself it names its own event-time timer callback
(:attr:`WindowPath.on_event_timer`). A property test runs each against the general
path on random pipelines and compares every observable (``tests/engine/test_fast_paths.py``
and friends). How to add one: ``docs/internals.md``.
"""

from __future__ import annotations

from typing import Any

from tidemark._engine.contract import ElementPath, OperatorCore, RunPath
from tidemark._engine.keystate import KeyState
from tidemark._engine.slice_runs import holds_slices, unslice
from tidemark._engine.timers import OnTimer
from tidemark._engine.triggering import FlinkTriggers

__all__ = ["WindowPath"]


class WindowPath:
    """The general path: each element through the assigner, the merging window set (for
    merging assigners), the trigger driver and the core's helpers.

    A fast path overrides what it serves faster; everything else is this class's, so
    a fast path hands an element it does not serve to ``op.assign_and_add`` (or
    ``op.add_assigned``, once it asked the assigner).
    """

    #: The trigger driver under a Flink trigger (a Dataflow trigger always takes
    #: :class:`~tidemark._engine.panes.PaneDriver`).
    trigger_driver: type[FlinkTriggers] = FlinkTriggers
    #: Whether a caller reading a wall clock may read it once per run of a key's
    #: elements and hand the run to ``process_elements`` (the processing-time aligned
    #: path; see ``tidemark.spark.batch.worker``).
    serves_runs_at_one_processing_time = False
    #: The event-time timer callback of a path that takes its due windows itself (its
    #: firings register no timer, so the service takes them in bulk); None: the core's.
    on_event_timer: OnTimer | None = None

    op: OperatorCore

    def bind(self, op: OperatorCore) -> tuple[ElementPath, RunPath]:
        """Called once, when ``op`` is made with this path (its timer services and
        driver exist): ``(process_element, process_elements)``, with what they read
        bound. A path serves the one operator it is bound to."""
        self.op = op
        return op.assign_and_add, op.run_element_by_element

    # ------------------------------------------------------------------ key state

    def restored(self, key: Any, ks: KeyState) -> None:
        """``ks`` is about to become ``key``'s state (a restore): adopt its contents.
        Slices the sliced path wrote become window contents here."""
        if holds_slices(ks):
            unslice(self.op, ks)

    def evicted(self, key: Any) -> None:
        """``key``'s state leaves memory (the operator's ``evict_key``)."""

    def forgot_all(self) -> None:
        """Every key's state goes (the operator's ``forget_all_keys``)."""

    # ------------------------------------------------------------------ inspection

    def num_state_entries(self, ks: KeyState) -> int:
        """``ks``'s state entries as Flink's harness counts them (one per window
        holding contents, however they are stored)."""
        return ks.num_state_entries()

    def window_contents(self, key: Any, ks: KeyState) -> dict[Any, Any]:
        """What each window of ``key`` holding contents holds (by state window)."""
        return dict(ks.contents)
