"""The facts of an explanation: frozen values a test or a notebook reads, JSON-able.

An :class:`Explanation` is one key's answer to "why did this window (not) fire?": the
windows its elements went into (:class:`WindowFact`), each firing (:class:`FiringFact`),
what an unfired window waits for (:class:`WaitFact`) and what became of every element
(:class:`ElementFact`). Every fact is computed by replaying the key's events through
the engine (:mod:`tidemark.explain.replay`), never inferred from a description of the
pipeline. ``to_dict()`` gives plain JSON values; :meth:`Explanation.text` the answer a
person reads. The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from tidemark.explain.events import PartitionState

__all__ = [
    "FATES",
    "WINDOW_STATUSES",
    "FIRING_CAUSES",
    "WAIT_KINDS",
    "Bounds",
    "WaitFact",
    "FiringFact",
    "WindowFact",
    "ElementFact",
    "Explanation",
]

#: What became of an element, exactly one per element.
FATES = (
    "in_result",  # in at least one firing's results
    "late_side_output",  # late: sent to the late-data side output
    "late_dropped",  # late: counted in num_late_records_dropped
    "skipped",  # in no window at all (a gap between sampling windows); counted as dropped
    "evicted",  # removed by the evictor before any result saw it
    "open",  # in a window that has not fired it yet
    "purged",  # its window's contents went (PURGE, or cleanup) without a result of it
)
WINDOW_STATUSES = ("fired", "open", "purged", "merged")
FIRING_CAUSES = (
    "event_time_timer",  # the watermark reached a timer (the window's end, or another)
    "element",  # the trigger fired on an element (a count, a delta, a custom rule)
    "late_element",  # an element within the allowed lateness came to a window past its end
    "processing_time_timer",  # the processing-time clock reached a timer
    "end_of_input",  # the input ended: the watermark jumped to +inf
)
WAIT_KINDS = (
    "event_time_timer",  # the watermark must reach the window's timer
    "input_not_ended",  # ... but no input reached past it yet: later data or the end must come
    "count",  # the trigger's count is k of n
    "processing_time_timer",  # the processing-time clock must reach a timer
    "element",  # an element the trigger fires on (DeltaTrigger, a user's trigger)
    "no_trigger",  # the trigger never fires (GlobalWindows' default NeverTrigger)
)

Bounds = tuple["int | None", "int | None"]
"""``(start, end)`` of a window, half-open; ``(None, None)`` for the global window."""


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, PartitionState):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return str(value)


class _Fact:
    """``to_dict()`` for the frozen facts: every field, as plain JSON values."""

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: _plain(getattr(self, f.name))
            for f in fields(self)  # type: ignore[arg-type]
            if f.metadata.get("json", True)
        }


@dataclass(frozen=True)
class WaitFact(_Fact):
    """What an open window waits for before it fires.

    ``kind`` is one of :data:`WAIT_KINDS`:

    - ``event_time_timer``: the watermark must reach ``timer`` (it is at ``watermark``,
      ``gap`` ms short); ``holder`` the partition holding the watermark (None: a single
      input), ``idleness`` whether idleness is on (None: not known);
    - ``input_not_ended``: the same timer, but no input has reached past it yet
      (``max_event_time``): a watermark that moves with the data will not reach it until
      later data come, or the input ends;
    - ``count``: the trigger's count is ``count`` of ``count_of``;
    - ``processing_time_timer``: the processing-time clock must reach ``timer``;
    - ``no_trigger``: the window's trigger never fires it (a global window with the
      default ``NeverTrigger``).
    """

    kind: str
    detail: str
    timer: int | None = None
    watermark: int | None = None
    gap: int | None = None
    count: int | None = None
    count_of: int | None = None
    max_event_time: int | None = None
    holder: PartitionState | None = None
    idleness: bool | None = None


@dataclass(frozen=True)
class FiringFact(_Fact):
    """One firing of a window: when, why, and what it emitted.

    ``index`` counts the key's firings from 0; ``arrival`` is the element whose
    processing caused it (None: a clock did), ``elements_seen`` how many of the key's
    elements had arrived, ``batch`` the micro-batch (None outside a stream);
    ``timing`` is ``early`` / ``on_time`` / ``late`` (Beam's pane timing; a Dataflow
    trigger's own pane) and ``pane`` the window's firing index; ``cause`` one of
    :data:`FIRING_CAUSES` with ``detail`` in words; ``elements`` the arrival indexes of
    the elements the window function saw; ``results`` the emitted values as text,
    ``values`` the values themselves (not in ``to_dict``).
    """

    index: int
    window: Bounds
    arrival: int | None
    elements_seen: int
    batch: int | None
    watermark: int
    processing_time: int
    timing: str
    pane: int
    cause: str
    detail: str
    elements: tuple[int, ...]
    results: tuple[str, ...]
    retraction: bool = False
    values: tuple[Any, ...] = field(default=(), compare=False, repr=False, metadata={"json": False})


@dataclass(frozen=True)
class WindowFact(_Fact):
    """A window the key's elements went into.

    ``status`` is one of :data:`WINDOW_STATUSES`: ``fired`` (every element it holds was in
    a result), ``open`` (it holds elements not yet fired: see ``waiting``), ``purged``
    (its contents went without a result of them) or ``merged`` (a session merged into
    ``merged_into``). ``elements`` are the arrival indexes of the elements it got (a
    session: those of the windows merged into it too); ``firings`` the indexes of its
    firings (retractions included); ``cleanup_time`` when its state goes (end - 1 +
    allowed lateness in event time; None: never); ``pending`` the elements an open
    window holds that no result saw yet; ``waiting`` what it waits for first, ``waits``
    all it waits for.
    """

    window: Bounds
    status: str
    elements: tuple[int, ...]
    firings: tuple[int, ...]
    cleanup_time: int | None
    waiting: WaitFact | None = None
    waits: tuple[WaitFact, ...] = ()
    pending: tuple[int, ...] = ()
    merged_into: Bounds | None = None
    merged_from: tuple[Bounds, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class ElementFact(_Fact):
    """One element of the key and its fate (one of :data:`FATES`).

    ``arrival`` is its index among the key's elements; ``watermark`` and
    ``processing_time`` the clocks when it arrived; ``windows`` the windows it went into
    (a session's final one after merges), ``firings`` the firings whose function saw it;
    ``late_windows`` the windows it belonged to that were already past their cleanup
    time (a late element), ``evicted_by`` the evictor (``before`` / ``after`` the
    function in ``evicted_when``), ``merged_into`` the session its window merged into.
    """

    arrival: int
    timestamp: int | None
    label: str
    batch: int | None
    watermark: int
    processing_time: int
    fate: str
    detail: str
    windows: tuple[Bounds, ...] = ()
    firings: tuple[int, ...] = ()
    late_windows: tuple[Bounds, ...] = ()
    evicted_by: str | None = None
    evicted_when: str | None = None
    merged_into: Bounds | None = None


@dataclass(frozen=True)
class Explanation(_Fact):
    """Why each window of one key fired or not, and what became of each element.

    ``watermark`` and ``processing_time`` are the clocks at the end of the events;
    ``partitions`` the input partitions' watermarks given, ``holder`` the one holding
    the watermark (the lowest not idle; None for a single input); ``focus_window`` and
    ``focus_timestamp`` what the question was about (``text()`` leads with them).
    """

    key: Any
    mode: str
    watermark: int
    processing_time: int
    ended: bool
    windows: tuple[WindowFact, ...]
    elements: tuple[ElementFact, ...]
    firings: tuple[FiringFact, ...]
    partitions: tuple[PartitionState, ...] = ()
    holder: PartitionState | None = None
    idleness: bool | None = None
    allowed_lateness: int = 0
    pipeline: str = ""
    focus_window: Bounds | None = None
    focus_timestamp: int | None = None
    time_range: tuple[int, int] | None = None
    time_zone: str | None = None
    trace: dict[str, Any] | None = field(
        default=None, compare=False, repr=False, metadata={"json": False}
    )

    def window(self, start: int | None, end: int | None) -> WindowFact:
        """The fact of the window ``[start, end)`` (``(None, None)``: the global one);
        :class:`~tidemark.errors.ExplainError` when it is not one of the key's."""
        for fact in self.windows:
            if fact.window == (start, end):
                return fact
        from tidemark.errors import ExplainError

        known = ", ".join(_bounds_text(w.window) for w in self.windows) or "none"
        raise ExplainError(
            f"`window` must be one of key {self.key!r}'s windows ({known}); got "
            f"{_bounds_text((start, end))}"
        )

    def elements_at(self, timestamp: int) -> tuple[ElementFact, ...]:
        """The key's elements with ``timestamp``, in arrival order."""
        return tuple(e for e in self.elements if e.timestamp == timestamp)

    def text(self) -> str:
        """The answer in words: per window and element, the verdict first, then the facts."""
        from tidemark.explain.text import explanation_text

        return explanation_text(self)

    def picture(self, path: Any) -> Any:
        """Draw the key's timeline to ``path`` (``.png`` or ``.html``) with the focused
        window and the holding watermark marked; return the path written."""
        from tidemark.explain.picture import draw_explanation

        return draw_explanation(self, path)

    def __str__(self) -> str:
        return self.text()


def _bounds_text(bounds: Bounds) -> str:
    start, end = bounds
    return "the global window" if start is None else f"[{start}, {end})"
