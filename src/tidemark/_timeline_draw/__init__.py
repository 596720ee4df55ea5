"""Drawing for :mod:`tidemark.timeline`: layout, the PNG (matplotlib) and the HTML (SVG).

The public module validates a trace and calls :func:`render`; this package turns the
trace into a :class:`~tidemark._timeline_draw.scene.Scene` (what to draw, in data
coordinates; :mod:`~tidemark._timeline_draw.scene`) and writes it with one of two
writers that share its layout (:mod:`~tidemark._timeline_draw.png`,
:mod:`~tidemark._timeline_draw.html`). matplotlib is imported only inside the PNG writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tidemark._timeline_draw.html import write_html
from tidemark._timeline_draw.png import write_png
from tidemark._timeline_draw.scene import make_scene

__all__ = ["render"]


def render(trace: Mapping[str, Any], path: Path, title: str | None) -> None:
    """Write the picture of a validated `trace` to `path` (``.png`` or ``.html``)."""
    scene = make_scene(trace, title)
    (write_png if path.suffix.lower() == ".png" else write_html)(scene, path)
