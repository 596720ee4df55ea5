"""The HTML writer of a :class:`~tidemark._timeline_draw.scene.Scene` (one SVG)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from tidemark._timeline_draw.scene import (
    BAND_COLOURS,
    FIG_W,
    FOCUS_COLOUR,
    FOCUS_EDGE,
    KIND_STYLE,
    LABEL_ROW_IN,
    LEFT,
    RIGHT,
    STATUS_STYLE,
    WATERMARK_COLOUR,
    Box,
    Lane,
    Scene,
    layout,
    partition_colour,
    ylim_with_strip,
)

__all__ = ["write_html"]


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


def _svg_lane(scene: Scene, lane: Lane, box: Box, last: bool) -> list[str]:
    lo, hi = ylim_with_strip(scene, box)
    x0, w = LEFT * _PX, (FIG_W - LEFT - RIGHT) * _PX
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
            f'height="{h:.1f}" fill="{BAND_COLOURS[b.shade]}" fill-opacity="0.12" '
            f'stroke="{BAND_COLOURS[b.shade]}" stroke-opacity="0.45">'
            f"<title>{escape(b.label)}</title></rect>"
        )
        ly = top + (b.row + 0.55) * LABEL_ROW_IN * _PX + 4
        out.append(
            _svg_text(sx((b.x0 + b.x1) / 2), ly, b.label, 8, text_anchor="middle", fill="#333355")
        )
    if scene.focus is not None and scene.focus.lane == lane.name:
        out += _svg_focus(scene, sx, (x0, top, h))
    out += _svg_axes(scene, sx, sy, (x0, top, w, h), last)
    if scene.watermark:
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in scene.watermark)
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{WATERMARK_COLOUR}" '
            f'stroke-width="1.4" stroke-dasharray="5,3"><title>watermark</title>'
            f"</polyline>"
        )
    out += _svg_partition_lines(scene, sx, sy)
    if scene.end_of_input:
        ex, ey = sx(scene.end_of_input[0]), sy(scene.end_of_input[1])
        out.append(_svg_marker(">", ex, ey, 4.5, WATERMARK_COLOUR, WATERMARK_COLOUR))
        out.append(_svg_text(ex + 8, ey + 3.5, "+∞", 8))
    if scene.watermark_note is not None:
        nx, ny, note = scene.watermark_note
        out.append(_svg_note(scene, nx, sx(scene.clip(nx)), sy(ny), note))
    out += _svg_points(lane, sx, sy)
    return out


def _svg_note(scene: Scene, at: float, x: float, y: float, note: str) -> str:
    """The watermark's note beside its last step (at ``at``), on the side with room."""
    lo, hi = scene.xlim
    if scene.clip(at) > (lo + hi) / 2:
        return _svg_text(x - 8, y + 3, note, 8, font_weight="bold", text_anchor="end")
    return _svg_text(x + 8, y + 3, note, 8, font_weight="bold")


def _svg_focus(scene: Scene, sx: Any, frame: tuple[float, float, float]) -> list[str]:
    """The window a question is about: outlined, its note in the lane's title row."""
    focus = scene.focus
    assert focus is not None
    x0, top, h = frame
    right_edge = (FIG_W - RIGHT) * _PX
    left, right = sx(scene.clip(focus.x0)), sx(scene.clip(focus.x1))
    return [
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" height="{h:.1f}" '
        f'fill="{FOCUS_COLOUR}" fill-opacity="0.22" stroke="{FOCUS_EDGE}" stroke-width="2.2">'
        f"<title>{escape(focus.note)}</title></rect>",
        _svg_text(
            right_edge,
            top - 6,
            focus.note,
            8.5,
            text_anchor="end",
            font_weight="bold",
            fill="#7a5200",
        ),
    ]


def _svg_partition_lines(scene: Scene, sx: Any, sy: Any) -> list[str]:
    out = []
    for i, (name, points) in enumerate(scene.partitions):
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{partition_colour(i)}" '
            f'stroke-width="1.2" stroke-dasharray="1.5,2.5"><title>watermark of '
            f"{escape(name)}</title></polyline>"
        )
    return out


def _svg_axes(
    scene: Scene, sx: Any, sy: Any, rect: tuple[float, float, float, float], last: bool
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


def _svg_points(lane: Lane, sx: Any, sy: Any) -> list[str]:
    out = []
    for d in lane.dots:
        colour, marker, _ = STATUS_STYLE[d.status]
        out.append(
            f"<g><title>{escape(d.tip)}</title>"
            f"{_svg_marker(marker, sx(d.x), sy(d.y), 4.6, colour, 'white')}"
            f"{_svg_text(sx(d.x) + 8, sy(d.y) + 3.5, d.label, 8, fill=colour)}</g>"
        )
    for m in lane.marks:
        colour, marker, _ = KIND_STYLE[m.kind]
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


def _svg_legend(scene: Scene, y: float) -> list[str]:
    entries: list[tuple[str, str, str]] = [
        ("band", BAND_COLOURS[0], "window [start, end)"),
        ("line", WATERMARK_COLOUR, "watermark"),
    ]
    entries += [
        ("line", partition_colour(i), f"watermark of {name}")
        for i, (name, _) in enumerate(scene.partitions)
    ]
    entries += [(m, c, t) for c, m, t in (STATUS_STYLE[s] for s in scene.statuses)]
    entries += [(m, c, t) for c, m, t in (KIND_STYLE[k] for k in scene.kinds)]
    out: list[str] = []
    for i, (marker, colour, text) in enumerate(entries):
        row = entries[i - i % 5 : i - i % 5 + 5]
        widths = [40 + len(t) * 6.2 for _, _, t in row]
        x = (FIG_W * _PX - sum(widths)) / 2 + 10 + sum(widths[: i % 5])
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


def write_html(scene: Scene, path: Path) -> None:
    height, top, boxes = layout(scene)
    w, h = FIG_W * _PX, height * _PX
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
