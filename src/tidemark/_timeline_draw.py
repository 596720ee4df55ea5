"""Drawing for :mod:`tidemark.timeline`: layout, the PNG (matplotlib) and the HTML (SVG).

The public module validates a trace and calls :func:`render`; this one turns the trace
into a :class:`_Scene` (what to draw, in data coordinates) and writes it with one of two
writers that share a layout. matplotlib is imported only inside the PNG writer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from html import escape
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from tidemark.timeline import ELEMENT_STATUSES, FIRING_KINDS

__all__ = ["render"]

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
_STATUS_STYLE = {
    "on_time": ("#1f77b4", "o", "element, on time"),
    "late_firing": ("#ff7f0e", "o", "element, late (late firing)"),
    "side_output": ("#9467bd", "D", "element, late (side output)"),
    "dropped": ("#d62728", "X", "element, late (dropped)"),
}
_KIND_STYLE = {
    "early": ("#8c8c8c", "^", "early firing: result"),
    "on_time": ("#2ca02c", "s", "on-time firing: result"),
    "late": ("#ff7f0e", "v", "late firing: result"),
    "retraction": ("#d62728", "<", "retraction of an earlier result"),
}
_BAND_COLOURS = ("#4c72b0", "#55a8a0")
_WATERMARK_COLOUR = "#222222"

# Layout in inches (SVG uses 96 px per inch); both writers share it.
_FIG_W, _LEFT, _RIGHT = 11.0, 1.15, 0.45
_ROW_IN, _LABEL_ROW_IN, _LANE_GAP, _BOTTOM = 0.17, 0.22, 0.42, 0.62
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
class _Lane:
    name: str
    dots: tuple[_Dot, ...]
    bands: tuple[_Band, ...]
    marks: tuple[_Mark, ...]
    rows: int


@dataclass(frozen=True)
class _Scene:
    """What to draw, in data coordinates; both writers render exactly this."""

    title: str
    lanes: tuple[_Lane, ...]
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
    return _CHAR_IN * (xlim[1] - xlim[0]) / (_FIG_W - _LEFT - _RIGHT)


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


def _lanes(trace: Mapping[str, Any], clock: _Clock, xlim: tuple[float, float]) -> tuple[_Lane, ...]:
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
        lanes.append(_Lane(_lane_name(key), dots, bands, marks, rows))
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


def _scene(trace: Mapping[str, Any], title: str | None) -> _Scene:
    clock, xlim = _clock(trace), _x_range(trace)
    n = len(trace["elements"])
    line, eoi = _watermark_line(trace, xlim)
    ends_input = eoi is not None or any(f["arrival"] == n for f in trace["firings"])
    present = {e["status"] for e in trace["elements"]}
    fired = {f["kind"] for f in trace["firings"]}
    return _Scene(
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
    )


_PARTITION_COLOURS = ("#17becf", "#bcbd22", "#e377c2", "#8c564b", "#7f7f7f", "#aec7e8")


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


def _partition_style(index: int) -> str:
    return _PARTITION_COLOURS[index % len(_PARTITION_COLOURS)]


def _draw_partition_lines_mpl(ax: Any, scene: _Scene) -> None:
    for i, (_name, points) in enumerate(scene.partitions):
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, color=_partition_style(i), lw=1.1, ls=":", zorder=2)


def _partition_handles_mpl(scene: _Scene) -> list[Any]:
    from matplotlib.lines import Line2D

    return [
        Line2D([], [], color=_partition_style(i), ls=":", label=f"watermark of {name}")
        for i, (name, _points) in enumerate(scene.partitions)
    ]


def _svg_partition_lines(scene: _Scene, sx: Any, sy: Any) -> list[str]:
    out = []
    for i, (name, points) in enumerate(scene.partitions):
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{_partition_style(i)}" '
            f'stroke-width="1.2" stroke-dasharray="1.5,2.5"><title>watermark of '
            f"{escape(name)}</title></polyline>"
        )
    return out


@dataclass(frozen=True)
class _Box:
    """A lane's plot area in inches from the figure's top-left corner."""

    top: float
    height: float
    strip: float  # the part at the top holding the window labels


def _plot_height(n_rows: float) -> float:
    """Height in inches of a lane's data area holding `n_rows` arrivals."""
    return min(max(_ROW_IN * n_rows, 1.3), 3.0)


def _layout(scene: _Scene) -> tuple[float, float, tuple[_Box, ...]]:
    """Return figure height, top of the first lane, and each lane's box (inches)."""
    plot_h = _plot_height(scene.ylim[1] - scene.ylim[0])
    entries = len(scene.statuses) + len(scene.kinds) + 2 + len(scene.partitions)
    legend_rows = math.ceil(entries / 5)
    top = 0.55 + 0.26 * legend_rows
    boxes, y = [], top
    for lane in scene.lanes:
        strip = _LABEL_ROW_IN * lane.rows + 0.06
        y += 0.26  # lane name
        boxes.append(_Box(y, plot_h + strip, strip))
        y += plot_h + strip + _LANE_GAP
    return y - _LANE_GAP + _BOTTOM, top, tuple(boxes)


def _ylim_with_strip(scene: _Scene, box: _Box) -> tuple[float, float]:
    lo, hi = scene.ylim
    return lo, hi + (hi - lo) * box.strip / (box.height - box.strip)


# --------------------------------------------------------------------------- PNG


def _draw_lane_mpl(ax: Any, scene: _Scene, lane: _Lane, box: _Box) -> None:
    lo, hi = _ylim_with_strip(scene, box)
    ax.set_xlim(*scene.xlim)
    ax.set_ylim(lo, hi)
    for b in lane.bands:
        colour = _BAND_COLOURS[b.shade]
        ax.axvspan(b.x0, b.x1, color=colour, alpha=0.12, lw=0)
        ax.vlines(
            [b.x0, b.x1],
            0,
            1,
            transform=ax.get_xaxis_transform(),
            colors=colour,
            alpha=0.45,
            lw=0.8,
        )
        y = 1 - (b.row + 0.55) * _LABEL_ROW_IN / box.height
        ax.text(
            (b.x0 + b.x1) / 2,
            y,
            b.label,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="center",
            fontsize=8,
            color="#333355",
        )
    if scene.watermark:
        xs, ys = zip(*scene.watermark, strict=True)
        ax.plot(xs, ys, color=_WATERMARK_COLOUR, lw=1.3, ls="--", zorder=2)
    _draw_partition_lines_mpl(ax, scene)
    if scene.end_of_input:
        ax.plot(*scene.end_of_input, marker=">", color=_WATERMARK_COLOUR, clip_on=False)
        ax.annotate(
            "+∞",
            scene.end_of_input,
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color=_WATERMARK_COLOUR,
            annotation_clip=False,
        )
    for d in lane.dots:
        colour, marker, _ = _STATUS_STYLE[d.status]
        ax.scatter(
            [d.x],
            [d.y],
            s=46,
            c=colour,
            marker=marker,
            zorder=4,
            edgecolors="white",
            linewidths=0.6,
        )
        ax.annotate(
            d.label,
            (d.x, d.y),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color=colour,
            zorder=5,
        )
    for m in lane.marks:
        colour, marker, _ = _KIND_STYLE[m.kind]
        ax.scatter(
            [m.x],
            [m.y],
            s=70,
            c=colour,
            marker=marker,
            zorder=6,
            edgecolors="black",
            linewidths=0.8,
        )
        if m.text:
            ax.annotate(
                m.text,
                (m.x, m.y),
                xytext=(-8 if m.left else 8, 0),
                textcoords="offset points",
                ha="right" if m.left else "left",
                va="center",
                fontsize=8,
                fontweight="bold",
                zorder=6,
                bbox={
                    "boxstyle": "round,pad=0.2",
                    "fc": "white",
                    "ec": colour,
                    "alpha": 0.9,
                    "lw": 0.8,
                },
            )


def _style_axes_mpl(ax: Any, scene: _Scene, lane: _Lane, last: bool) -> None:
    ax.set_xticks([x for x, _ in scene.xticks])
    ax.set_xticklabels([t for _, t in scene.xticks] if last else [], fontsize=8)
    ax.set_yticks([y for y, _ in scene.yticks])
    ax.set_yticklabels([t for _, t in scene.yticks], fontsize=7.5)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"key = {lane.name}", loc="left", fontsize=10, fontweight="bold", pad=4)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if last:
        ax.set_xlabel(scene.xlabel, fontsize=9)


def _legend_mpl(fig: Any, scene: _Scene, top: float, height: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [
        Patch(color=_BAND_COLOURS[0], alpha=0.25, label="window [start, end)"),
        Line2D([], [], color=_WATERMARK_COLOUR, ls="--", label="watermark"),
        *_partition_handles_mpl(scene),
    ]
    for status in scene.statuses:
        colour, marker, text = _STATUS_STYLE[status]
        handles.append(Line2D([], [], ls="", marker=marker, color=colour, label=text))
    for kind in scene.kinds:
        colour, marker, text = _KIND_STYLE[kind]
        handles.append(Line2D([], [], ls="", marker=marker, color=colour, mec="black", label=text))
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=min(5, len(handles)),
        bbox_to_anchor=(0.5, 1 - 0.5 / height),
        frameon=False,
        fontsize=8.5,
    )
    fig.text(
        0.015,
        1 - (top + height) / 2 / height,
        "arrival order (later ↑)",
        rotation=90,
        va="center",
        fontsize=9,
    )


def _write_png(scene: _Scene, path: Path) -> None:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            "timeline(): writing a .png needs matplotlib; install it with "
            "`pip install tidemark[plot]`, or write .html instead"
        ) from exc
    height, top, boxes = _layout(scene)
    fig = Figure(figsize=(_FIG_W, height), dpi=110)
    FigureCanvasAgg(fig)
    fig.suptitle(scene.title, y=1 - 0.12 / height, va="top", fontsize=12.5, fontweight="bold")
    for i, (lane, box) in enumerate(zip(scene.lanes, boxes, strict=True)):
        rect = (
            _LEFT / _FIG_W,
            1 - (box.top + box.height) / height,
            (_FIG_W - _LEFT - _RIGHT) / _FIG_W,
            box.height / height,
        )
        ax = fig.add_axes(rect)
        _draw_lane_mpl(ax, scene, lane, box)
        _style_axes_mpl(ax, scene, lane, i == len(boxes) - 1)
    _legend_mpl(fig, scene, top, height)
    fig.savefig(path, format="png", facecolor="white")


# --------------------------------------------------------------------------- HTML


_PX = 96.0
_PT = _PX / 72


def _svg_marker(marker: str, x: float, y: float, r: float, fill: str, stroke: str) -> str:
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="1"'
    shapes = {
        "o": f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" {paint}/>',
        "s": f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" '
        f'height="{2 * r:.1f}" {paint}/>',
    }
    points = {
        "D": [(0, -1.2), (1.2, 0), (0, 1.2), (-1.2, 0)],
        "^": [(0, -1.25), (1.15, 0.85), (-1.15, 0.85)],
        "v": [(0, 1.25), (1.15, -0.85), (-1.15, -0.85)],
        ">": [(1.25, 0), (-0.85, 1.15), (-0.85, -1.15)],
        "<": [(-1.25, 0), (0.85, 1.15), (0.85, -1.15)],
        "X": [
            (-1, -0.6),
            (-0.6, -1),
            (0, -0.4),
            (0.6, -1),
            (1, -0.6),
            (0.4, 0),
            (1, 0.6),
            (0.6, 1),
            (0, 0.4),
            (-0.6, 1),
            (-1, 0.6),
            (-0.4, 0),
        ],
    }
    if marker in shapes:
        return shapes[marker]
    pts = " ".join(f"{x + dx * r:.1f},{y + dy * r:.1f}" for dx, dy in points[marker])
    return f'<polygon points="{pts}" {paint}/>'


def _svg_text(x: float, y: float, text: str, size: float, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size * _PT:.1f}"{extra}>{escape(text)}</text>'
    )


def _svg_lane(scene: _Scene, lane: _Lane, box: _Box, last: bool) -> list[str]:
    lo, hi = _ylim_with_strip(scene, box)
    x0, w = _LEFT * _PX, (_FIG_W - _LEFT - _RIGHT) * _PX
    top, h = box.top * _PX, box.height * _PX

    def sx(x: float) -> float:
        return x0 + (x - scene.xlim[0]) / (scene.xlim[1] - scene.xlim[0]) * w

    def sy(y: float) -> float:
        return top + (hi - y) / (hi - lo) * h

    out = [_svg_text(x0, top - 6, f"key = {lane.name}", 10, font_weight="bold")]
    out += [
        f'<line x1="{sx(x):.1f}" y1="{top:.1f}" x2="{sx(x):.1f}" y2="{top + h:.1f}" '
        f'stroke="#dddddd"/>'
        for x, _ in scene.xticks
    ]
    for b in lane.bands:
        out.append(
            f'<rect x="{sx(b.x0):.1f}" y="{top:.1f}" width="{sx(b.x1) - sx(b.x0):.1f}" '
            f'height="{h:.1f}" fill="{_BAND_COLOURS[b.shade]}" fill-opacity="0.12" '
            f'stroke="{_BAND_COLOURS[b.shade]}" stroke-opacity="0.45">'
            f"<title>{escape(b.label)}</title></rect>"
        )
        ly = top + (b.row + 0.55) * _LABEL_ROW_IN * _PX + 4
        out.append(
            _svg_text(sx((b.x0 + b.x1) / 2), ly, b.label, 8, text_anchor="middle", fill="#333355")
        )
    out += _svg_axes(scene, sx, sy, (x0, top, w, h), last)
    if scene.watermark:
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in scene.watermark)
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{_WATERMARK_COLOUR}" '
            f'stroke-width="1.4" stroke-dasharray="5,3"><title>watermark</title>'
            f"</polyline>"
        )
    out += _svg_partition_lines(scene, sx, sy)
    if scene.end_of_input:
        ex, ey = sx(scene.end_of_input[0]), sy(scene.end_of_input[1])
        out.append(_svg_marker(">", ex, ey, 4.5, _WATERMARK_COLOUR, _WATERMARK_COLOUR))
        out.append(_svg_text(ex + 8, ey + 3.5, "+∞", 8))
    out += _svg_points(lane, sx, sy)
    return out


def _svg_axes(
    scene: _Scene, sx: Any, sy: Any, rect: tuple[float, float, float, float], last: bool
) -> list[str]:
    x0, top, w, h = rect
    out = [
        f'<path d="M{x0:.1f},{top:.1f} V{top + h:.1f} H{x0 + w:.1f}" fill="none" stroke="#333"/>'
    ]
    for y, text in scene.yticks:
        out.append(_svg_text(x0 - 6, sy(y) + 3, text, 7.5, text_anchor="end"))
    if last:
        for x, text in scene.xticks:
            out.append(_svg_text(sx(x), top + h + 15, text, 8, text_anchor="middle"))
        out.append(_svg_text(x0 + w / 2, top + h + 36, scene.xlabel, 9, text_anchor="middle"))
    return out


def _svg_points(lane: _Lane, sx: Any, sy: Any) -> list[str]:
    out = []
    for d in lane.dots:
        colour, marker, _ = _STATUS_STYLE[d.status]
        out.append(
            f"<g><title>{escape(d.tip)}</title>"
            f"{_svg_marker(marker, sx(d.x), sy(d.y), 4.6, colour, 'white')}"
            f"{_svg_text(sx(d.x) + 8, sy(d.y) + 3.5, d.label, 8, fill=colour)}</g>"
        )
    for m in lane.marks:
        colour, marker, _ = _KIND_STYLE[m.kind]
        x, y = sx(m.x), sy(m.y)
        width = len(m.text) * 6.6 + 8
        box_x, text_x = (x - 10 - width, x - 14) if m.left else (x + 10, x + 14)
        anchor = "end" if m.left else "start"
        label = (
            f'<rect x="{box_x:.1f}" y="{y - 8:.1f}" width="{width:.1f}" height="16" rx="3" '
            f'fill="white" fill-opacity="0.9" stroke="{colour}"/>'
            f"{_svg_text(text_x, y + 4, m.text, 8, text_anchor=anchor, font_weight='bold')}"
            if m.text
            else ""
        )
        out.append(
            f"<g><title>{escape(m.tip)}</title>{label}"
            f"{_svg_marker(marker, x, y, 5.5, colour, 'black')}</g>"
        )
    return out


def _svg_legend(scene: _Scene, y: float) -> list[str]:
    entries: list[tuple[str, str, str]] = [
        ("band", _BAND_COLOURS[0], "window [start, end)"),
        ("line", _WATERMARK_COLOUR, "watermark"),
    ]
    entries += [
        ("line", _partition_style(i), f"watermark of {name}")
        for i, (name, _) in enumerate(scene.partitions)
    ]
    entries += [(m, c, t) for c, m, t in (_STATUS_STYLE[s] for s in scene.statuses)]
    entries += [(m, c, t) for c, m, t in (_KIND_STYLE[k] for k in scene.kinds)]
    out: list[str] = []
    for i, (marker, colour, text) in enumerate(entries):
        row = entries[i - i % 5 : i - i % 5 + 5]
        widths = [40 + len(t) * 6.2 for _, _, t in row]
        x = (_FIG_W * _PX - sum(widths)) / 2 + 10 + sum(widths[: i % 5])
        row_y = y + (i // 5) * 0.26 * _PX
        if marker == "band":
            out.append(
                f'<rect x="{x - 8}" y="{row_y - 6}" width="16" height="12" '
                f'fill="{colour}" fill-opacity="0.25"/>'
            )
        elif marker == "line":
            out.append(
                f'<line x1="{x - 10}" y1="{row_y}" x2="{x + 10}" y2="{row_y}" '
                f'stroke="{colour}" stroke-width="1.4" stroke-dasharray="5,3"/>'
            )
        else:
            out.append(_svg_marker(marker, x, row_y, 5, colour, "black"))
        out.append(_svg_text(x + 14, row_y + 4, text, 8.5))
    return out


def _write_html(scene: _Scene, path: Path) -> None:
    height, top, boxes = _layout(scene)
    w, h = _FIG_W * _PX, height * _PX
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
        f'viewBox="0 0 {w:.0f} {h:.0f}" font-family="DejaVu Sans, Helvetica, Arial, '
        f'sans-serif">',
        f'<rect width="{w:.0f}" height="{h:.0f}" fill="white"/>',
        _svg_text(w / 2, 0.35 * _PX, scene.title, 12.5, text_anchor="middle", font_weight="bold"),
    ]
    parts += _svg_legend(scene, 0.62 * _PX)
    for i, (lane, box) in enumerate(zip(scene.lanes, boxes, strict=True)):
        parts += _svg_lane(scene, lane, box, i == len(boxes) - 1)
    mid = (top + height) / 2 * _PX
    parts.append(
        f'<text x="16" y="{mid:.1f}" font-size="12" transform="rotate(-90 16 '
        f'{mid:.1f})" text-anchor="middle">arrival order (later ↑)</text></svg>'
    )
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<title>{escape(scene.title)}</title></head>\n<body style="margin:16px">\n'
        + "\n".join(parts)
        + "\n</body></html>\n"
    )
    path.write_text(page, encoding="utf-8")


def render(trace: Mapping[str, Any], path: Path, title: str | None) -> None:
    """Write the picture of a validated `trace` to `path` (``.png`` or ``.html``)."""
    scene = _scene(trace, title)
    (_write_png if path.suffix.lower() == ".png" else _write_html)(scene, path)
