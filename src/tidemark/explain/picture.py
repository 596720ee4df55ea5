"""An explanation's picture: the key's timeline with the window in question marked.

The replay records a trace of the key (``tools/TRACE.md``: its elements, the
watermark, its windows and firings, by :class:`~tidemark._engine.trace.Tracer`);
:func:`draw_explanation` adds what the question needs (the focused window outlined with
its verdict, the watermark's last step with what holds it, each partition's watermark
at the end) and draws it with :func:`tidemark.timeline`.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tidemark.errors import ExplainError
from tidemark.explain.facts import Explanation, WindowFact
from tidemark.explain.timefmt import TimeText

__all__ = ["draw_explanation", "explanation_trace"]

_VERDICT = {
    "fired": "FIRED",
    "open": "NOT FIRED YET",
    "purged": "NO RESULT",
    "merged": "MERGED",
}
_NOTE_CHARS = 125


def _focus_window(x: Explanation) -> WindowFact | None:
    """The window the question is about: the one asked, else one holding the element
    asked about, else the first window not fired (the usual question), else none."""
    if x.focus_window is not None:
        return x.window(*x.focus_window)
    if x.focus_timestamp is not None:
        for element in x.elements_at(x.focus_timestamp):
            for bounds in element.windows or element.late_windows:
                found = [w for w in x.windows if w.window == bounds]
                if found:
                    return found[0]
    return next((w for w in x.windows if w.status in ("open", "purged")), None)


def _note(x: Explanation, w: WindowFact, t: TimeText) -> str:
    start, end = w.window
    name = "global window" if start is None else f"[{t.short(start)}, {t.short(end)})"
    head = f"{name}: {_VERDICT[w.status]}"
    panes = sum(1 for i in w.firings if not x.firings[i].retraction)
    if w.status == "open" and panes:
        head = f"{name}: FIRED {panes} TIME(S), {len(w.pending)} WAITING"
    wait = w.waiting
    if wait is not None and wait.timer is not None and wait.kind != "processing_time_timer":
        head += f": waits for watermark {t.short(wait.timer)}"
        if wait.gap is not None:
            head += f" (now {t.span(wait.gap)} short)"
        if x.holder is not None:
            head += f", held by partition {x.holder.partition!r}"
        elif wait.kind == "input_not_ended":
            head += ": no later input yet"
    elif wait is not None:
        head += ": waits for " + wait.detail.split(";")[0].split(":")[0]
    elif w.status == "fired":
        panes = sum(1 for i in w.firings if not x.firings[i].retraction)
        head += f" ({panes} firing(s))"
    elif w.detail:
        head += ": " + w.detail.split(";")[0].split(" (")[0]
    return head if len(head) <= _NOTE_CHARS else head[: _NOTE_CHARS - 1] + "…"


_FATE = {
    "in_result": "IN A RESULT",
    "late_side_output": "LATE, TO THE SIDE OUTPUT",
    "late_dropped": "LATE, DROPPED",
    "skipped": "IN NO WINDOW",
    "evicted": "EVICTED",
    "open": "WAITING",
    "purged": "PURGED WITHOUT A RESULT",
}


def _element_note(x: Explanation, t: TimeText) -> str | None:
    """The note of an element asked about (the last one with the timestamp)."""
    if x.focus_timestamp is None or not x.elements_at(x.focus_timestamp):
        return None
    e = x.elements_at(x.focus_timestamp)[-1]
    note = f"{e.label}@{t.short(e.timestamp)}: {_FATE[e.fate]}"
    if e.fate.startswith("late_"):
        note += f" (arrived at watermark {t.short(e.watermark)}"
        if e.late_windows and e.late_windows[0][1] is not None:
            end = e.late_windows[0][1]
            note += f", past its window's cleanup at {t.short(end - 1 + x.allowed_lateness)}"
        note += ")"
    elif e.fate == "evicted":
        note += f" by {e.evicted_by}, {e.evicted_when} the function"
    return note if len(note) <= _NOTE_CHARS else note[: _NOTE_CHARS - 1] + "…"


def _watermark_note(x: Explanation, t: TimeText) -> str:
    note = f"watermark {t.short(x.watermark)}"
    if x.holder is not None:
        note += f", held by partition {x.holder.partition!r}"
    return note


def explanation_trace(x: Explanation) -> dict[str, Any]:
    """The key's trace with the focus, the watermark's note and the partitions' ends."""
    if x.trace is None:
        raise ExplainError(
            "`picture` draws event time: the pipeline's windows are in processing time, "
            "which the timeline has no axis for; read text() instead"
        )
    t = TimeText(x.time_zone)
    trace = dict(x.trace)
    if trace.get("title") is None:
        trace["title"] = f"Why? key {x.key!r} ({x.mode})"
    focus = _focus_window(x)
    listed = {(w["start"], w["end"]) for w in trace["windows"]}
    if focus is not None and focus.window in listed:
        key = trace["windows"][0]["key"]
        start, end = focus.window
        note = _element_note(x, t) or _note(x, focus, t)
        trace["focus"] = {"key": key, "start": start, "end": end, "note": note}
    trace["watermark_note"] = _watermark_note(x, t)
    last = len(trace["elements"]) - 1
    if x.partitions and last >= 0:
        trace["partition_watermarks"] = [
            {"partition": _partition_name(p.partition), "arrival": last, "ts": p.watermark}
            for p in x.partitions
        ]
    return trace


def _partition_name(partition: Any) -> Any:
    if isinstance(partition, (int, str)) and not isinstance(partition, bool):
        return partition
    return str(partition)


def draw_explanation(x: Explanation, path: str | os.PathLike[str]) -> Path:
    """Draw ``x``'s picture to ``path`` (``.png`` or ``.html``); return the path."""
    from tidemark.timeline import timeline

    return timeline(explanation_trace(x), path)
