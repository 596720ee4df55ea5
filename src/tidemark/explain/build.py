"""From a replay's raw record to the facts: firings, windows and elements' fates.

Every fact here is read off the :class:`~tidemark.explain.replay.Recorder`: a firing's
cause from the step that fired it (an element, a timer of either clock, the end of
input); a window's status from the elements its contents still hold and the firings
that saw them; an element's fate from the status ``process_element`` returned and the
firings, evictions and cleanups that reached it, exactly one fate per element.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidemark._engine.status import DROPPED, SIDE_OUTPUT, SKIPPED
from tidemark.explain.facts import Bounds, ElementFact, FiringFact, WindowFact
from tidemark.explain.replay import ElementRecord, FiringRecord, Recorder
from tidemark.explain.timefmt import TimeText
from tidemark.explain.waits import WaitContext, count_of, trigger_kinds, window_waits
from tidemark.panes import PaneTiming
from tidemark.time import LONG_MAX, TimeDomain
from tidemark.windows import TimeWindow, Window

__all__ = ["bounds", "firing_facts", "window_facts", "element_facts"]

_RESULT_CHARS = 60


def bounds(window: Window) -> Bounds:
    """``(start, end)`` of a time window, ``(None, None)`` for the global window."""
    if isinstance(window, TimeWindow):
        return window.start, window.end
    return None, None


def _result_text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= _RESULT_CHARS else text[: _RESULT_CHARS - 1] + "…"


# ---------------------------------------------------------------------------- firings


def firing_facts(rec: Recorder, times: TimeText) -> tuple[FiringFact, ...]:
    """Every firing of the replay, in order, with its cause and pane timing."""
    facts = []
    on_time = _fired_on_time_before(rec)
    panes: dict[Window, int] = {}
    for index, firing in enumerate(rec.firings):
        window = firing.window
        timing = _timing(rec, firing, on_time)
        pane = firing.pane.index if firing.pane is not None and firing.pane.index >= 0 else None
        if pane is None:
            pane = panes.get(window, 0)
        if not firing.retraction:
            panes[window] = panes.get(window, 0) + 1
        cause, detail = _cause(rec, firing, times)
        step = firing.step
        facts.append(
            FiringFact(
                index=index,
                window=bounds(window),
                arrival=step[1] if step[0] == "element" else None,
                elements_seen=firing.elements_seen,
                batch=firing.batch,
                watermark=firing.watermark,
                processing_time=firing.processing_time,
                timing=timing,
                pane=pane,
                cause=cause,
                detail=detail,
                elements=tuple(firing.elements),
                results=tuple(_result_text(v) for v in firing.values),
                retraction=firing.retraction,
                values=tuple(firing.values),
            )
        )
    return tuple(facts)


def _fired_on_time_before(rec: Recorder) -> set[Window]:
    """The restored windows that fired on time before the state was taken, as far as
    the state tells: the watermark passed their end, their trigger fires on the
    watermark, and their end-of-window timer is gone (it fired)."""
    passed = rec.restored_watermark
    if passed is None or not trigger_kinds(rec.op.trigger) & {"event", "custom"}:
        return set()
    timers = rec.restored_timers
    return {
        w
        for w in rec.restored
        if w.max_timestamp() <= passed and (w.max_timestamp(), w) not in timers
    }


def _timing(rec: Recorder, firing: FiringRecord, on_time: set[Window]) -> str:
    """Beam's pane timing: a Dataflow pane's own; else judged by the watermark (the
    processing-time clock for processing-time windows), as the tracer judges it."""
    pane = firing.pane
    if pane is not None and pane.timing is not PaneTiming.UNKNOWN:
        return pane.timing.value.lower()
    window = firing.window
    clock = firing.watermark if rec.op.is_event_time else firing.processing_time
    if clock < window.max_timestamp():
        return "early"
    if firing.step[0] == "element" or window in on_time:
        return "late"
    on_time.add(window)
    return "on_time"


def _cause(rec: Recorder, firing: FiringRecord, t: TimeText) -> tuple[str, str]:
    window, step, timer = firing.window, firing.step, firing.timer
    end = window.max_timestamp()
    if step[0] == "end_of_input":
        return "end_of_input", "the input ended: the watermark jumped to +inf"
    if timer is not None and timer[0] is TimeDomain.PROCESSING_TIME:
        return "processing_time_timer", (
            f"the processing-time clock reached {t.at(firing.processing_time)}, past the "
            f"timer at {t.at(timer[1])}"
        )
    if timer is not None:
        time = timer[1]
        what = (
            "its end timer (end - 1)"
            if time == end
            else "its cleanup timer (end - 1 + allowed lateness)"
            if time == rec.op.cleanup_time(window)
            else "the trigger's timer"
        )
        return "event_time_timer", (
            f"the watermark {t.at(firing.watermark)} reached {what} at {t.at(time)}"
        )
    if step[0] == "element":
        element = rec.elements[step[1]]
        if rec.op.is_event_time and end <= element.watermark:
            return "late_element", (
                f"element #{element.index} {element.label}@{t.at(element.timestamp)} "
                f"came after the watermark ({t.at(element.watermark)}) had passed the "
                f"window's end, within the allowed lateness "
                f"({t.span(rec.op.allowed_lateness_ms)})"
            )
        return "element", _element_fire_text(rec, element)
    return "event_time_timer", f"the watermark reached {t.at(firing.watermark)}"


def _element_fire_text(rec: Recorder, element: ElementRecord) -> str:
    trigger = rec.op.trigger
    what = f"element #{element.index} {element.label}"
    if "count" in trigger_kinds(trigger):
        return f"{what} brought the count to {count_of(trigger)}: {trigger!r} fired"
    return f"{what} made the trigger {trigger!r} fire"


# ---------------------------------------------------------------------------- windows


def _final(rec: Recorder, window: Window) -> Window:
    while window in rec.merged_into:
        window = rec.merged_into[window]
    return window


def _live_members(rec: Recorder, window: Window) -> list[int]:
    """The elements ``window``'s contents still hold at the end."""
    ks = rec.op.keys.get(rec.key)
    if ks is None:
        return []
    state_window = ks.merging.get(window) if rec.op.is_merging else window
    if state_window is None or state_window not in ks.contents:
        return []
    return [i for i in rec.membership.get(state_window, []) if i >= 0]


@dataclass(frozen=True)
class _Lookup:
    """What every window's fact reads, gathered once (a key may have thousands)."""

    firings: dict[Bounds, list[int]]  # window -> its firings
    sources: dict[Window, list[Window]]  # session -> the windows merged into it
    evicted: frozenset[int]
    restored_open: frozenset[Window]
    event_timers: dict[Window, list[int]]
    processing_timers: dict[Window, list[int]]

    @classmethod
    def of(cls, rec: Recorder, firings: Sequence[FiringFact]) -> _Lookup:
        by_window: dict[Bounds, list[int]] = {}
        for f in firings:
            by_window.setdefault(f.window, []).append(f.index)
        sources: dict[Window, list[Window]] = {}
        for source, target in rec.merged_into.items():
            sources.setdefault(target, []).append(source)
        ks = rec.op.keys.get(rec.key)
        held = set() if ks is None else set(ks.merging or ks.contents)
        return cls(
            by_window,
            sources,
            frozenset(e.index for e in rec.elements if e.evicted is not None),
            frozenset(w for w, added in rec.windows.items() if not added and w in held),
            _timers(None if ks is None else ks.event_timers),
            _timers(None if ks is None else ks.processing_timers),
        )


def _timers(timers: Any) -> dict[Window, list[int]]:
    by_window: dict[Window, list[int]] = {}
    for time, window in timers or ():
        by_window.setdefault(window, []).append(time)
    return by_window


def _window_elements(rec: Recorder, window: Window, look: _Lookup) -> list[int]:
    own = list(rec.windows.get(window, []))
    for source in look.sources.get(window, ()):
        own += _window_elements(rec, source, look)
    return sorted(set(own))


def window_facts(
    rec: Recorder,
    firings: Sequence[FiringFact],
    ctx: WaitContext,
) -> tuple[WindowFact, ...]:
    """Every window the key's elements went into, in order of their bounds."""
    look = _Lookup.of(rec, firings)
    facts = []
    for window in sorted(rec.windows, key=_order):
        fired = tuple(look.firings.get(bounds(window), ()))
        facts.append(_window_fact(rec, window, fired, firings, ctx, look))
    return tuple(facts)


def _order(window: Window) -> tuple[int, int]:
    start, end = bounds(window)
    return (start if start is not None else LONG_MAX, end if end is not None else LONG_MAX)


def _window_fact(
    rec: Recorder,
    window: Window,
    fired: tuple[int, ...],
    firings: Sequence[FiringFact],
    ctx: WaitContext,
    look: _Lookup,
) -> WindowFact:
    elements = _window_elements(rec, window, look)
    cleanup = rec.op.cleanup_time(window)
    common: dict[str, Any] = dict(
        window=bounds(window),
        elements=tuple(elements),
        firings=fired,
        cleanup_time=None if cleanup >= LONG_MAX else cleanup,
        merged_from=tuple(bounds(w) for w in look.sources.get(window, ())),
    )
    if window in rec.merged_into:
        target = _final(rec, window)
        detail = f"merged into the session {ctx.times.window(bounds(target))}"
        return WindowFact(status="merged", merged_into=bounds(target), detail=detail, **common)
    seen = {i for f in fired for i in firings[f].elements}
    live = _live_members(rec, window)
    unfired_live = [i for i in live if i not in seen]
    evicted = look.evicted
    lost = [i for i in elements if i not in seen and i not in live and i not in evicted]
    if unfired_live or (window in look.restored_open and not fired):
        ks = rec.op.keys.get(rec.key)
        timers = (look.event_timers.get(window, []), look.processing_timers.get(window, []))
        waits = window_waits(rec.op.trigger, ks, window, cleanup, ctx, timers)
        return WindowFact(
            status="open",
            waiting=waits[0] if waits else None,
            waits=waits,
            pending=tuple(unfired_live),
            detail=_open_detail(unfired_live, waits),
            **common,
        )
    if lost:
        detail = _purged_detail(rec, window, lost, ctx.times)
        return WindowFact(status="fired" if fired else "purged", detail=detail, **common)
    status = "fired" if fired else "purged"
    return WindowFact(status=status, detail="", **common)


def _open_detail(unfired: list[int], waits: Sequence[Any]) -> str:
    if not waits:
        return f"holds {len(unfired)} element(s) no result saw yet"
    return "waits for " + "; or for ".join(w.detail for w in waits)


def _purged_detail(rec: Recorder, window: Window, lost: list[int], t: TimeText) -> str:
    named = ", ".join(f"#{i}" for i in lost)
    if window in rec.cleared:
        return (
            f"element(s) {named} in no result: its state was cleared when the watermark "
            f"reached {t.at(rec.cleared[window])} (cleanup at "
            f"{t.at(rec.op.cleanup_time(window))}) before its trigger fired them"
        )
    return f"element(s) {named} in no result: the trigger purged the contents holding them"


# ---------------------------------------------------------------------------- elements


def element_facts(
    rec: Recorder,
    firings: Sequence[FiringFact],
    windows: Sequence[WindowFact],
    times: TimeText,
) -> tuple[ElementFact, ...]:
    """Every element of the key with its one fate."""
    in_firings: dict[int, list[int]] = {}
    for firing in firings:
        for index in firing.elements:
            in_firings.setdefault(index, []).append(firing.index)
    unmerged = {bounds(w): w for w in rec.windows if w not in rec.merged_into}
    open_elements = {i for w in windows if w.status == "open" for i in _live_of(rec, w, unmerged)}
    return tuple(
        _element_fact(rec, e, tuple(in_firings.get(e.index, ())), open_elements, times)
        for e in rec.elements
    )


def _live_of(rec: Recorder, fact: WindowFact, windows: dict[Bounds, Window]) -> list[int]:
    window = windows.get(fact.window)
    return [] if window is None else _live_members(rec, window)


def _element_fact(
    rec: Recorder,
    e: ElementRecord,
    fired: tuple[int, ...],
    open_elements: set[int],
    t: TimeText,
) -> ElementFact:
    finals = []
    for window in e.windows:
        final = bounds(_final(rec, window))
        if final not in finals:
            finals.append(final)
    merged = next((_final(rec, w) for w in e.windows if w in rec.merged_into), None)
    fate, detail = _fate(rec, e, fired, open_elements, t)
    if merged is not None:
        detail += f"; its session merged into {t.window(bounds(merged))}"
    return ElementFact(
        arrival=e.index,
        timestamp=e.timestamp,
        label=e.label,
        batch=e.batch,
        watermark=e.watermark,
        processing_time=e.processing_time,
        fate=fate,
        detail=detail,
        windows=tuple(finals),
        firings=fired,
        late_windows=tuple(bounds(w) for w in e.late_windows),
        evicted_by=e.evicted[0] if e.evicted else None,
        evicted_when=e.evicted[1] if e.evicted else None,
        merged_into=bounds(merged) if merged is not None else None,
    )


def _fate(
    rec: Recorder,
    e: ElementRecord,
    fired: tuple[int, ...],
    open_elements: set[int],
    t: TimeText,
) -> tuple[str, str]:
    if e.code in (SIDE_OUTPUT, DROPPED):
        return _late_fate(rec, e, t)
    if e.code == SKIPPED:
        return "skipped", (
            f"its timestamp {t.at(e.timestamp)} falls in no window of {rec.op.assigner!r} "
            "(a gap between windows); counted in num_late_records_dropped"
        )
    if fired:
        return "in_result", "in the result of " + ", ".join(_firing_names(rec, fired, t))
    if e.evicted is not None:
        evictor, when = e.evicted
        return "evicted", f"{evictor} removed it {when} the window function ran"
    if e.index in open_elements:
        return "open", "in a window that has not fired yet"
    return "purged", _purged_fate(rec, e, t)


def _purged_fate(rec: Recorder, e: ElementRecord, t: TimeText) -> str:
    for window in e.windows:
        final = _final(rec, window)
        if final in rec.cleared:
            return (
                f"{t.window(bounds(final))}'s state was cleared when the watermark reached "
                f"{t.at(rec.cleared[final])} (cleanup at {t.at(rec.op.cleanup_time(final))}) "
                "before its trigger fired it"
            )
    return "its window's trigger purged the contents holding it before a result saw it"


def _firing_names(rec: Recorder, fired: tuple[int, ...], t: TimeText) -> list[str]:
    return [
        f"{t.window(bounds(rec.firings[i].window))}'s firing at watermark "
        f"{t.at(rec.firings[i].watermark)}"
        for i in fired
    ]


def _late_fate(rec: Recorder, e: ElementRecord, t: TimeText) -> tuple[str, str]:
    lateness = rec.op.allowed_lateness_ms
    ends = ", ".join(
        f"{t.window(bounds(w))} (cleanup at {t.at(rec.op.cleanup_time(w))})" for w in e.late_windows
    )
    why = (
        f"late: the watermark was {t.at(e.watermark)} when it arrived, at or past the cleanup time "
        f"(end - 1 + allowed lateness {t.span(lateness)}) of its window(s) {ends}"
        if ends
        else f"late: the watermark was {t.at(e.watermark)} when it arrived, at or past its "
        f"timestamp + allowed lateness ({t.span(lateness)}), and it falls in no window"
    )
    if e.code == SIDE_OUTPUT:
        tag = rec.op.late_data_tag
        return "late_side_output", f"{why}; sent to the late-data side output {tag!r}"
    return "late_dropped", f"{why}; no late-data side output: counted in num_late_records_dropped"
