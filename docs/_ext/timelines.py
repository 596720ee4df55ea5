"""Sphinx extension: draw the concept pages' timeline pictures when the docs build.

Each picture is made by running its example in ``docs/examples/concepts.py`` on the
engine (``tidemark.testing.replay_trace`` or the harness with a tracer) and drawing the
trace with ``tidemark.timeline``, into ``docs/_generated/`` (not committed). The Kafka
page's pictures are traces of a real run, recorded by ``tools/kafka/record_run.py`` into
``docs/examples/kafka_runs.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _draw(app: Any) -> None:
    docs = Path(app.srcdir)
    sys.path.insert(0, str(docs / "examples"))
    import concepts  # docs/examples/concepts.py

    concepts.draw_all(docs / "_generated")
    _draw_kafka_runs(docs)


def _draw_kafka_runs(docs: Path) -> None:
    from tidemark.timeline import timeline

    runs = json.loads((docs / "examples" / "kafka_runs.json").read_text())
    for name, trace in runs.items():
        timeline(trace, docs / "_generated" / f"kafka-{name.replace('_', '-')}.png")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _draw)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
