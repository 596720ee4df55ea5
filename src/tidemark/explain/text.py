"""An explanation in words: the verdict per window and element first, then the facts.

The answer opens with one summary line (the key, what fired, what did not, the
watermark and what holds it), then a paragraph per window (the focused one alone when
the question named one), then the elements that are in no result: late, evicted,
skipped, purged or still waiting. Times are ints for small values and ISO 8601 in the
explanation's zone for epoch ms; intervals are half-open ``[start, end)``.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tidemark.explain.facts import ElementFact, Explanation, FiringFact, WindowFact
from tidemark.explain.timefmt import TimeText
from tidemark.explain.waits import holder_text

__all__ = ["explanation_text"]

#: At most this many windows and elements are written out; the rest are counted.
MAX_LISTED = 12
_SHOWN = 5  # elements named in a window's line

_STATUS = {"fired": "fired", "open": "waiting", "purged": "without a result"}
_VERDICT = {
    "fired": "FIRED",
    "open": "NOT FIRED YET",
    "purged": "NO RESULT",
    "merged": "MERGED",
}
_FATE = {
    "in_result": "in a result",
    "late_side_output": "late to the side output",
    "late_dropped": "late and dropped",
    "skipped": "in no window",
    "evicted": "evicted",
    "open": "waiting in an open window",
    "purged": "purged without a result",
}


def explanation_text(x: Explanation) -> str:
    t = TimeText(x.time_zone)
    lines = [_summary(x, t), ""]
    windows = _windows_in_focus(x)
    for fact in windows[:MAX_LISTED]:
        lines += _window_lines(x, fact, t)
    if len(windows) > MAX_LISTED:
        lines.append(f"... and {len(windows) - MAX_LISTED} more window(s)")
    elements = _elements_in_focus(x, windows)
    if elements:
        title = "Elements:" if x.focus_timestamp is not None else "Elements in no result:"
        lines += ["", title]
        for element in elements[:MAX_LISTED]:
            lines.append("  " + _element_line(element, t))
        if len(elements) > MAX_LISTED:
            lines.append(f"  ... and {len(elements) - MAX_LISTED} more element(s)")
    lines += ["", _clocks(x, t)]
    return "\n".join(lines).rstrip() + "\n"


def _summary(x: Explanation, t: TimeText) -> str:
    statuses = Counter(w.status for w in x.windows if w.status != "merged")
    fates = Counter(e.fate for e in x.elements)
    windows = ", ".join(f"{n} {_STATUS[s]}" for s, n in statuses.items()) or "none"
    elements = ", ".join(f"{n} {_FATE[f]}" for f, n in fates.items()) or "none"
    line = f"Key {x.key!r} ({x.mode}): windows {windows}; elements {elements}."
    held = any(w.waiting is not None and w.waiting.kind == "event_time_timer" for w in x.windows)
    if held and x.holder is not None:
        line += f" Partition {x.holder.partition!r} holds the watermark back."
    return line


def _clocks(x: Explanation, t: TimeText) -> str:
    end = "the input ended" if x.ended else "the input has not ended"
    line = f"Watermark {t.at(x.watermark)}"
    if x.processing_time:
        line += f", processing time {t.at(x.processing_time)}"
    line += f"; {end}."
    if x.holder is not None:
        held = holder_text(x.holder, x.idleness, t, x.partitions)
        line += f" {held[0].upper()}{held[1:]}."
    if x.pipeline:
        line += f"\nPipeline: {x.pipeline}."
    return line


def _windows_in_focus(x: Explanation) -> list[WindowFact]:
    if x.focus_window is not None:
        return [x.window(*x.focus_window)]
    if x.focus_timestamp is not None:
        asked = x.elements_at(x.focus_timestamp)
        wanted = {w for e in asked for w in (*e.windows, *e.late_windows)}
        return [w for w in x.windows if w.window in wanted]
    return [w for w in x.windows if w.status != "merged"] + [
        w for w in x.windows if w.status == "merged"
    ]


def _elements_in_focus(x: Explanation, windows: Sequence[WindowFact]) -> list[ElementFact]:
    if x.focus_timestamp is not None:
        return list(x.elements_at(x.focus_timestamp))
    if x.focus_window is not None:
        inside = set(windows[0].elements)
        late = [e for e in x.elements if x.focus_window in e.late_windows]
        listed = [e for e in x.elements if e.arrival in inside and e.fate != "in_result"]
        return listed + late
    return [e for e in x.elements if e.fate not in ("in_result", "open")]


def _window_lines(x: Explanation, w: WindowFact, t: TimeText) -> list[str]:
    head = f"{t.window(w.window)}: {_VERDICT[w.status]}"
    firings = [x.firings[i] for i in w.firings]
    panes = sum(1 for f in firings if not f.retraction)
    if w.status == "open" and panes:
        head = f"{t.window(w.window)}: FIRED {panes} TIME(S), {len(w.pending)} ELEMENT(S) WAITING"
    elif w.status == "fired" or (firings and w.status != "merged"):
        head += f" ({panes} firing(s))"
    lines = [head]
    if w.detail:
        lines.append(f"  {w.detail[0].upper()}{w.detail[1:]}")
    lines += [f"  {_firing_line(f, t)}" for f in firings[:MAX_LISTED]]
    if len(firings) > MAX_LISTED:
        lines.append(f"  ... and {len(firings) - MAX_LISTED} more firing(s)")
    if w.merged_from:
        merged = ", ".join(t.window(b) for b in w.merged_from)
        lines.append(f"  Merged from {merged}")
    lines.append(f"  {len(w.elements)} element(s): {_element_list(x, w.elements, t)}")
    return lines


def _element_list(x: Explanation, arrivals: Sequence[int], t: TimeText) -> str:
    by_arrival = {e.arrival: e for e in x.elements}
    shown = [by_arrival[i] for i in arrivals[:_SHOWN] if i in by_arrival]
    text = ", ".join(f"#{e.arrival} {_named(e, t)}" for e in shown)
    return text + (f", ... ({len(arrivals) - _SHOWN} more)" if len(arrivals) > _SHOWN else "")


def _firing_line(f: FiringFact, t: TimeText) -> str:
    when = f"watermark {t.at(f.watermark)}"
    if f.batch is not None:
        when = f"micro-batch {f.batch}, {when}"
    results = "; ".join(f.results) if f.results else "no result"
    kind = "retraction" if f.retraction else f.timing.replace("_", "-")
    return f"Fired {kind} (pane {f.pane}) at {when}: {f.detail} -> {results}"


def _element_line(e: ElementFact, t: TimeText) -> str:
    where = f" (micro-batch {e.batch})" if e.batch is not None else ""
    return f"#{e.arrival} {_named(e, t)}{where}: {e.fate.upper()}: {e.detail}"


def _named(e: ElementFact, t: TimeText) -> str:
    """``label@timestamp``; in processing time, the clock it arrived at."""
    if e.timestamp is None:
        return f"{e.label} (arrived at processing time {t.at(e.processing_time)})"
    return f"{e.label}@{t.at(e.timestamp)}"
