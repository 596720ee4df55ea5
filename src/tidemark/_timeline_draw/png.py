"""The PNG writer of a :class:`~tidemark._timeline_draw.scene.Scene` (matplotlib,
imported only here, when a PNG is written)."""

from __future__ import annotations

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

__all__ = ["write_png"]


def _draw_lane_mpl(ax: Any, scene: Scene, lane: Lane, box: Box) -> None:
    lo, hi = ylim_with_strip(scene, box)
    ax.set_xlim(*scene.xlim)
    ax.set_ylim(lo, hi)
    _draw_bands(ax, lane, box)
    if scene.focus is not None and scene.focus.lane == lane.name:
        _draw_focus(ax, scene)
    _draw_watermark(ax, scene)
    _draw_dots(ax, lane)
    _draw_marks(ax, lane)


def _draw_bands(ax: Any, lane: Lane, box: Box) -> None:
    """Each window as a band, its label in the lane's strip."""
    for b in lane.bands:
        colour = BAND_COLOURS[b.shade]
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
        y = 1 - (b.row + 0.55) * LABEL_ROW_IN / box.height
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


def _draw_focus(ax: Any, scene: Scene) -> None:
    """The window a question is about: outlined, its note in the lane's title row."""
    focus = scene.focus
    assert focus is not None
    ax.axvspan(focus.x0, focus.x1, fc=FOCUS_COLOUR, alpha=0.22, ec=FOCUS_EDGE, lw=2.2, zorder=1)
    ax.set_title(focus.note, loc="right", fontsize=8.5, fontweight="bold", color="#7a5200", pad=4)


def _draw_watermark_note(ax: Any, scene: Scene) -> None:
    if scene.watermark_note is None:
        return
    x, y, text = scene.watermark_note
    right = _in_right_half(scene, x)  # then the text goes left, inside the axes
    ax.annotate(
        text,
        (scene.clip(x), y),
        xytext=(-8 if right else 8, 0),
        textcoords="offset points",
        ha="right" if right else "left",
        va="center",
        fontsize=8,
        fontweight="bold",
        color=WATERMARK_COLOUR,
        zorder=7,
        annotation_clip=False,
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": WATERMARK_COLOUR, "lw": 0.8},
    )


def _in_right_half(scene: Scene, x: float) -> bool:
    lo, hi = scene.xlim
    return scene.clip(x) > (lo + hi) / 2


def _draw_watermark(ax: Any, scene: Scene) -> None:
    """The watermark's line, and its end of input (+inf)."""
    if scene.watermark:
        xs, ys = zip(*scene.watermark, strict=True)
        ax.plot(xs, ys, color=WATERMARK_COLOUR, lw=1.3, ls="--", zorder=2)
    for i, (_name, points) in enumerate(scene.partitions):
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, color=partition_colour(i), lw=1.1, ls=":", zorder=2)
    if scene.end_of_input:
        ax.plot(*scene.end_of_input, marker=">", color=WATERMARK_COLOUR, clip_on=False)
        ax.annotate(
            "+∞",
            scene.end_of_input,
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
            color=WATERMARK_COLOUR,
            annotation_clip=False,
        )
    _draw_watermark_note(ax, scene)


def _draw_dots(ax: Any, lane: Lane) -> None:
    """Each element, coloured by what became of it."""
    for d in lane.dots:
        colour, marker, _ = STATUS_STYLE[d.status]
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


def _draw_marks(ax: Any, lane: Lane) -> None:
    """Each firing's result, marked by its kind."""
    for m in lane.marks:
        colour, marker, _ = KIND_STYLE[m.kind]
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


def _style_axes_mpl(ax: Any, scene: Scene, lane: Lane, last: bool) -> None:
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


def _legend_mpl(fig: Any, scene: Scene, top: float, height: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [
        Patch(color=BAND_COLOURS[0], alpha=0.25, label="window [start, end)"),
        Line2D([], [], color=WATERMARK_COLOUR, ls="--", label="watermark"),
    ]
    handles += [
        Line2D([], [], color=partition_colour(i), ls=":", label=f"watermark of {name}")
        for i, (name, _points) in enumerate(scene.partitions)
    ]
    for status in scene.statuses:
        colour, marker, text = STATUS_STYLE[status]
        handles.append(Line2D([], [], ls="", marker=marker, color=colour, label=text))
    for kind in scene.kinds:
        colour, marker, text = KIND_STYLE[kind]
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


def write_png(scene: Scene, path: Path) -> None:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            "timeline(): writing a .png needs matplotlib; install it with "
            "`pip install tidemark[plot]`, or write .html instead"
        ) from exc
    height, top, boxes = layout(scene)
    fig = Figure(figsize=(FIG_W, height), dpi=110)
    FigureCanvasAgg(fig)
    fig.suptitle(scene.title, y=1 - 0.12 / height, va="top", fontsize=12.5, fontweight="bold")
    for i, (lane, box) in enumerate(zip(scene.lanes, boxes, strict=True)):
        rect = (
            LEFT / FIG_W,
            1 - (box.top + box.height) / height,
            (FIG_W - LEFT - RIGHT) / FIG_W,
            box.height / height,
        )
        ax = fig.add_axes(rect)
        _draw_lane_mpl(ax, scene, lane, box)
        _style_axes_mpl(ax, scene, lane, i == len(boxes) - 1)
    _legend_mpl(fig, scene, top, height)
    fig.savefig(path, format="png", facecolor="white")
