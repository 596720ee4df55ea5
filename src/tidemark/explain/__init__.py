"""Why did this window (not) fire? Answers computed from a run, for one key.

:func:`explain_events` replays one key's events (its elements, the watermarks and the
processing time in the order the window operator saw them) through the engine with an
observed operator (:mod:`tidemark.explain.replay`), and returns an
:class:`Explanation`: which windows the key's elements went into, each firing (the
watermark or clock that fired it, the pane timing, the results), what each open window
waits for (the watermark and which partition holds it, a count, a timer, a trigger that
never fires) and what became of each element (in a result, late to the side output or
dropped, evicted, skipped, purged, still open). Every mode gives it the key's events:
the engine's harness (``WindowOperatorHarness(..., explain=True)``), Spark's BATCH and
replay results, a streaming query's checkpoint.

The contract: the firings an explanation claims are the engine's firings of the same
events, and every element has exactly one fate (``tests/explain/test_explain_agreement.py``
checks both over randomized pipelines). The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from tidemark._engine.spec import OperatorSpec
from tidemark._engine.trace import Tracer
from tidemark.errors import ExplainError
from tidemark.explain.build import element_facts, firing_facts, window_facts
from tidemark.explain.events import (
    Element,
    EndOfInput,
    Event,
    MicroBatch,
    PartitionState,
    ProcessingTime,
    Watermark,
)
from tidemark.explain.facts import (
    FATES,
    FIRING_CAUSES,
    WAIT_KINDS,
    WINDOW_STATUSES,
    ElementFact,
    Explanation,
    FiringFact,
    WaitFact,
    WindowFact,
)
from tidemark.explain.partitions import holding_partition, partition_states
from tidemark.explain.replay import InitialState, Recorder, replay
from tidemark.explain.timefmt import TimeText, zone
from tidemark.explain.waits import WaitContext

__all__ = [
    "explain_events",
    "Explanation",
    "WindowFact",
    "FiringFact",
    "WaitFact",
    "ElementFact",
    "InitialState",
    "Element",
    "Watermark",
    "ProcessingTime",
    "MicroBatch",
    "EndOfInput",
    "Event",
    "PartitionState",
    "partition_states",
    "holding_partition",
    "MODES",
    "FATES",
    "WINDOW_STATUSES",
    "FIRING_CAUSES",
    "WAIT_KINDS",
]

#: Where the events come from.
MODES = ("engine", "batch", "replay", "streaming")


def explain_events(
    spec: OperatorSpec,
    key: Any,
    events: Iterable[Event],
    *,
    mode: str,
    partitions: Sequence[PartitionState] = (),
    window: tuple[int, int] | None = None,
    timestamp: int | None = None,
    time_range: tuple[int, int] | None = None,
    time_zone: str | None = None,
    initial_state: InitialState | None = None,
    idleness: bool | None = None,
    title: str | None = None,
) -> Explanation:
    """Explain one key's windows from its events, replayed on the engine.

    Parameters
    ----------
    spec : OperatorSpec
        The window pipeline (the one the run used).
    key : object
        The key; its events are all the replay sees (keyed state is per key).
    events : iterable of Element, Watermark, ProcessingTime, MicroBatch, EndOfInput
        The key's input in the order the operator saw it (see
        :mod:`tidemark.explain.events`).
    mode : {"engine", "batch", "replay", "streaming"}
        Where the events come from (said in the answer).
    partitions : sequence of PartitionState
        Each input partition's watermark at the end: which one holds the watermark.
    window : (start, end), optional
        The window the question is about (``[start, end)``; ``(None, None)``: the global
        window); it must be one of the key's.
    timestamp : int, optional
        An element's timestamp the question is about; the key must have such an element.
    time_range : (start, end), optional
        Keep only the windows intersecting ``[start, end)`` and the elements in it.
    time_zone : str, optional
        IANA zone for the answer's times (UTC when not given).
    initial_state : InitialState, optional
        Start from a key's state and clocks (a streaming checkpoint's) instead of empty.
    idleness : bool, optional
        Whether the source's idleness is on (None: not known), said of the holder.
    title : str, optional
        The picture's title.

    Returns
    -------
    Explanation

    Raises
    ------
    ExplainError
        An unknown ``mode``; a key without events; a ``window`` or ``timestamp`` not of
        the key's; a bad ``time_range`` or ``time_zone``.
    InputDataError
        An event the pipeline cannot take (an Element without a timestamp in event
        time, an element after ``EndOfInput``, something not an event).

    Supported
    ---------
    - Every assigner, Flink trigger, Dataflow trigger, evictor and window function the
      engine runs; event time and processing time.
    - Sessions: the merges, and which session each element ended in.

    Not supported
    -------------
    - Pictures of processing-time windows (the timeline's axis is event time).
    - Elements of ``initial_state``'s windows are not named (they came before the
      events).
    - From ``initial_state``, whether a window fired on time before is read from the
      state (the watermark passed its end and its end timer is gone); a trigger of
      yours that registers its end timer again on every element hides it, so its
      window's next firing may be called ``on_time`` where the whole run says ``late``.

    Examples
    --------
    >>> import tidemark as tm
    >>> from tidemark._engine.functions import window_logic
    >>> spec = OperatorSpec(tm.TumblingEventTimeWindows.of(10), window_logic(lambda a, b: a + b))
    >>> x = explain_events(spec, "k", [Element(1, 3), Element(2, 12), Watermark(11)],
    ...                    mode="engine")
    >>> [(w.window, w.status) for w in x.windows]
    [((0, 10), 'fired'), ((10, 20), 'open')]
    >>> x.window(10, 20).waiting.kind, [e.fate for e in x.elements]
    ('input_not_ended', ['in_result', 'open'])
    """
    _check_arguments(mode, time_range, time_zone)
    events = list(events)
    if not any(isinstance(e, Element) for e in events) and initial_state is None:
        raise ExplainError(
            f"`events` must hold at least one Element of key {key!r}; got {len(events)} "
            "event(s) without an element: the key had no input in this run"
        )
    tracer = Tracer(title=title, time_zone=time_zone) if spec.is_event_time else None
    rec = replay(spec, key, events, initial_state=initial_state, tracer=tracer)
    x = _explanation(rec, mode, partitions, idleness, time_zone, tracer)
    return _focused(x, window, timestamp, time_range)


def _check_arguments(mode: str, time_range: tuple[int, int] | None, time_zone: str | None) -> None:
    if mode not in MODES:
        raise ExplainError(f"`mode` must be one of {', '.join(MODES)}; got {mode!r}")
    if time_range is not None:
        start, end = time_range
        if not start < end:
            raise ExplainError(
                f"`time_range` must be [start, end) with start < end; got {time_range!r}"
            )
    zone(time_zone)


def _explanation(
    rec: Recorder,
    mode: str,
    partitions: Sequence[PartitionState],
    idleness: bool | None,
    time_zone: str | None,
    tracer: Tracer | None,
) -> Explanation:
    op = rec.op
    times = TimeText(time_zone)
    holder = holding_partition(partitions)
    seen = [p.max_event_time for p in partitions if p.max_event_time is not None]
    if not partitions:
        seen = [e.timestamp for e in rec.elements if e.timestamp is not None]
    ctx = WaitContext(
        watermark=op.current_watermark,
        processing_time=op.current_processing_time,
        ended=rec.ended,
        max_event_time=max(seen) if seen else None,
        holder=holder,
        idleness=idleness,
        times=times,
    )
    firings = firing_facts(rec, times)
    windows = window_facts(rec, firings, ctx)
    return Explanation(
        key=rec.key,
        mode=mode,
        watermark=op.current_watermark,
        processing_time=op.current_processing_time,
        ended=rec.ended,
        windows=windows,
        elements=element_facts(rec, firings, windows, times),
        firings=firings,
        partitions=tuple(partitions),
        holder=holder,
        idleness=idleness,
        allowed_lateness=op.allowed_lateness_ms,
        pipeline=_pipeline(rec.spec),
        time_zone=time_zone,
        trace=tracer.trace() if tracer is not None else None,
    )


def _pipeline(spec: OperatorSpec) -> str:
    parts = [repr(spec.assigner), f"trigger={spec.window_trigger!r}"]
    if spec.evictor is not None:
        parts.append(f"evictor={spec.evictor!r}")
    if spec.allowed_lateness_ms:
        parts.append(f"allowed_lateness={spec.allowed_lateness_ms}ms")
    return ", ".join(parts)


def _focused(
    x: Explanation,
    window: tuple[int, int] | None,
    timestamp: int | None,
    time_range: tuple[int, int] | None,
) -> Explanation:
    if window is not None:
        x.window(*window)  # raises, naming the key's windows, when it is not one
        x = replace(x, focus_window=(window[0], window[1]))
    if timestamp is not None:
        if not x.elements_at(timestamp):
            stamps = sorted({e.timestamp for e in x.elements if e.timestamp is not None})
            raise ExplainError(
                f"`timestamp` must be one of key {x.key!r}'s element timestamps "
                f"({_few(stamps)}); got {timestamp!r}"
            )
        x = replace(x, focus_timestamp=timestamp)
    if time_range is not None:
        x = _in_range(x, time_range)
    return x


def _few(values: Sequence[Any]) -> str:
    shown = ", ".join(map(str, values[:10]))
    return shown + (f", ... ({len(values)} in all)" if len(values) > 10 else "")


def _meets(window: tuple[int | None, int | None], start: int, end: int) -> bool:
    """Whether ``window`` (the global one: always) intersects ``[start, end)``."""
    low, high = window
    return low is None or high is None or (low < end and start < high)


def _in_range(x: Explanation, time_range: tuple[int, int]) -> Explanation:
    start, end = time_range
    windows = tuple(w for w in x.windows if _meets(w.window, start, end))
    elements = tuple(e for e in x.elements if e.timestamp is None or start <= e.timestamp < end)
    return replace(x, windows=windows, elements=elements, time_range=(start, end))
