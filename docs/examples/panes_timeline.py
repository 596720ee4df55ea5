"""Draw ``docs/images/panes-timeline.png``: one key's panes under
``AfterWatermark(early=AfterCount(2), late=AfterCount(1))`` in RETRACTING mode.

Run: ``python docs/examples/panes_timeline.py [path.png|path.html]``.
"""

from __future__ import annotations

import sys

import tidemark as tm
from tidemark._engine.trace import Tracer
from tidemark.testing import WindowOperatorHarness


class Total(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield sum(value for _, value in elements)


def draw(path: str) -> None:
    tracer = Tracer(title="AfterWatermark(early=AfterCount(2), late=AfterCount(1)), RETRACTING")
    h = WindowOperatorHarness(
        tm.TumblingEventTimeWindows.of(10),
        Total(),
        key_selector=lambda v: v[0],
        trigger=tm.AfterWatermark(early=tm.AfterCount(2), late=tm.AfterCount(1)),
        accumulation_mode=tm.AccumulationMode.RETRACTING,
        allowed_lateness=10,
        tracer=tracer,
    )
    steps = [
        (1, 5),
        (3, 2),
        (4, 1),
        (6, 4),
        (12, 3),
        ("wm", 9),
        (2, 7),
        (14, 2),
        (8, 1),
        ("wm", 15),
    ]
    for step in steps:
        if step[0] == "wm":
            tracer.process_watermark(h.operator, step[1])
        else:
            ts, value = step
            tracer.process_element(h.operator, "k", ("k", value), ts, f"{value}@{ts}")
    tracer.finish(h.operator)
    tm.timeline(tracer.trace(), path)


if __name__ == "__main__":
    draw(sys.argv[1] if len(sys.argv) > 1 else "docs/images/panes-timeline.png")
