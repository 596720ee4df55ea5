"""The picture of a trace, in data coordinates (:class:`Scene`), and the layout both
writers share (:func:`layout`): what :mod:`tidemark._timeline_draw` draws."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from tidemark.timeline import ELEMENT_STATUSES, FIRING_KINDS

__all__ = [
    "Scene",
    "Focus",
    "Lane",
    "Box",
    "make_scene",
    "layout",
    "ylim_with_strip",
    "STATUS_STYLE",
    "KIND_STYLE",
    "BAND_COLOURS",
    "FOCUS_COLOUR",
    "FOCUS_EDGE",
    "WATERMARK_COLOUR",
    "FIG_W",
    "LEFT",
    "RIGHT",
    "LABEL_ROW_IN",
]

# Flink's watermarks start at Long.MIN_VALUE and end input at Long.MAX_VALUE; anything
# this far out is "infinite" rather than a point to put on the axis.
_INFINITE_MS = 2**62
_EPOCH_THRESHOLD_MS = 1e11
_CLOCK_STEPS_MS = (
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    250,
    500,
    1000,
    2000,
    5000,
    10_000,
    15_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    21_600_000,
    43_200_000,
    86_400_000,
)

# (colour, matplotlib marker, legend text); the SVG writer draws the same shapes.
STATUS_STYLE = {
    "on_time": ("#1f77b4", "o", "element, on time"),
    "late_firing": ("#ff7f0e", "o", "element, late (late firing)"),
    "side_output": ("#9467bd", "D", "element, late (side output)"),
    "dropped": ("#d62728", "X", "element, late (dropped)"),
}
KIND_STYLE = {
    "early": ("#8c8c8c", "^", "early firing: result"),
    "on_time": ("#2ca02c", "s", "on-time firing: result"),
    "late": ("#ff7f0e", "v", "late firing: result"),
    "retraction": ("#d62728", "<", "retraction of an earlier result"),
}
BAND_COLOURS = ("#4c72b0", "#55a8a0")
FOCUS_COLOUR, FOCUS_EDGE = "#ffd54f", "#e6a100"  # the window a question is about
WATERMARK_COLOUR = "#222222"
_PARTITION_COLOURS = ("#17becf", "#bcbd22", "#e377c2", "#8c564b", "#7f7f7f", "#aec7e8")

# Layout in inches (SVG uses 96 px per inch); both writers share it.
FIG_W, LEFT, RIGHT = 11.0, 1.15, 0.45
_ROW_IN, LABEL_ROW_IN, _LANE_GAP, _BOTTOM = 0.17, 0.22, 0.42, 0.62
_CHAR_IN = 0.068  # rough width of one 8 pt character, to keep window labels apart

# --------------------------------------------------------------------------- time


@dataclass(frozen=True)
class _Clock:
    """Formats event times: wall-clock in `zone`, or plain ms when `zone` is None."""

    zone: tzinfo | None

    def wall(self, ms: float) -> datetime:
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (epoch + timedelta(milliseconds=ms)).astimezone(self.zone)

    def text(self, ms: float, precise: bool) -> str:
        if self.zone is None:
            return str(int(ms)) if float(ms).is_integer() else f"{ms:g}"
        stamp = self.wall(ms).strftime("%H:%M:%S")
        return f"{stamp}.{int(ms) % 1000:03d}" if precise else stamp

    def interval(self, start: int, end: int) -> str:
        precise = start % 1000 != 0 or end % 1000 != 0
        return f"[{self.text(start, precise)}, {self.text(end, precise)})"

    def axis_label(self, lo: float, hi: float) -> str:
        if self.zone is None:
            return "event time (ms)"
        days = sorted({self.wall(lo).date().isoformat(), self.wall(hi).date().isoformat()})
        return f"event time ({' to '.join(days)}, {self.zone})"

    def ticks(self, lo: float, hi: float) -> tuple[tuple[float, str], ...]:
        raw = (hi - lo) / 7
        if self.zone is None:
            mag = 10 ** math.floor(math.log10(max(raw, 1e-9)))
            step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
            offset = 0.0
        else:
            day = _CLOCK_STEPS_MS[-1]
            step = next((s for s in _CLOCK_STEPS_MS if s >= raw), math.ceil(raw / day) * day)
            utc_offset = self.wall(lo).utcoffset()
            offset = utc_offset.total_seconds() * 1000 if utc_offset else 0.0
        first = math.ceil((lo + offset) / step) * step - offset
        xs = [first + i * step for i in range(int((hi - first) // step) + 1)]
        if self.zone is not None and step >= _CLOCK_STEPS_MS[-1]:
            return tuple((x, self.wall(x).strftime("%Y-%m-%d")) for x in xs)
        precise = any(round(x) % 1000 for x in xs)
        return tuple((x, self.text(x, precise)) for x in xs)


def _clock(trace: Mapping[str, Any]) -> _Clock:
    times = [e["ts"] for e in trace["elements"]]
    times += [w[b] for w in trace["windows"] for b in ("start", "end") if w[b] is not None]
    if not any(abs(t) > _EPOCH_THRESHOLD_MS for t in times):
        return _Clock(None)
    return _Clock(ZoneInfo(trace.get("time_zone") or "UTC"))


def _x_range(trace: Mapping[str, Any]) -> tuple[float, float]:
    xs = [e["ts"] for e in trace["elements"]]
    xs += [w[b] for w in trace["windows"] for b in ("start", "end") if w[b] is not None]
    marks = [w["ts"] for w in trace["watermarks"] if abs(w["ts"]) < _INFINITE_MS]
    if not xs:
        xs = marks or [0, 1000]
    lo, hi = min(xs), max(xs)
    span = max(hi - lo, 1)
    # A watermark far outside the data (huge out-of-orderness) would squash the
    # picture; it is clipped to the edge instead.
    near = [m for m in marks if lo - span / 4 <= m <= hi + span / 4]
    lo, hi = min([lo, *near]), max([hi, *near])
    span = max(hi - lo, 1)
    return lo - 0.04 * span, hi + 0.07 * span


# --------------------------------------------------------------------------- scene


@dataclass(frozen=True)
class _Dot:
    x: float
    y: float
    label: str
    status: str
    tip: str


@dataclass(frozen=True)
class _Band:
    x0: float
    x1: float
    row: int
    shade: int
    label: str


@dataclass(frozen=True)
class _Mark:
    x: float
    y: float
    kind: str
    text: str
    tip: str
    left: bool  # text left of the mark (inside its window) unless that would collide


@dataclass(frozen=True)
class Focus:
    """The window a question is about (a trace's ``focus``): outlined, with its note."""

    lane: str
    x0: float
    x1: float
    note: str


@dataclass(frozen=True)
class Lane:
    name: str
    dots: tuple[_Dot, ...]
    bands: tuple[_Band, ...]
    marks: tuple[_Mark, ...]
    rows: int


@dataclass(frozen=True)
class Scene:
    """What to draw, in data coordinates; both writers render exactly this."""

    title: str
    lanes: tuple[Lane, ...]
    watermark: tuple[tuple[float, float], ...]
    end_of_input: tuple[float, float] | None
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    xticks: tuple[tuple[float, str], ...]
    yticks: tuple[tuple[float, str], ...]
    xlabel: str
    statuses: tuple[str, ...]
    kinds: tuple[str, ...]
    # a source read in partitions: (partition name, its own watermark's step line)
    partitions: tuple[tuple[str, tuple[tuple[float, float], ...]], ...] = ()
    focus: Focus | None = None
    # text at the watermark's last step: (x, y, text)
    watermark_note: tuple[float, float, str] | None = None

    def clip(self, x: float) -> float:
        return min(max(x, self.xlim[0]), self.xlim[1])


def _lane_name(key: Hashable) -> str:
    return f"({', '.join(map(str, key))})" if isinstance(key, tuple) else str(key)


def _watermark_text(ms: int, clock: _Clock) -> str:
    if ms >= _INFINITE_MS:
        return "+inf (end of input)"
    return "-inf (none yet)" if ms <= -_INFINITE_MS else clock.text(ms, True)


def _per_char(xlim: tuple[float, float]) -> float:
    """Approximate width of one label character in data units."""
    return _CHAR_IN * (xlim[1] - xlim[0]) / (FIG_W - LEFT - RIGHT)


def _bands(
    windows: list[tuple[int | None, int | None]],
    clock: _Clock,
    xlim: tuple[float, float],
    shades: Mapping[tuple[int | None, int | None], int],
) -> tuple[_Band, ...]:
    """Give overlapping windows (sliding) separate label rows, so labels never collide."""
    per_char = _per_char(xlim)
    row_ends: list[float] = []
    bands = []
    for start, end in sorted(windows, key=lambda w: (w[0] is not None, w[0] or 0, w[1] or 0)):
        if start is None or end is None:
            x0, x1, label = xlim[0], xlim[1], "GlobalWindow (whole axis)"
        else:
            x0, x1, label = start, end, clock.interval(start, end)
        half = max(x1 - x0, len(label) * per_char * 1.1) / 2
        left, right = (x0 + x1) / 2 - half, (x0 + x1) / 2 + half
        row = next((r for r, e in enumerate(row_ends) if e <= left), len(row_ends))
        row_ends[row : row + 1] = [right]
        bands.append(_Band(x0, x1, row, shades[start, end], label))
    return tuple(bands)


def _marks(
    firings: list[Mapping[str, Any]], clock: _Clock, xlim: tuple[float, float], row_gap: float
) -> tuple[_Mark, ...]:
    """Place each firing at its window end, after its arrival; text where it fits."""
    spots = []
    for f in firings:
        wm = f["watermark"]
        if f["end"] is not None:
            x, name = f["end"], clock.interval(f["start"], f["end"])
        else:
            x, name = (wm if abs(wm) < _INFINITE_MS else xlim[1]), "GlobalWindow"
        tip = (
            f"{name} fired {f['kind']} after arrival {f['arrival']}, watermark "
            f"{_watermark_text(wm, clock)}: {f['result']}"
        )
        spots.append((min(max(x, xlim[0]), xlim[1]), f["arrival"], f, tip))
    spots = _spread(spots)
    per_char = _per_char(xlim)
    # Every marker is an obstacle; each text goes left of its marker (inside its
    # window) unless it would cover another marker or an already placed text.
    taken = [(y, x - 1.5 * per_char, x + 1.5 * per_char) for x, y, _, _ in spots]
    marks = []
    for i, (x, y, f, tip) in enumerate(spots):
        # a retraction repeats an earlier result: its marker, not its text (the tip has it)
        text = "" if f["kind"] == "retraction" else f["result"]
        width = (2.5 + len(text)) * per_char if text else 0.0
        others = taken[:i] + taken[i + 1 :]
        left = not any(
            abs(ty - y) < row_gap and lo < x - per_char and hi > x - width for ty, lo, hi in others
        )
        taken.append((y, x - width, x) if left else (y, x, x + width))
        marks.append(_Mark(x, y, f["kind"], text, tip, left))
    return tuple(marks)


def _spread(spots: list[tuple[float, int, Any, str]]) -> list[tuple[float, float, Any, str]]:
    """Firings at one window end after one arrival (a pane and the retraction before
    it, or several panes) stacked within the arrival's row, in firing order; a lone
    firing sits mid-row."""
    counts = Counter((x, arrival) for x, arrival, _, _ in spots)
    seen: Counter[tuple[float, int]] = Counter()
    spread = []
    for x, arrival, f, tip in spots:
        n, k = counts[x, arrival], seen[x, arrival]
        seen[x, arrival] += 1
        spread.append((x, arrival + (k + 1) / (n + 1), f, tip))
    return spread


def _lanes(trace: Mapping[str, Any], clock: _Clock, xlim: tuple[float, float]) -> tuple[Lane, ...]:
    groups: dict[Hashable, dict[str, list[Any]]] = {}
    for part in ("elements", "windows", "firings"):
        for rec in trace[part]:
            key = tuple(rec["key"]) if isinstance(rec["key"], list) else rec["key"]
            groups.setdefault(key, {"elements": [], "windows": [], "firings": []})
            groups[key][part].append(rec)
    # The same window gets the same tint in every lane; neighbours alternate.
    spans = sorted(
        {(w["start"], w["end"]) for w in trace["windows"]},
        key=lambda w: (w[0] is not None, w[0] or 0, w[1] or 0),
    )
    shades = {span: i % 2 for i, span in enumerate(spans)}
    n_rows = len(trace["elements"]) + 2
    row_gap = 0.2 * n_rows / _plot_height(n_rows)  # 0.2 inch, in arrivals
    lanes = []
    for key, got in groups.items():
        dots = tuple(
            _Dot(
                e["ts"],
                e["arrival"],
                e["label"],
                e["status"],
                f"{e['label']} key={_lane_name(key)} ts={clock.text(e['ts'], True)}"
                f" arrival={e['arrival']} {e['status']}",
            )
            for e in got["elements"]
        )
        bands = _bands([(w["start"], w["end"]) for w in got["windows"]], clock, xlim, shades)
        rows = 1 + max((b.row for b in bands), default=0)
        marks = _marks(got["firings"], clock, xlim, row_gap)
        lanes.append(Lane(_lane_name(key), dots, bands, marks, rows))
    return tuple(lanes)


def _watermark_line(
    trace: Mapping[str, Any],
    xlim: tuple[float, float],
) -> tuple[tuple[tuple[float, float], ...], tuple[float, float] | None]:
    """Step line: the watermark after arrival i holds from y=i+0.5 up to the next change."""
    marks, n = trace["watermarks"], len(trace["elements"])
    points: list[tuple[float, float]] = []
    for i, w in enumerate(marks):
        x = min(max(w["ts"], xlim[0]), xlim[1])
        top = marks[i + 1]["arrival"] + 0.5 if i + 1 < len(marks) else n + 0.75
        points += [(x, w["arrival"] + 0.5), (x, top)]
    ended = bool(marks) and marks[-1]["ts"] >= _INFINITE_MS
    return tuple(points), ((xlim[1], marks[-1]["arrival"] + 0.5) if ended else None)


def _yticks(n: int, end_of_input: bool) -> tuple[tuple[float, str], ...]:
    step = next(s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 10**9) if n / s <= 12)
    ticks: list[tuple[float, str]] = [(float(a), str(a)) for a in range(0, n, step)]
    return (*ticks, (n + 0.5, "end of input")) if end_of_input else tuple(ticks)


def make_scene(trace: Mapping[str, Any], title: str | None) -> Scene:
    clock, xlim = _clock(trace), _x_range(trace)
    n = len(trace["elements"])
    line, eoi = _watermark_line(trace, xlim)
    ends_input = eoi is not None or any(f["arrival"] == n for f in trace["firings"])
    present = {e["status"] for e in trace["elements"]}
    fired = {f["kind"] for f in trace["firings"]}
    return Scene(
        title=title or trace.get("title") or "tidemark timeline",
        lanes=_lanes(trace, clock, xlim),
        watermark=line,
        end_of_input=eoi,
        xlim=xlim,
        ylim=(-1.0, n + 1.0),
        xticks=clock.ticks(*xlim),
        yticks=_yticks(n, ends_input),
        xlabel=clock.axis_label(*xlim),
        statuses=tuple(s for s in ELEMENT_STATUSES if s in present),
        kinds=tuple(k for k in FIRING_KINDS if k in fired),
        partitions=_partition_lines(trace, xlim),
        focus=_focus(trace, xlim),
        watermark_note=_watermark_note(trace, line),
    )


def _focus(trace: Mapping[str, Any], xlim: tuple[float, float]) -> Focus | None:
    focus = trace.get("focus")
    if focus is None:
        return None
    key = tuple(focus["key"]) if isinstance(focus["key"], list) else focus["key"]
    start, end = focus["start"], focus["end"]
    x0, x1 = (xlim[0], xlim[1]) if start is None or end is None else (start, end)
    return Focus(_lane_name(key), x0, x1, focus["note"])


def _watermark_note(
    trace: Mapping[str, Any], line: tuple[tuple[float, float], ...]
) -> tuple[float, float, str] | None:
    note = trace.get("watermark_note")
    if note is None or not line:
        return None
    x, y = line[-1]  # the top of the last step: above every element
    return x, y, note


def _partition_lines(
    trace: Mapping[str, Any], xlim: tuple[float, float]
) -> tuple[tuple[str, tuple[tuple[float, float], ...]], ...]:
    """Each partition's own watermark as a step line, as :func:`_watermark_line` draws
    the source's (their minimum)."""
    marks: dict[Hashable, list[Any]] = {}
    for rec in trace.get("partition_watermarks", ()):
        marks.setdefault(rec["partition"], []).append(rec)
    return tuple(
        (
            f"partition {p}",
            _watermark_line({"watermarks": m, "elements": trace["elements"]}, xlim)[0],
        )
        for p, m in marks.items()
    )


def partition_colour(index: int) -> str:
    """The colour of the ``index``-th partition's watermark line."""
    return _PARTITION_COLOURS[index % len(_PARTITION_COLOURS)]


@dataclass(frozen=True)
class Box:
    """A lane's plot area in inches from the figure's top-left corner."""

    top: float
    height: float
    strip: float  # the part at the top holding the window labels


def _plot_height(n_rows: float) -> float:
    """Height in inches of a lane's data area holding `n_rows` arrivals."""
    return min(max(_ROW_IN * n_rows, 1.3), 3.0)


def layout(scene: Scene) -> tuple[float, float, tuple[Box, ...]]:
    """Return figure height, top of the first lane, and each lane's box (inches)."""
    plot_h = _plot_height(scene.ylim[1] - scene.ylim[0])
    entries = len(scene.statuses) + len(scene.kinds) + 2 + len(scene.partitions)
    legend_rows = math.ceil(entries / 5)
    top = 0.55 + 0.26 * legend_rows
    boxes, y = [], top
    for lane in scene.lanes:
        strip = LABEL_ROW_IN * lane.rows + 0.06
        y += 0.26  # lane name
        boxes.append(Box(y, plot_h + strip, strip))
        y += plot_h + strip + _LANE_GAP
    return y - _LANE_GAP + _BOTTOM, top, tuple(boxes)


def ylim_with_strip(scene: Scene, box: Box) -> tuple[float, float]:
    lo, hi = scene.ylim
    return lo, hi + (hi - lo) * box.strip / (box.height - box.strip)
