"""Slices' runs as window contents: what the sliced path stores (a window's elements
in its slices, each a list of *runs*) turned into what the other paths store (each
window's contents). Below every path: the sliced path merges runs when a window fires,
and the others adopt a restored key's slices (:func:`unslice`). The layout of slices:
:mod:`tidemark._engine.slices`.
"""

from __future__ import annotations

from itertools import islice
from math import gcd
from operator import itemgetter
from typing import Any, Protocol

from tidemark._engine.functions import ReturnedNone, WindowLogic
from tidemark._engine.keystate import KeyState
from tidemark.time import LONG_MAX
from tidemark.windows import TimeWindow, Window

__all__ = ["merge_runs", "in_arrival_order", "unslice", "holds_slices"]

_SEQ = itemgetter(0)
# Accumulators no merge can change in place.
_IMMUTABLE = frozenset({int, float, complex, bool, str, bytes, type(None)})


class _Windows(Protocol):
    """What :func:`unslice` reads of an operator."""

    assigner: Any
    logic: WindowLogic

    def cleanup_time(self, window: Window) -> int: ...


def merge_runs(logic: WindowLogic, parts: list[Any]) -> Any:
    """Runs' contents (in arrival order) as one window's contents. A stored run is
    handed to a merge that may reuse its first argument only where it cannot change
    (an immutable accumulator)."""
    if logic.keeps_elements:
        return [value for run in parts for value in run]
    aggregate = logic.aggregate
    if aggregate is not None:
        merge, merged = aggregate.merge, parts[0]
        if type(merged) not in _IMMUTABLE:
            merged = merge(aggregate.create_accumulator(), merged)
        for run in islice(parts, 1, None):
            if (merged := merge(merged, run)) is None:
                raise ReturnedNone("returned None")
        return merged
    reduce, merged = logic.reduce, parts[0]
    for run in islice(parts, 1, None):
        if (merged := reduce(merged, run)) is None:
            raise ReturnedNone("returned None")
    return merged


def in_arrival_order(slices: list[Any]) -> list[Any]:
    """The contents of every run of ``slices`` (``[seq, contents, ...]`` each), in
    arrival order."""
    pairs: list[tuple[int, Any]] = []
    for runs in slices:
        pairs.extend(zip(islice(runs, 0, None, 2), islice(runs, 1, None, 2)))
    pairs.sort(key=_SEQ)
    return [run for _, run in pairs]


def holds_slices(ks: KeyState) -> bool:
    """Whether ``ks`` keeps slices (int keys) among its contents: the sliced path's."""
    return any(not isinstance(state, Window) for state in ks.contents)


def unslice(operator: _Windows, ks: KeyState) -> None:
    """Turn the slices in ``ks`` into the contents of the windows they serve, as the
    unsliced paths keep them: state the sliced path wrote, restored where fast paths
    are off. The windows served are those with a timer pending (a window keeps its
    cleanup timer until it is cleaned up), or that are never cleaned up."""
    layout = operator.assigner.aligned_layout()
    if layout is None:
        return
    contents: dict[Any, Any] = ks.contents
    slices = {s: runs for s, runs in contents.items() if not isinstance(s, Window)}
    for start in slices:
        del contents[start]
    size, slide, _ = layout
    width, pending = gcd(size, slide), {window for _, window in ks.event_timers}
    windows = set()
    for start in slices:
        window_start = layout.last_start(start)
        while window_start + size >= start + width:
            window = TimeWindow(window_start, window_start + size)
            if window in pending or operator.cleanup_time(window) == LONG_MAX:
                windows.add(window)
            window_start -= slide
    ordered = sorted(slices)
    for window in windows:
        held = [slices[s] for s in ordered if window[0] <= s < window[1]]
        if held:
            contents[window] = merge_runs(operator.logic, in_arrival_order(held))
