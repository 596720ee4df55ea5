"""The merging window set: which window holds the state of each in-flight window.

Contract (Flink's ``MergingWindowSet``): every in-flight window of a key maps to a
*state window*, the namespace that holds its contents. When windows merge, the merge
result maps to the state window of one of the merged windows, and the other state
windows are folded into it; data never moves to a namespace named after the result.
The ``mapping`` dict is owned by the key's state, so it is snapshotted with it.

Flink iterates Java ``HashSet``s here; which merged window lends its state window, and
so the order of a merged list's elements, follows Java's hash order. :func:`java_hash_order`
reproduces it for :class:`~tidemark.windows.TimeWindow`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, cast

from tidemark.assigners import merges_by_sweep
from tidemark.windows import TimeWindow, Window

__all__ = ["MergingWindowSet", "MergeFunction", "java_hash_order", "keeps_equal_windows"]

MergeFunction = Callable[[Window, list[Window], Window, list[Window]], None]
"""``(merge_result, merged_windows, state_window_of_result, merged_state_windows)``."""


def _capacity(size: int) -> int:
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def java_hash_order(windows: Collection[Window], capacity: int | None = None) -> list[Window]:
    """The order in which a Java ``HashSet`` holding ``windows`` iterates them.

    Buckets are ``spread(hashCode) & (capacity - 1)``; within a bucket, insertion order.

    >>> from tidemark.windows import TimeWindow
    >>> java_hash_order([TimeWindow(0, 3), TimeWindow(2, 5)])
    [TimeWindow[2, 5), TimeWindow[0, 3)]
    """
    mask = (capacity or _capacity(len(windows))) - 1

    def bucket(window: Window) -> int:
        h = window.java_hash_code()
        return (h ^ (h >> 16)) & mask

    return sorted(windows, key=bucket)


def keeps_equal_windows(assigner: Any) -> bool:
    """Whether a window equal to an in-flight one keeps that window's state window
    (a dynamic-gap session assigner's ``keep_all_elements=True``), where Flink maps it
    to itself and so to a fresh, empty state."""
    return getattr(assigner, "keep_all_elements", None) is True


class MergingWindowSet:
    """Tracks a key's in-flight merging windows and their state windows."""

    __slots__ = ("_assigner", "mapping", "merges_one_by_sweep", "keeps_equal_windows")

    def __init__(self, assigner: Any, mapping: dict[Window, Window]):
        self._assigner = assigner
        self.mapping = mapping
        # A session assigner's set holding one window (one open session: the common
        # case) adds a window without sorting, hashing or building lists.
        self.merges_one_by_sweep = merges_by_sweep(assigner)
        # Flink maps a window equal to an in-flight one to itself, losing the state
        # window it had (its contents); a dynamic-gap session may ask to keep it.
        self.keeps_equal_windows = keeps_equal_windows(assigner)

    def get_state_window(self, window: Window) -> Window | None:
        """The namespace holding ``window``'s contents, or None if it is not in flight."""
        return self.mapping.get(window)

    def retire_window(self, window: Window) -> None:
        """Forget ``window`` (its state was cleared, or it is late and never got any)."""
        if self.mapping.pop(window, None) is None:
            raise RuntimeError(f"window {window!r} is not in the in-flight window set")

    def add_window(self, new_window: Window, merge_function: MergeFunction) -> Window:
        """Add ``new_window``, merging as the assigner says; return the window it ended in.

        ``merge_function`` runs once per merge, before the mapping is final for the
        merged windows' state to be folded into the result's state window.
        """
        if self.merges_one_by_sweep and len(self.mapping) == 1:
            return self._add_to_one(cast(TimeWindow, new_window), merge_function)
        results: list[tuple[Window, list[Window]]] = []
        windows = [*self.mapping, new_window]
        self._assigner.merge_windows(
            windows, lambda merged, result: results.append((result, merged))
        )
        result_window = new_window
        merged_new_window = False
        for merge_result, to_merge in _in_java_order(results):
            merged = java_hash_order(to_merge)
            if new_window in merged:
                merged.remove(new_window)
                merged_new_window = True
                result_window = merge_result
            state_window_result = self.mapping[merged[0]]
            merged_state_windows = [self.mapping.pop(w) for w in merged if w in self.mapping]
            self.mapping[merge_result] = state_window_result
            merged_state_windows.remove(state_window_result)
            if not (len(merged) == 1 and merged[0] == merge_result):
                merge_function(merge_result, merged, state_window_result, merged_state_windows)
        if not results or (result_window == new_window and not merged_new_window):
            if not (self.keeps_equal_windows and result_window in self.mapping):
                self.mapping[result_window] = result_window
        return result_window

    def _add_to_one(self, new_window: TimeWindow, merge_function: MergeFunction) -> Window:
        """:meth:`add_window` for a set of one TimeWindow merged by sort-and-sweep, step
        by step the same: the two windows merge into their cover when they intersect
        and differ; the merged list is the other window alone (whatever Java's order of
        the pair), whose state window the cover takes; the merge is reported unless the
        cover is that window. Otherwise the new window maps to itself, as there (an
        equal one included, as in Flink, unless the set keeps equal windows)."""
        mapping = self.mapping
        (window,) = cast("dict[TimeWindow, Window]", mapping)
        if window == new_window and self.keeps_equal_windows:
            return window
        if window == new_window or not (window[0] <= new_window[1] and window[1] >= new_window[0]):
            mapping[new_window] = new_window
            return new_window
        cover = TimeWindow(min(window[0], new_window[0]), max(window[1], new_window[1]))
        state_window = mapping.pop(window)
        mapping[cover] = state_window
        if cover != window:
            merge_function(cover, [window], state_window, [])
        return cover


def _in_java_order(
    results: list[tuple[Window, list[Window]]],
) -> list[tuple[Window, list[Window]]]:
    if len(results) < 2:
        return results
    by_window = {result: merged for result, merged in results}
    return [(w, by_window[w]) for w in java_hash_order(list(by_window))]
