"""Random window scenarios, run on the engine in the format of tools/flinkref/SCENARIO.md.

The same scenario runs on real Flink 1.20 (``tools/flinkref``) and here; outputs are
compared segment by segment (the records between two forwarded watermarks, as a
multiset), the way Flink's own tests compare.
"""

from __future__ import annotations

import json
import random
from typing import Any

import tidemark as tm
from tidemark.testing import Watermark, WindowOperatorHarness

__all__ = ["random_scenario", "run_on_engine", "segments", "compare"]

LATE = tm.OutputTag("late")


def _value(element: tuple[str, int]) -> int:
    return element[1]


def _delta(old: tuple[str, int], new: tuple[str, int]) -> float:
    return float(abs(new[1] - old[1]))


class Emit(tm.ProcessWindowFunction):
    """Emits what SCENARIO.md's functions emit: key, window, result, watermark."""

    def __init__(self, kind: str, keyed: bool):
        self.kind = kind
        self.keyed = keyed

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        items = list(elements)
        if self.kind == "process":
            value: Any = [e[1] for e in items]
        elif self.kind == "reduce":
            value = None if items[0] is None else items[0][1]
        else:
            value = list(items[0])
        yield {
            "key": key if self.keyed else None,
            "start": getattr(window, "start", None),
            "end": getattr(window, "end", None),
            "value": value,
            "watermark": context.current_watermark(),
        }


class SumCount(tm.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value[1], accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> list[int]:
        return list(accumulator)

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


def _sum(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    return (a[0], a[1] + b[1])


def _assigner(spec: dict[str, Any]) -> tm.WindowAssigner:
    kind = spec["type"]
    if kind == "TumblingEventTimeWindows":
        return tm.TumblingEventTimeWindows.of(spec["size"], spec.get("offset", 0))
    if kind == "SlidingEventTimeWindows":
        return tm.SlidingEventTimeWindows.of(spec["size"], spec["slide"], spec.get("offset", 0))
    if kind == "EventTimeSessionWindows":
        return tm.EventTimeSessionWindows.with_gap(spec["gap"])
    if kind == "DynamicEventTimeSessionWindows":
        unit = spec["gap_unit"]
        return tm.DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: unit * (1 + e[1] % 4))
    return tm.GlobalWindows.create()


def _trigger(spec: dict[str, Any] | None) -> tm.Trigger | None:
    if spec is None:
        return None
    kind = spec["type"]
    if kind == "EventTimeTrigger":
        return tm.EventTimeTrigger.create()
    if kind == "CountTrigger":
        return tm.CountTrigger.of(spec["count"])
    if kind == "PurgingTrigger":
        inner = _trigger(spec["inner"])
        assert inner is not None
        return tm.PurgingTrigger.of(inner)
    if kind == "ContinuousEventTimeTrigger":
        return tm.ContinuousEventTimeTrigger.of(spec["interval"])
    return tm.DeltaTrigger.of(spec["threshold"], _delta)


def _evictor(spec: dict[str, Any] | None) -> tm.Evictor | None:
    if spec is None:
        return None
    after = spec.get("after", False)
    if spec["type"] == "CountEvictor":
        return tm.CountEvictor.of(spec["count"], after)
    if spec["type"] == "TimeEvictor":
        return tm.TimeEvictor.of(spec["interval"], after)
    return tm.DeltaEvictor.of(spec["threshold"], _delta, after)


def _harness(scenario: dict[str, Any]) -> WindowOperatorHarness:
    keyed = scenario["keyed"]
    emit = Emit(scenario["function"], keyed)
    function: Any = {
        "process": emit,
        "reduce": (_sum, emit),
        "aggregate": (SumCount(), emit),
    }[scenario["function"]]
    return WindowOperatorHarness(
        _assigner(scenario["assigner"]),
        function,
        key_selector=(lambda e: e[0]) if keyed else None,
        trigger=_trigger(scenario.get("trigger")),
        evictor=_evictor(scenario.get("evictor")),
        allowed_lateness=scenario.get("allowed_lateness", 0),
        late_data_tag=LATE if scenario.get("side_output") else None,
    )


def run_on_engine(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenario's output as the Flink runner reports it."""
    h = _harness(scenario)
    out: list[dict[str, Any]] = []
    seen_events = 0
    seen_late = 0

    def collect() -> None:
        nonlocal seen_events, seen_late
        events = h.output_with_watermarks()
        for item in events[seen_events:]:
            if isinstance(item, Watermark):
                out.append({"watermark": item.timestamp})
            else:
                value, ts = item
                out.append({"result": {**value, "ts": ts}})
        seen_events = len(events)
        late = h.side_output(LATE)
        for element, ts in late[seen_late:]:
            out.append({"late": {"key": element[0], "value": element[1], "ts": ts}})
        seen_late = len(late)

    for event in scenario["events"]:
        if "element" in event:
            e = event["element"]
            h.process_element((e["key"], e["value"]), e["ts"])
        else:
            h.process_watermark(event["watermark"])
        collect()
    h.process_watermark(tm.LONG_MAX)
    collect()
    return out


def segments(output: list[dict[str, Any]]) -> list[list[str]]:
    """Records between forwarded watermarks, each segment sorted (a multiset)."""
    result: list[list[str]] = [[]]
    for item in output:
        if "watermark" in item:
            result[-1].sort()
            result.append([json.dumps(item)])
            result.append([])
        else:
            result[-1].append(json.dumps(item, sort_keys=True))
    result[-1].sort()
    return result


def compare(engine: list[dict[str, Any]], flink: list[dict[str, Any]]) -> str | None:
    """None when equal, else a short description of the first differing segment."""
    ours, theirs = segments(engine), segments(flink)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"segment {i}:\n  engine {a}\n  flink  {b}"
    if len(ours) != len(theirs):
        return f"engine has {len(ours)} segments, flink {len(theirs)}"
    return None


# ---------------------------------------------------------------- generation


def _random_assigner(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["tumbling", "tumbling", "sliding", "session", "dynamic", "global"])
    if kind == "tumbling":
        size = rng.choice([3, 5, 10, 20])
        return {
            "type": "TumblingEventTimeWindows",
            "size": size,
            "offset": rng.randrange(-size + 1, size),
        }
    if kind == "sliding":
        slide = rng.choice([2, 3, 5])
        size = slide * rng.choice([1, 2, 3])
        return {
            "type": "SlidingEventTimeWindows",
            "size": size,
            "slide": slide,
            "offset": rng.randrange(-slide + 1, slide),
        }
    if kind == "session":
        return {"type": "EventTimeSessionWindows", "gap": rng.choice([2, 3, 5, 8])}
    if kind == "dynamic":
        return {"type": "DynamicEventTimeSessionWindows", "gap_unit": rng.choice([1, 2, 3])}
    return {"type": "GlobalWindows"}


def _random_trigger(rng: random.Random, assigner: dict[str, Any]) -> dict[str, Any] | None:
    merging = "Session" in assigner["type"]
    is_global = assigner["type"] == "GlobalWindows"
    options: list[Any] = [None, {"type": "CountTrigger", "count": rng.choice([1, 2, 3])}]
    if not is_global:
        options += [
            None,
            {"type": "EventTimeTrigger"},
            {"type": "ContinuousEventTimeTrigger", "interval": rng.choice([2, 3, 4])},
        ]
    if not merging:
        options.append({"type": "DeltaTrigger", "threshold": rng.choice([1, 3, 5])})
    trigger = rng.choice(options)
    if is_global and trigger is None:
        trigger = {"type": "CountTrigger", "count": rng.choice([2, 3])}
    if trigger is not None and rng.random() < 0.3:
        trigger = {"type": "PurgingTrigger", "inner": trigger}
    return trigger


def _random_evictor(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.6:
        return None
    after = rng.random() < 0.5
    return rng.choice(
        [
            {"type": "CountEvictor", "count": rng.choice([1, 2, 3]), "after": after},
            {"type": "TimeEvictor", "interval": rng.choice([0, 2, 5]), "after": after},
            {"type": "DeltaEvictor", "threshold": rng.choice([1, 3, 6]), "after": after},
        ]
    )


def _random_events(rng: random.Random, keys: list[str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    clock = rng.randrange(-30, 10)
    watermark = None
    for _ in range(rng.randrange(5, 30)):
        clock += rng.randrange(0, 4)
        ts = clock - rng.randrange(0, 12)
        events.append(
            {"element": {"key": rng.choice(keys), "value": rng.randrange(0, 9), "ts": ts}}
        )
        if rng.random() < 0.4:
            candidate = clock - rng.randrange(0, 8)
            if watermark is None or candidate > watermark:
                watermark = candidate
                events.append({"watermark": watermark})
    return events


def random_scenario(rng: random.Random, index: int) -> dict[str, Any]:
    assigner = _random_assigner(rng)
    keyed = rng.random() < 0.8
    return {
        "name": f"random-{index}",
        "keyed": keyed,
        "assigner": assigner,
        "trigger": _random_trigger(rng, assigner),
        "evictor": _random_evictor(rng),
        "allowed_lateness": rng.choice([0, 0, 1, 3, 7]),
        "side_output": rng.random() < 0.6,
        "function": rng.choice(["process", "process", "reduce", "aggregate"]),
        "events": _random_events(rng, ["a", "b", "c"][: rng.randrange(1, 4)]),
    }
