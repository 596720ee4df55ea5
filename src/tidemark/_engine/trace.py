"""Recording what a window run did, as a trace for :func:`tidemark.timeline`.

A :class:`Tracer` is given to the window operator (:mod:`~tidemark._engine.operator`) as
its ``tracer``; the operator reports every firing through :meth:`Tracer.fired`, and the
caller reports what only it knows: each element (key, timestamp, label) with the status
code ``process_element`` returned, each watermark, and the end of input. The result is a
plain dict in the format of ``tools/TRACE.md``, which
:func:`tidemark.timeline.validate_trace` accepts.

Element status codes map to trace statuses as follows:

========================  ===============  ==========================================
``process_element``       trace status     meaning
========================  ===============  ==========================================
``ADDED``                 ``on_time``      went into at least one window not yet due
``ADDED_LATE``            ``late_firing``  admitted within the allowed lateness into a
                                           window already past the watermark
``SIDE_OUTPUT``           ``side_output``  late, sent to the late-data side output
``DROPPED``               ``dropped``      late, counted in ``num_late_records_dropped``
``SKIPPED``               ``dropped``      in no live window yet not late (an assigner
                                           that leaves gaps, such as sliding windows
                                           with ``size < slide``); counted in
                                           ``num_late_records_dropped``, though
                                           Flink's counter does not count it
========================  ===============  ==========================================

Firing kinds: ``early`` when the watermark is before the window's ``max_timestamp()``;
``on_time`` for the first firing driven by the watermark at or after it; ``late`` for
every later firing, and for any firing caused by an element processed when the
watermark had already passed the window (a late element, admitted by the allowed
lateness), even if the window never fired before. These follow Beam's pane timing
(``EARLY``, ``ON_TIME``, ``LATE``), judged by the watermark at the firing: the tracer does
not see timer times, so when one watermark jump fires several timers of a window at or
after its end, the first of those firings is ``on_time`` and the rest are ``late``.

Supported
---------
- Event-time runs whose elements all carry timestamps.
- Any assigner; for merging (session) assigners the windows listed are those that fired
  or held state and were not later merged into a larger window of the same key.

Not supported
-------------
- Processing-time windows: the trace has no processing-time axis, so their firings
  are all classed ``early``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tidemark._engine.contract import OperatorHandle
from tidemark._engine.status import ADDED, ADDED_LATE, DROPPED, SIDE_OUTPUT, SKIPPED
from tidemark.panes import PaneInfo, PaneTiming
from tidemark.time import LONG_MAX
from tidemark.windows import TimeWindow, Window

__all__ = ["Tracer", "TRACE_STATUS"]

#: Trace status of each ``process_element`` status code (see the module docstring).
TRACE_STATUS = {
    ADDED: "on_time",
    ADDED_LATE: "late_firing",
    SIDE_OUTPUT: "side_output",
    DROPPED: "dropped",
    SKIPPED: "dropped",
}

_RESULT_CHARS = 40
_WindowId = tuple[Any, "int | None", "int | None"]


def _trace_key(key: Any) -> Any:
    """The key as the trace can store it (JSON scalars, or a tuple of them), hashable."""
    if isinstance(key, (str, int, float, bool, type(None))):
        return key
    if isinstance(key, tuple):
        return tuple(
            p if isinstance(p, (str, int, float, bool, type(None))) else str(p) for p in key
        )
    return str(key)


def _json(key: Any) -> Any:
    return list(key) if isinstance(key, tuple) else key


def _bounds(window: Window) -> tuple[int | None, int | None]:
    if isinstance(window, TimeWindow):
        return window.start, window.end
    return None, None


def _contains(outer: _WindowId, inner: _WindowId) -> bool:
    (_, s0, e0), (_, s1, e1) = outer, inner
    if None in (s0, e0, s1, e1) or outer == inner:
        return False
    return s0 <= s1 and e1 <= e0  # type: ignore[operator]


class Tracer:
    """Records a window run as a trace dict (``tools/TRACE.md``).

    Parameters
    ----------
    title : str, optional
        The trace's title (the picture's heading).
    time_zone : str, optional
        IANA zone for the picture's clock labels, e.g. ``"Asia/Shanghai"``.
    describe : callable, optional
        ``result -> str`` for one emitted value; default ``str``. A firing's text joins
        its results with ``"; "`` and is cut to 40 characters.

    Examples
    --------
    >>> from tidemark import TumblingEventTimeWindows
    >>> from tidemark._engine.functions import window_logic
    >>> tracer = Tracer(title="two elements")
    >>> from tidemark._engine.create import window_operator
    >>> op = window_operator(TumblingEventTimeWindows.of(5), window_logic(lambda a, b: a + b),
    ...                      tracer=tracer)
    >>> tracer.process_element(op, "k", 1, 3, "a"); tracer.process_element(op, "k", 2, 4, "b")
    'on_time'
    'on_time'
    >>> tracer.process_watermark(op, 4); tracer.finish(op)
    >>> [(f["result"], f["kind"], f["arrival"]) for f in tracer.trace()["firings"]]
    [('3', 'on_time', 1)]
    """

    def __init__(
        self,
        *,
        title: str | None = None,
        time_zone: str | None = None,
        describe: Callable[[Any], str] | None = None,
    ):
        self._title = title
        self._time_zone = time_zone
        self._describe = describe or str
        self._elements: list[dict[str, Any]] = []
        self._watermarks: list[dict[str, int]] = []
        self._held: dict[_WindowId, bool] = {}  # window -> from a merging assigner
        self._firings: list[dict[str, Any]] = []
        self._fired: set[_WindowId] = set()
        self._on_time_fired: set[_WindowId] = set()
        self._arrival = -1
        self._in_element = False
        self._ended = False

    # ------------------------------------------------------------------ the operator's hook

    def fired(
        self,
        key: Any,
        window: Window,
        watermark: int,
        results: Iterable[Any],
        pane: PaneInfo | None = None,
        retraction: bool = False,
    ) -> None:
        """Called by the operator for every firing, with what it emitted; a Dataflow
        trigger's firing gives its ``pane`` (whose timing is the firing's kind), and
        RETRACTING mode's retractions come as firings of their own."""
        start, end = _bounds(window)
        ident = (_trace_key(key), start, end)
        self._held.setdefault(ident, False)
        self._fired.add(ident)
        self._firings.append(
            {
                "key": _json(ident[0]),
                "start": start,
                "end": end,
                "arrival": self._arrival,
                "watermark": watermark,
                "kind": self._kind(ident, window, watermark, pane, retraction),
                "result": ("−" if retraction else "") + self._result_text(results),
            }
        )

    def _kind(
        self,
        ident: _WindowId,
        window: Window,
        watermark: int,
        pane: PaneInfo | None = None,
        retraction: bool = False,
    ) -> str:
        if retraction:
            return "retraction"
        if pane is not None and pane.timing is not PaneTiming.UNKNOWN:
            return pane.timing.value.lower()
        if watermark < window.max_timestamp():
            return "early"
        if self._in_element or ident in self._on_time_fired:
            return "late"
        self._on_time_fired.add(ident)
        return "on_time"

    def _result_text(self, results: Iterable[Any]) -> str:
        text = "; ".join(self._describe(r) for r in results)
        return text if len(text) <= _RESULT_CHARS else text[: _RESULT_CHARS - 1] + "…"

    # ------------------------------------------------------------------ the caller's reports

    def begin_element(self, key: Any, timestamp: int, label: str) -> int:
        """Report that an element arrives; return its arrival index.

        Firings until :meth:`element_status` are attributed to this arrival and, when
        the watermark has passed their window, classed ``late``.
        """
        if self._ended:
            raise RuntimeError("begin_element() after end_of_input(): the input has ended")
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise TypeError(f"`timestamp` must be int ms (event time); got {timestamp!r}")
        self._arrival = len(self._elements)
        self._elements.append(
            {
                "key": _json(_trace_key(key)),
                "ts": timestamp,
                "arrival": self._arrival,
                "label": str(label),
                "status": None,
            }
        )
        self._in_element = True
        return self._arrival

    def element_status(self, arrival: int, code: int) -> str:
        """Record what ``process_element`` returned for `arrival`; return the trace status."""
        if code not in TRACE_STATUS:
            raise ValueError(f"`code` must be a process_element status (0-4); got {code!r}")
        status = TRACE_STATUS[code]
        self._elements[arrival]["status"] = status
        self._in_element = False
        return status

    def held_state(self, key: Any, windows: Iterable[Window], *, merging: bool = False) -> None:
        """Report windows of `key` that hold state now (see the module's Supported)."""
        for window in windows:
            start, end = _bounds(window)
            self._held.setdefault((_trace_key(key), start, end), merging)

    def watermark(self, timestamp: int) -> None:
        """Report the watermark after the current arrival (recorded when it changed)."""
        marks = self._watermarks
        if marks and marks[-1]["ts"] == timestamp:
            return
        if marks and marks[-1]["arrival"] == self._arrival:
            marks[-1]["ts"] = timestamp
        else:
            marks.append({"arrival": self._arrival, "ts": timestamp})

    def end_of_input(self) -> None:
        """Report the end of input: later watermarks and firings come after the last arrival."""
        self._ended = True
        self._in_element = False
        self._arrival = len(self._elements)

    # ------------------------------------------------------------------ driving an operator

    def process_element(
        self, operator: OperatorHandle, key: Any, value: Any, timestamp: int, label: str
    ) -> str:
        """Feed one element to `operator`, recording it; return its trace status."""
        arrival = self.begin_element(key, timestamp, label)
        code = operator.process_element(key, value, timestamp)
        ks = operator.keys.get(key)
        if ks is not None:
            held = ks.merging if operator.is_merging else ks.contents
            self.held_state(key, list(held), merging=operator.is_merging)
        return self.element_status(arrival, code)

    def process_watermark(self, operator: OperatorHandle, timestamp: int) -> None:
        """Advance `operator` to the watermark `timestamp`, recording it and what fired."""
        self.watermark(timestamp)
        operator.process_watermark(timestamp)

    def finish(self, operator: OperatorHandle) -> None:
        """End the input: the final watermark ``LONG_MAX`` fires every event-time window."""
        self.end_of_input()
        self.process_watermark(operator, LONG_MAX)

    # ------------------------------------------------------------------ the result

    def trace(self) -> dict[str, Any]:
        """The trace so far, as a new dict in the format of ``tools/TRACE.md``."""
        pending = [e["arrival"] for e in self._elements if e["status"] is None]
        if pending:
            raise RuntimeError(
                f"element(s) at arrival {pending} have no status: call "
                "element_status() after process_element()"
            )
        trace: dict[str, Any] = {"title": self._title} if self._title is not None else {}
        trace.update(
            elements=[dict(e) for e in self._elements],
            watermarks=[dict(w) for w in self._watermarks],
            windows=[{"key": _json(k), "start": s, "end": e} for k, s, e in self._windows()],
            firings=[dict(f) for f in self._firings],
        )
        if self._time_zone is not None:
            trace["time_zone"] = self._time_zone
        return trace

    def _windows(self) -> list[_WindowId]:
        """Every window that fired or held state, less merged-away session windows."""
        fired = self._fired
        out = []
        for ident, merging in self._held.items():
            merged_away = (
                merging
                and ident not in fired
                and any(other[0] == ident[0] and _contains(other, ident) for other in self._held)
            )
            if not merged_away:
                out.append(ident)
        return out
