"""Sphinx extension: draw the concept pages' timeline pictures when the docs build.

Each picture is made by running its example in ``docs/examples/concepts.py`` on the
engine (``tidemark.testing.replay_trace`` or the harness with a tracer) and drawing the
trace with ``tidemark.timeline``, into ``docs/_generated/`` (not committed).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def _draw(app: Any) -> None:
    docs = Path(app.srcdir)
    sys.path.insert(0, str(docs / "examples"))
    import concepts  # docs/examples/concepts.py

    concepts.draw_all(docs / "_generated")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _draw)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
