"""The examples of the concept pages (``docs/concepts/``), each a small run on the engine.

Every function returns the run's trace (``tidemark.testing.replay_trace``, or the harness
with a tracer); the pages show the functions' code, check what they give with doctests
(``tests/docs/test_docs.py``), and show the trace drawn by ``tidemark.timeline``:
``make docs`` calls :func:`draw_all`. Times are small integers of milliseconds.

Run: ``python docs/examples/concepts.py [output-dir]`` draws every picture;
``python docs/examples/concepts.py --readme`` draws the README's picture,
``docs/images/timeline.png`` (committed, as GitHub shows the README without building).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import tidemark as tm
from tidemark._engine.trace import Tracer
from tidemark.testing import WindowOperatorHarness, replay_trace

# Elements are (user, amount) tuples; each is given with its timestamp and a label.
CLICKS = [
    (("ann", 1), 1, "a1"),
    (("ann", 2), 4, "a2"),
    (("bob", 5), 6, "b5"),
    (("ann", 3), 12, "a3"),
    (("bob", 1), 14, "b1"),
    (("ann", 4), 23, "a4"),
]


def user(value: tuple[str, int]) -> str:
    return value[0]


def add(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    """The reduce function of the examples: ``(user, amount)`` summed per window."""
    return (a[0], a[1] + b[1])


def firings(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
    """``(key, start, end, kind, result)`` of each firing, in order."""
    return [(f["key"], f["start"], f["end"], f["kind"], f["result"]) for f in trace["firings"]]


def statuses(trace: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, status)`` of each element, in arrival order."""
    return [(e["label"], e["status"]) for e in trace["elements"]]


def tumbling() -> dict[str, Any]:
    return replay_trace(
        tm.TumblingEventTimeWindows.of(10),
        add,
        CLICKS,
        key_selector=user,
        title="TumblingEventTimeWindows.of(10), reduce: sum",
    )


def sliding() -> dict[str, Any]:
    return replay_trace(
        tm.SlidingEventTimeWindows.of(10, 5),
        add,
        CLICKS[:3],
        key_selector=user,
        title="SlidingEventTimeWindows.of(10, 5), reduce: sum",
    )


def count_trigger() -> dict[str, Any]:
    return replay_trace(
        tm.TumblingEventTimeWindows.of(20),
        add,
        [(("ann", n), ts, f"a{n}") for n, ts in enumerate([1, 3, 5, 8, 12], start=1)],
        key_selector=user,
        trigger=tm.CountTrigger.of(2),
        title="TumblingEventTimeWindows.of(20) with CountTrigger.of(2)",
    )


class Amounts(tm.ProcessWindowFunction):
    """The amounts left in the window when it fires."""

    def process(self, key, context, elements):
        yield [amount for _, amount in elements]


def evictor() -> dict[str, Any]:
    return replay_trace(
        tm.TumblingEventTimeWindows.of(10),
        Amounts(),
        [(("ann", n), ts, f"a{n}") for n, ts in [(1, 1), (2, 3), (3, 5), (4, 8)]],
        key_selector=user,
        evictor=tm.CountEvictor.of(2),
        title="TumblingEventTimeWindows.of(10) with CountEvictor.of(2)",
    )


class Average(tm.AggregateFunction):
    """The mean amount of a window: the accumulator is ``(sum, count)``."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):  # needed by merging windows (sessions)
        return (a[0] + b[0], a[1] + b[1])


def aggregate() -> dict[str, Any]:
    return replay_trace(
        tm.TumblingEventTimeWindows.of(10),
        Average(),
        CLICKS,
        key_selector=user,
        title="TumblingEventTimeWindows.of(10), aggregate: Average()",
    )


OUT_OF_ORDER = [
    (("ann", 1), 2, "a1@2"),
    (("ann", 2), 11, "a2@11"),
    (("ann", 3), 8, "a3@8"),
    (("ann", 4), 14, "a4@14"),
    (("ann", 5), 6, "a5@6"),
    (("ann", 6), 25, "a6@25"),
]


def watermarks() -> dict[str, Any]:
    return replay_trace(
        tm.TumblingEventTimeWindows.of(10),
        add,
        OUT_OF_ORDER,
        key_selector=user,
        out_of_orderness=3,
        title="out_of_orderness=3: watermark = max timestamp - 3 - 1",
    )


def lateness() -> dict[str, Any]:
    return replay_trace(
        tm.TumblingEventTimeWindows.of(10),
        add,
        OUT_OF_ORDER,
        key_selector=user,
        out_of_orderness=3,
        allowed_lateness=5,
        title="out_of_orderness=3, allowed_lateness=5",
    )


LATE = tm.OutputTag("late")


def late_data() -> dict[str, Any]:
    return replay_trace(
        tm.TumblingEventTimeWindows.of(10),
        add,
        OUT_OF_ORDER,
        key_selector=user,
        out_of_orderness=3,
        late_data_tag=LATE,
        title='out_of_orderness=3, side_output_late_data(OutputTag("late"))',
    )


def sessions() -> dict[str, Any]:
    return replay_trace(
        tm.EventTimeSessionWindows.with_gap(5),
        add,
        [
            (("ann", 1), 1, "a1"),
            (("ann", 2), 9, "a2"),
            (("ann", 3), 4, "a3"),
            (("ann", 4), 20, "a4"),
        ],
        key_selector=user,
        out_of_orderness=6,
        title="EventTimeSessionWindows.with_gap(5): a3 joins the two sessions",
    )


class Top(tm.ProcessAllWindowFunction):
    """The user with the largest total of the window."""

    def process(self, context, elements):
        yield max(elements, key=lambda v: v[1])


def consecutive() -> dict[str, Any]:
    """Per-user totals every 10 ms, then the top user of every 20 ms, on the engine."""
    per_user = WindowOperatorHarness(tm.TumblingEventTimeWindows.of(10), add, key_selector=user)
    for value, timestamp, _ in CLICKS:
        per_user.process_element(value, timestamp)
    per_user.process_watermark(tm.LONG_MAX)  # the end of a bounded input
    tracer = Tracer(title="second window: TumblingEventTimeWindows.of(20) over per-user totals")
    top = WindowOperatorHarness(tm.TumblingEventTimeWindows.of(20), Top(), tracer=tracer)
    for total, timestamp in per_user.output():  # each total carries its window's end - 1
        tracer.process_element(top.operator, None, total, timestamp, f"{total[0]}:{total[1]}")
    tracer.process_watermark(top.operator, tm.LONG_MAX)
    tracer.finish(top.operator)
    return tracer.trace()


PICTURES = {
    "tumbling": tumbling,
    "sliding": sliding,
    "count-trigger": count_trigger,
    "evictor": evictor,
    "aggregate": aggregate,
    "watermarks": watermarks,
    "lateness": lateness,
    "late-data": late_data,
    "sessions": sessions,
    "consecutive": consecutive,
}


def draw_all(directory: Path) -> list[Path]:
    """Draw every example's timeline as ``<directory>/<name>.png``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, example in PICTURES.items():
        path = directory / f"{name}.png"
        tm.timeline(example(), str(path))
        paths.append(path)
    return paths


if __name__ == "__main__":
    if sys.argv[1:] == ["--readme"]:
        tm.timeline(lateness(), str(Path(__file__).parent.parent / "images" / "timeline.png"))
    else:
        for drawn in draw_all(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_generated")):
            print(drawn)
