"""A picture of what the windows did: render a run trace as a timeline.

The engine records a *trace* of a window run (format: ``tools/TRACE.md``). This module
draws it the way Flink's documentation explains windows: one lane per key, event time
across, arrival order upwards. Elements are dots coloured by status, windows are
translucent half-open bands ``[start, end)``, firings are marks at the window end at the
arrival after which they fired, and the watermark is a step line through every lane, so
an element left of the line at its own height arrived behind the watermark.

The module is callable: ``tidemark.timeline(trace, "run.png")`` is :func:`timeline`.
The engine's :class:`tidemark._engine.trace.Tracer` and
:func:`tidemark.testing.replay_trace` make traces; layout and drawing live in
``tidemark._timeline_draw``. How to make and draw a trace: ``docs/testing.md``
("Pictures of a run").

Supported
---------
- PNG through matplotlib (Agg, imported lazily: importing tidemark never needs it).
- Self-contained HTML with an inline SVG (no script, no network); hovering a mark
  shows its details.
- Epoch-millisecond times shown as ``HH:MM:SS.fff`` in the trace's ``time_zone``;
  small times (below ``1e11``) shown as plain milliseconds.

Not supported
-------------
- Processing time on the x axis; traces longer than a few hundred elements stay
  correct but get crowded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from collections.abc import Hashable, Mapping, Sequence
from datetime import tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "ELEMENT_STATUSES",
    "FIRING_KINDS",
    "TraceError",
    "load_trace",
    "main_timeline",
    "save_trace",
    "timeline",
    "validate_trace",
]

ELEMENT_STATUSES = ("on_time", "late_firing", "side_output", "dropped")
FIRING_KINDS = ("early", "on_time", "late", "retraction")


class TraceError(ValueError):
    """A trace does not follow ``tools/TRACE.md``; the message names the field."""


# --------------------------------------------------------------------------- checks


def _record(
    value: object, where: str, required: Sequence[str], optional: Sequence[str] = ()
) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TraceError(f"{where} must be a dict; got {type(value).__name__} {value!r}")
    unknown = sorted(str(k) for k in value if k not in required and k not in optional)
    if unknown:
        raise TraceError(
            f"{where} has unknown field(s) {unknown}; allowed are {sorted([*required, *optional])}"
        )
    missing = [k for k in required if k not in value]
    if missing:
        raise TraceError(f"{where} is missing field(s) {missing}")
    return value


def _int(
    rec: Mapping[str, Any],
    field: str,
    where: str,
    *,
    none_ok: bool = False,
    lo: int | None = None,
    hi: int | None = None,
) -> int | None:
    value = rec[field]
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an int or None" if none_ok else "an int"
        raise TraceError(f"{where}[{field!r}] must be {kind}; got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise TraceError(f"{where}[{field!r}] must be in [{lo}, {hi}]; got {value!r}")
    return value


def _str(rec: Mapping[str, Any], field: str, where: str, choices: Sequence[str] = ()) -> str:
    value = rec[field]
    if not isinstance(value, str):
        raise TraceError(f"{where}[{field!r}] must be a str; got {value!r}")
    if choices and value not in choices:
        raise TraceError(
            f"{where}[{field!r}] must be one of {', '.join(map(repr, choices))}; got {value!r}"
        )
    return value


def _key(rec: Mapping[str, Any], where: str) -> Hashable:
    """Return the key as a hashable (JSON turns tuple keys into lists)."""
    value = rec["key"]
    scalar = (str, int, float, bool, type(None))
    if isinstance(value, (list, tuple)) and all(isinstance(v, scalar) for v in value):
        return tuple(value)
    if not isinstance(value, scalar):
        raise TraceError(
            f"{where}['key'] must be a str, number, bool, None or a list of those; got {value!r}"
        )
    return value


def _list(rec: Mapping[str, Any], field: str) -> list[Any]:
    value = rec[field]
    if not isinstance(value, list):
        raise TraceError(f"trace[{field!r}] must be a list; got {type(value).__name__}")
    return value


def _check_elements(elements: list[Any]) -> None:
    for i, raw in enumerate(elements):
        where = f"trace['elements'][{i}]"
        rec = _record(raw, where, ("key", "ts", "arrival", "label", "status"))
        _key(rec, where)
        _int(rec, "ts", where)
        _str(rec, "label", where)
        _str(rec, "status", where, ELEMENT_STATUSES)
        if _int(rec, "arrival", where) != i:
            raise TraceError(
                f"{where}['arrival'] must equal its position {i} (elements are "
                f"listed in arrival order); got {rec['arrival']!r}"
            )


def _check_watermarks(watermarks: list[Any], n: int) -> None:
    last: tuple[int, int] | None = None
    for i, raw in enumerate(watermarks):
        where = f"trace['watermarks'][{i}]"
        rec = _record(raw, where, ("arrival", "ts"))
        arrival = _int(rec, "arrival", where, lo=-1, hi=n)
        ts = _int(rec, "ts", where)
        assert arrival is not None and ts is not None
        if last is not None and (arrival <= last[0] or ts < last[1]):
            raise TraceError(
                f"{where} must come after the previous watermark (arrival "
                f"increasing, ts never decreasing); got arrival={arrival}, "
                f"ts={ts}ms after arrival={last[0]}, ts={last[1]}ms"
            )
        last = (arrival, ts)


def _check_partition_watermarks(top: Mapping[str, Any], n: int) -> None:
    """The optional ``partition_watermarks``: each partition's own watermark after the
    arrivals where it changed (a source read in partitions, ``docs/kafka.md``)."""
    if "partition_watermarks" not in top:
        return
    by_partition: dict[Hashable, list[Any]] = {}
    for i, raw in enumerate(_list(top, "partition_watermarks")):
        where = f"trace['partition_watermarks'][{i}]"
        rec = _record(raw, where, ("partition", "arrival", "ts"))
        partition = rec["partition"]
        if not isinstance(partition, (int, str)) or isinstance(partition, bool):
            raise TraceError(f"{where}['partition'] must be an int or str; got {partition!r}")
        by_partition.setdefault(partition, []).append({"arrival": rec["arrival"], "ts": rec["ts"]})
    for partition, marks in by_partition.items():
        try:
            _check_watermarks(marks, n)
        except TraceError as exc:
            raise TraceError(f"partition {partition!r}'s watermarks: {exc}") from None


def _check_focus(
    top: Mapping[str, Any], windows: set[tuple[Hashable, int | None, int | None]]
) -> None:
    """The optional ``focus`` (one listed window, marked, with a note) and
    ``watermark_note`` (text at the watermark's last step): an explanation's picture."""
    if "watermark_note" in top:
        _str(top, "watermark_note", "trace")
    if "focus" not in top:
        return
    where = "trace['focus']"
    rec = _record(top["focus"], where, ("key", "start", "end", "note"))
    _str(rec, "note", where)
    ident = _window_id(rec, where)
    if ident not in windows:
        raise TraceError(f"{where} must be one of trace['windows']; got {ident!r}")


def _window_id(rec: Mapping[str, Any], where: str) -> tuple[Hashable, int | None, int | None]:
    start = _int(rec, "start", where, none_ok=True)
    end = _int(rec, "end", where, none_ok=True)
    if (start is None) != (end is None) or (start is not None and end is not None and start >= end):
        raise TraceError(
            f"{where} must have start < end, or both None for GlobalWindow; "
            f"got start={start!r}, end={end!r}"
        )
    return _key(rec, where), start, end


def _check_windows(windows: list[Any]) -> set[tuple[Hashable, int | None, int | None]]:
    seen: set[tuple[Hashable, int | None, int | None]] = set()
    for i, raw in enumerate(windows):
        where = f"trace['windows'][{i}]"
        ident = _window_id(_record(raw, where, ("key", "start", "end")), where)
        if ident in seen:
            raise TraceError(f"{where} repeats window {ident!r}; list each window once")
        seen.add(ident)
    return seen


def _check_firings(
    firings: list[Any], n: int, windows: set[tuple[Hashable, int | None, int | None]]
) -> None:
    fields = ("key", "start", "end", "arrival", "watermark", "kind", "result")
    for i, raw in enumerate(firings):
        where = f"trace['firings'][{i}]"
        rec = _record(raw, where, fields)
        if _window_id(rec, where) not in windows:
            raise TraceError(
                f"{where} fires a window not listed in trace['windows']; got "
                f"key={rec['key']!r}, start={rec['start']!r}, end={rec['end']!r}"
            )
        _int(rec, "arrival", where, lo=-1, hi=n)
        _int(rec, "watermark", where)
        _str(rec, "kind", where, FIRING_KINDS)
        _str(rec, "result", where)


def validate_trace(trace: object) -> None:
    """Check that `trace` follows ``tools/TRACE.md`` exactly.

    Parameters
    ----------
    trace : object
        The candidate trace, usually a dict loaded from JSON.

    Raises
    ------
    TraceError
        A ``ValueError`` naming the first offending field and its value: unknown or
        missing keys, wrong types, unknown status or kind, elements not in arrival
        order, a watermark going back, a window with ``start >= end``, a repeated
        window, or a firing of a window that is not listed.

    Examples
    --------
    >>> validate_trace({"elements": [], "watermarks": [], "windows": [], "firings": []})
    >>> bad = {"elements": [{"key": "pv", "ts": 0, "arrival": 0, "label": "e1",
    ...                      "status": "late"}],
    ...        "watermarks": [], "windows": [], "firings": []}
    >>> try:
    ...     validate_trace(bad)
    ... except ValueError as exc:
    ...     print(exc)
    trace['elements'][0]['status'] must be one of 'on_time', 'late_firing', 'side_output', \
'dropped'; got 'late'
    """
    optional = ("title", "time_zone", "partition_watermarks", "focus", "watermark_note")
    top = _record(trace, "trace", ("elements", "watermarks", "windows", "firings"), optional)
    if top.get("title") is not None:
        _str(top, "title", "trace")
    if "time_zone" in top:
        _zone(_str(top, "time_zone", "trace"))
    elements = _list(top, "elements")
    _check_elements(elements)
    _check_watermarks(_list(top, "watermarks"), len(elements))
    windows = _check_windows(_list(top, "windows"))
    _check_firings(_list(top, "firings"), len(elements), windows)
    _check_partition_watermarks(top, len(elements))
    _check_focus(top, windows)


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise TraceError(
            f"trace['time_zone'] must be an IANA zone name such as 'Asia/Shanghai'; got {name!r}"
        ) from exc


# --------------------------------------------------------------------------- API


def timeline(
    trace: Mapping[str, Any], path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Draw what the windows did in a traced run, as a PNG or a self-contained HTML page.

    Parameters
    ----------
    trace : Mapping
        A run trace as described in ``tools/TRACE.md``; it is validated first.
    path : str or os.PathLike
        Output file. ``.png`` renders with matplotlib (needs ``tidemark[plot]``);
        ``.html`` writes an inline SVG with no script and no external resources.
    title : str, optional
        Overrides ``trace["title"]``.

    Returns
    -------
    pathlib.Path
        `path`, written.

    Raises
    ------
    ValueError
        If `path` ends neither in ``.png`` nor ``.html``.
    TraceError
        If `trace` is malformed (see `validate_trace`).

    Examples
    --------
    >>> import tempfile
    >>> trace = {"elements": [{"key": "k", "ts": 1, "arrival": 0, "label": "a",
    ...                        "status": "on_time"}],
    ...          "watermarks": [{"arrival": 0, "ts": 0}],
    ...          "windows": [{"key": "k", "start": 0, "end": 5}],
    ...          "firings": [{"key": "k", "start": 0, "end": 5, "arrival": 1,
    ...                       "watermark": 2**63 - 1, "kind": "on_time", "result": "1"}]}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = timeline(trace, Path(tmp) / "run.html")
    ...     "[0, 5)" in out.read_text()
    True
    """
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in (".png", ".html"):
        raise ValueError(f"`path` must end with '.png' or '.html'; got {str(path)!r}")
    validate_trace(trace)
    from tidemark import _timeline_draw

    _timeline_draw.render(trace, out, title)
    return out


def load_trace(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a trace saved by `save_trace` and validate it.

    Raises
    ------
    TraceError
        If the JSON does not follow ``tools/TRACE.md``.
    """
    trace = json.loads(Path(path).read_text(encoding="utf-8"))
    validate_trace(trace)
    return dict(trace)


def save_trace(trace: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Validate `trace` and write it as JSON, one element, window or firing per line.

    Tuple keys come back from `load_trace` as lists; the picture treats them the same.

    Examples
    --------
    >>> import tempfile
    >>> trace = {"elements": [], "watermarks": [], "windows": [], "firings": []}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     load_trace(save_trace(trace, Path(tmp) / "run.json")) == trace
    True
    """
    validate_trace(trace)
    lines = []
    for name, value in trace.items():
        if isinstance(value, list) and value:
            rows = ",\n".join(f"    {json.dumps(item)}" for item in value)
            lines.append(f"  {json.dumps(name)}: [\n{rows}\n  ]")
        else:
            lines.append(f"  {json.dumps(name)}: {json.dumps(value)}")
    out = Path(path)
    out.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    return out


def main_timeline(argv: Sequence[str] | None = None) -> int:
    """Run ``tidemark timeline TRACE.json OUT.(png|html) [--title T]``; return the exit code.

    Examples
    --------
    >>> main_timeline(["missing.json"])
    2
    """
    parser = argparse.ArgumentParser(
        prog="tidemark timeline", description="Draw what the windows did in a saved run."
    )
    parser.add_argument("trace_json", help="trace saved with tidemark.timeline.save_trace")
    parser.add_argument("out_path", help="output file ending in .png or .html")
    parser.add_argument("--title", default=None, help="title to show instead of the trace's")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error already
        return exc.code if isinstance(exc.code, int) else 2
    try:
        out = timeline(load_trace(args.trace_json), args.out_path, title=args.title)
    except (OSError, ValueError, ImportError) as exc:
        print(f"tidemark timeline: error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


class _CallableModule(types.ModuleType):
    """This module, callable: ``tidemark.timeline(trace, path)`` is `timeline`."""

    def __call__(
        self, trace: Mapping[str, Any], path: str | os.PathLike[str], *, title: str | None = None
    ) -> Path:
        return timeline(trace, path, title=title)


sys.modules[__name__].__class__ = _CallableModule
