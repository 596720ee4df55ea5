"""Random Dataflow-trigger scenarios, run on the engine in the format of tools/beamref/SCENARIO.md.

The same scenario runs through Apache Beam's own Python trigger driver
(``tools/beamref/run_beam.py``) and here, through ``WindowOperatorHarness`` with a
ProcessWindowFunction that reports ``context.pane()``. Outputs are compared per key and
window: each window's sequence of panes (with the step that emitted each) must be equal,
so across windows only the multiset within a step counts.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from typing import Any

import tidemark as tm
from tidemark.testing import WindowOperatorHarness

__all__ = [
    "build_trigger",
    "build_assigner",
    "random_scenario",
    "random_trigger",
    "run_on_engine",
    "compare",
]

LATE = tm.OutputTag("late")


class PaneRecord(tm.ProcessWindowFunction):
    """One record per pane: the window, the sorted values and ``context.pane()``."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        pane = context.pane()
        yield {
            "key": key,
            "window": [getattr(window, "start", None), getattr(window, "end", None)],
            "values": sorted(e[1] for e in elements),
            "timing": pane.timing.name,
            "index": pane.index,
            "non_speculative_index": pane.non_speculative_index,
            "is_first": pane.is_first,
            "is_last": pane.is_last,
        }


def build_trigger(spec: dict[str, Any]) -> Any:
    """tidemark's trigger for a SCENARIO.md trigger spec (1:1 with the constructors)."""
    kind = spec["type"]
    if kind == "DefaultTrigger":
        return tm.DefaultTrigger()
    if kind == "AfterCount":
        return tm.AfterCount(spec["count"])
    if kind == "AfterProcessingTime":
        return tm.AfterProcessingTime(spec["delay"])
    if kind == "AfterWatermark":
        early, late = spec.get("early"), spec.get("late")
        return tm.AfterWatermark(
            early=build_trigger(early) if early else None,
            late=build_trigger(late) if late else None,
        )
    if kind == "Repeatedly":
        return tm.Repeatedly(build_trigger(spec["trigger"]))
    if kind in ("AfterAny", "AfterAll", "AfterEach"):
        return getattr(tm, kind)(*(build_trigger(t) for t in spec["triggers"]))
    if kind == "OrFinally":
        return tm.OrFinally(build_trigger(spec["trigger"]), build_trigger(spec["until"]))
    raise ValueError(f"unknown trigger type {kind!r}")


def build_assigner(spec: dict[str, Any]) -> tm.WindowAssigner:
    kind = spec["type"]
    if kind == "TumblingEventTimeWindows":
        return tm.TumblingEventTimeWindows.of(spec["size"], spec.get("offset", 0))
    if kind == "SlidingEventTimeWindows":
        return tm.SlidingEventTimeWindows.of(spec["size"], spec["slide"], spec.get("offset", 0))
    if kind == "EventTimeSessionWindows":
        return tm.EventTimeSessionWindows.with_gap(spec["gap"])
    if kind == "GlobalWindows":
        return tm.GlobalWindows.create()
    raise ValueError(f"unknown assigner type {kind!r}")


def _harness(scenario: dict[str, Any]) -> WindowOperatorHarness:
    mode = scenario.get("accumulation_mode", "DISCARDING")
    return WindowOperatorHarness(  # type: ignore[call-arg]
        build_assigner(scenario["assigner"]),
        PaneRecord(),
        key_selector=lambda e: e[0],
        trigger=build_trigger(scenario["trigger"]),
        allowed_lateness=scenario.get("allowed_lateness", 0),
        late_data_tag=LATE if scenario.get("late_side_output") else None,
        accumulation_mode=getattr(tm.AccumulationMode, mode),
    )


def run_on_engine(scenario: dict[str, Any]) -> dict[str, Any]:
    """The scenario's panes, dropped count and late elements, as run_beam.py reports them."""
    h = _harness(scenario)
    panes: list[dict[str, Any]] = []
    late: list[dict[str, Any]] = []
    seen = [0, 0]

    def collect(step: int) -> None:
        output = h.output()
        panes.extend({"step": step, **value} for value, _ts in output[seen[0] :])
        side = h.side_output(LATE)
        for (key, value), ts in side[seen[1] :]:
            late.append({"step": step, "key": key, "value": value, "timestamp": ts})
        seen[:] = [len(output), len(side)]

    events = scenario["events"]
    for step, event in enumerate(events):
        if "element" in event:
            key, value, ts = event["element"]
            h.process_element((key, value), ts)
        else:
            h.process_watermark(event["watermark"])
        collect(step)
    h.process_watermark(tm.LONG_MAX)
    collect(len(events))
    return {"panes": panes, "dropped": h.num_late_records_dropped, "late": late}


def _by_window(panes: list[dict[str, Any]]) -> dict[str, list[str]]:
    windows: dict[str, list[str]] = defaultdict(list)
    for pane in panes:
        windows[json.dumps([pane["key"], pane["window"]])].append(json.dumps(pane, sort_keys=True))
    return windows


def compare(engine: dict[str, Any], beam: dict[str, Any]) -> str | None:
    """None when equal, else the first difference (per key and window, then the counts)."""
    ours, theirs = _by_window(engine["panes"]), _by_window(beam["panes"])
    for window in sorted(set(ours) | set(theirs)):
        a, b = ours.get(window, []), theirs.get(window, [])
        if a != b:
            return f"window {window}:\n  engine {a}\n  beam   {b}"
    if engine["dropped"] != beam["dropped"]:
        return f"dropped: engine {engine['dropped']}, beam {beam['dropped']}"
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    if sorted(engine["late"], key=key) != sorted(beam["late"], key=key):
        return f"late:\n  engine {engine['late']}\n  beam   {beam['late']}"
    return None


# ---------------------------------------------------------------- generation


def _random_assigner(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["tumbling", "tumbling", "sliding", "session", "session", "global"])
    if kind == "tumbling":
        size = rng.choice([4, 5, 10])
        return {"type": "TumblingEventTimeWindows", "size": size, "offset": rng.randrange(0, size)}
    if kind == "sliding":
        slide = rng.choice([3, 5])
        return {
            "type": "SlidingEventTimeWindows",
            "size": slide * rng.choice([1, 2, 3]),
            "slide": slide,
            "offset": rng.randrange(0, slide),
        }
    if kind == "session":
        return {"type": "EventTimeSessionWindows", "gap": rng.choice([2, 3, 5, 8])}
    return {"type": "GlobalWindows"}


def random_trigger(rng: random.Random, depth: int) -> dict[str, Any]:
    """A trigger spec nested at most ``depth`` deep (every kind except AfterProcessingTime)."""
    leaves = ["AfterCount", "AfterCount", "AfterWatermark", "DefaultTrigger"]
    composites = ["AfterWatermark+", "Repeatedly", "AfterAny", "AfterAll", "AfterEach", "OrFinally"]
    kind = rng.choice(leaves if depth <= 1 else leaves + composites * 2)
    if kind == "AfterCount":
        return {"type": "AfterCount", "count": rng.choice([1, 2, 2, 3, 4])}
    if kind in ("AfterWatermark", "DefaultTrigger"):
        return {"type": kind}
    sub = depth - 1
    if kind == "AfterWatermark+":
        spec: dict[str, Any] = {"type": "AfterWatermark"}
        for part in rng.choice([["early"], ["late"], ["early", "late"]]):
            spec[part] = random_trigger(rng, sub)
        return spec
    if kind == "Repeatedly":
        return {"type": "Repeatedly", "trigger": random_trigger(rng, sub)}
    if kind == "OrFinally":
        return {
            "type": "OrFinally",
            "trigger": random_trigger(rng, sub),
            "until": random_trigger(rng, sub),
        }
    count = rng.choice([2, 2, 3])
    return {"type": kind, "triggers": [random_trigger(rng, sub) for _ in range(count)]}


def _random_events(rng: random.Random, keys: list[str]) -> list[dict[str, Any]]:
    """Out-of-order elements, watermarks that may jump several windows, late elements."""
    events: list[dict[str, Any]] = []
    clock = rng.randrange(0, 10)
    watermark: int | None = None
    value = 0
    for _ in range(rng.randrange(4, 26)):
        clock += rng.randrange(0, 4)
        ts = max(0, clock - rng.randrange(0, 10))
        value += 1
        events.append({"element": [rng.choice(keys), value, ts]})
        if rng.random() < 0.35:
            jump = rng.choice([0, 0, 2, 5, 15])
            candidate = clock - rng.randrange(0, 8) + jump
            if watermark is None or candidate > watermark:
                watermark = candidate
                clock = max(clock, watermark - rng.randrange(0, 6))
                events.append({"watermark": watermark})
    return events


def random_scenario(rng: random.Random, index: int) -> dict[str, Any]:
    """One scenario in SCENARIO.md's format; ``index`` names it."""
    return {
        "name": f"random-{index}",
        "assigner": _random_assigner(rng),
        "trigger": random_trigger(rng, rng.choice([1, 2, 2, 3, 3])),
        "accumulation_mode": rng.choice(["DISCARDING", "ACCUMULATING"]),
        "allowed_lateness": rng.choice([0, 0, 2, 5, 12]),
        "late_side_output": rng.random() < 0.5,
        "events": _random_events(rng, ["a", "b", "c"][: rng.randrange(1, 4)]),
    }
