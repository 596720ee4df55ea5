"""Panes: what a firing of a window is, in the Dataflow model's terms.

Each time a window fires under a Dataflow trigger (:mod:`tidemark.triggers.dataflow`)
its result is one *pane*. :class:`PaneInfo` says which: early (before the watermark
passed the window's end), on time (the watermark's own firing), or late (after it), its
index among the window's panes, and whether it is the last. :class:`AccumulationMode`
says how a pane relates to the panes before it. The guide: ``docs/panes.md``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "PaneTiming",
    "PaneInfo",
    "AccumulationMode",
    "PanedResult",
    "PANE_COLUMNS",
    "RETRACTION_COLUMN",
]


class PaneTiming(enum.Enum):
    """When a pane fired, relative to the watermark passing its window's end.

    >>> PaneTiming.ON_TIME.name
    'ON_TIME'
    """

    EARLY = "EARLY"
    ON_TIME = "ON_TIME"
    LATE = "LATE"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class PaneInfo:
    """One firing of one window, as Beam's ``PaneInfo``.

    Attributes
    ----------
    is_first : bool
        The window's first pane (``index == 0``).
    is_last : bool
        The window's last pane: its trigger finished, or the window expired with
        elements no pane had emitted.
    timing : PaneTiming
    index : int
        The pane's position among the window's panes, from 0 (a session window that
        merged starts again from 0).
    non_speculative_index : int
        The position among the window's on-time and late panes, from 0; -1 for an
        early pane.

    A Flink trigger keeps no pane record: its firings see :attr:`PaneInfo.UNKNOWN`
    (Beam's ``NO_FIRING``: timing UNKNOWN, first and last, index 0).
    """

    is_first: bool
    is_last: bool
    timing: PaneTiming
    index: int
    non_speculative_index: int

    UNKNOWN: Any = None  # set below: the pane of a firing without pane record

    @property
    def nonspeculative_index(self) -> int:
        """Beam Python's spelling of :attr:`non_speculative_index`."""
        return self.non_speculative_index

    def __repr__(self) -> str:
        return (
            f"PaneInfo({self.timing.name}, index={self.index}, "
            f"non_speculative_index={self.non_speculative_index}, "
            f"is_first={self.is_first}, is_last={self.is_last})"
        )


PaneInfo.UNKNOWN = PaneInfo(True, True, PaneTiming.UNKNOWN, 0, 0)


class AccumulationMode(enum.Enum):
    """How a window's panes relate to each other.

    DISCARDING
        A pane holds only the elements that arrived since the previous pane (the
        default for Dataflow triggers).
    ACCUMULATING
        A pane holds every element of the window so far.
    RETRACTING
        As ACCUMULATING, and each pane after the first is preceded by a retraction
        of the previous pane's result (the same rows, flagged), so a consumer that
        adds results up stays correct across corrections.
    """

    DISCARDING = "DISCARDING"
    ACCUMULATING = "ACCUMULATING"
    RETRACTING = "RETRACTING"


class PanedResult(NamedTuple):
    """A window result with the pane it came from (the Spark modes' output value)."""

    value: Any
    pane: PaneInfo
    is_retraction: bool


# The columns a Dataflow-triggered window adds to its results on Spark.
PANE_COLUMNS = ("pane_timing", "pane_index", "pane_is_last")
RETRACTION_COLUMN = "is_retraction"
