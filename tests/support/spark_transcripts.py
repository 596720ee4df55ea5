"""Transcripts as Spark inputs: the same cases run as a replay and in BATCH mode.

A transcript becomes a DataFrame of its elements (``key``, ``value``, ``ts``, arrival
``arrival``, and the watermark and processing time in force at arrival). Results are
JSON-encoded by a wrapper so one output schema serves every window function. Elements
are whole rows on both sides (the engine gets the same tuples Spark's Rows hold). The
engine reference for a replay is the harness fed the same elements, watermarks and
processing times, then the final watermark, as a bounded Flink source ends.
"""

from __future__ import annotations

import json
from typing import Any

from transcript import (
    FUNCTIONS,
    LATE,
    Transcript,
    build_assigner,
    build_evictor,
    build_trigger,
    normalise,
)

import tidemark as tm
from tidemark.testing import WindowOperatorHarness

LONG_MIN, LONG_MAX = tm.LONG_MIN, tm.LONG_MAX
SCHEMA = "key string, value long, ts long, arrival long, wm long, pt long"
PROCESSING_TIME_ASSIGNERS = ("Processing",)


def spark_expressible(case: Transcript) -> bool:
    """Scalar values, keyed by the first field or not at all, no custom key shapes."""
    window = case.window
    if window.get("flatten") or window.get("key_by", "f0") != "f0":
        return False
    return all(
        isinstance(s["element"][1], int) and isinstance(s["element"][0], str)
        for s in case.steps
        if "element" in s
    )


def uses_processing_time(case: Transcript) -> bool:
    return "Processing" in case.window["assigner"]["type"] or any(
        "processing_time" in s for s in case.steps
    )


def element_rows(case: Transcript) -> list[tuple[Any, ...]]:
    rows = []
    wm, pt = LONG_MIN, 0
    for step in case.steps:
        if "watermark" in step:
            wm = int(step["watermark"])
        elif "processing_time" in step:
            pt = int(step["processing_time"])
        elif "element" in step:
            key, value, ts = step["element"]
            rows.append((key, value, ts, len(rows), wm, pt))
    return rows


class JsonResults(tm.ProcessWindowFunction):
    """Wraps a window function (or none) so every result becomes one JSON string."""

    def __init__(self, inner: Any = None):
        self.inner = inner

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        inner = self.inner
        if inner is None:
            results = list(elements)
        elif isinstance(inner, tm.ProcessWindowFunction):
            results = list(inner.process(key, context, elements) or [])
        elif isinstance(inner, tm.WindowFunction):
            results = list(inner.apply(key, context.window(), elements) or [])
        else:
            results = list(inner.apply(context.window(), elements) or [])
        return [json.dumps(normalise(r)) for r in results]

    def clear(self, context: Any) -> None:
        if isinstance(self.inner, tm.ProcessWindowFunction):
            self.inner.clear(context)


def json_function(case: Transcript) -> tuple[Any, Any]:
    """``(function, window_function)`` producing JSON strings."""
    function = FUNCTIONS[case.window["function"]]()
    if isinstance(function, tuple):
        return function[0], JsonResults(function[1])
    if isinstance(function, (tm.ProcessWindowFunction, tm.WindowFunction)):
        return JsonResults(function), None
    return function, JsonResults()


def spark_pipeline(case: Transcript, df: Any, replay: bool) -> Any:
    w = case.window
    untimed = all(s["element"][2] is None for s in case.steps if "element" in s)
    stream = tm.from_dataframe(
        df,
        timestamp=None if untimed else "ts",  # records without timestamps, as in Flink
        order_by="arrival" if replay else None,
        watermark="wm" if replay else None,
        processing_time="pt" if replay and uses_processing_time(case) else None,
    )
    keyed = w.get("keyed", True)
    assigner = build_assigner(w["assigner"], w.get("gap_of"))
    windowed = stream.key_by("key").window(assigner) if keyed else stream.window_all(assigner)
    trigger, evictor = build_trigger(w.get("trigger")), build_evictor(w.get("evictor"))
    if trigger is not None:
        windowed = windowed.trigger(trigger)
    if evictor is not None:
        windowed = windowed.evictor(evictor)
    windowed = windowed.allowed_lateness(int(w.get("allowed_lateness", 0)))
    if w.get("late_side_output"):
        windowed = windowed.side_output_late_data(LATE)
    function, window_function = json_function(case)
    if window_function is None:
        return windowed.process(function, output_schema="result string")
    if isinstance(function, tm.AggregateFunction):
        return windowed.aggregate(function, window_function, output_schema="result string")
    return windowed.reduce(function, window_function, output_schema="result string")


def engine_harness(case: Transcript) -> WindowOperatorHarness:
    w = case.window
    function, window_function = json_function(case)
    return WindowOperatorHarness(
        build_assigner(w["assigner"], w.get("gap_of")),
        (function, window_function) if window_function is not None else function,
        key_selector=(lambda v: v[0]) if w.get("keyed", True) else None,
        trigger=build_trigger(w.get("trigger")),
        evictor=build_evictor(w.get("evictor")),
        allowed_lateness=int(w.get("allowed_lateness", 0)),
        late_data_tag=LATE if w.get("late_side_output") else None,
    )


def engine_replay(case: Transcript) -> tuple[list[Any], list[Any], int]:
    """Results, late elements and dropped count of the engine fed a replay's input."""
    h = engine_harness(case)
    for row in element_rows(case):
        key, value, ts, _, wm, pt = row
        if pt != h.operator.current_processing_time:
            h.set_processing_time(pt)
        if wm > h.current_watermark:
            h.process_watermark(wm)
        h.process_element(row, ts)
    h.process_watermark(LONG_MAX)
    return _collect(h)


def engine_batch(case: Transcript) -> tuple[list[Any], list[Any], int]:
    """Flink BATCH: per key, elements in timestamp order, then the final watermark."""
    rows = element_rows(case)
    keyed = case.window.get("keyed", True)
    groups: dict[Any, list[Any]] = {}
    for row in rows:
        groups.setdefault(row[0] if keyed else None, []).append(row)
    results: list[Any] = []
    for members in groups.values():
        h = engine_harness(case)
        for row in sorted(members, key=lambda r: (r[2] is None, r[2] or 0)):
            h.process_element(row, row[2])
        h.process_watermark(LONG_MAX)
        results += _collect(h)[0]
    return sorted(results), [], 0


def _collect(h: WindowOperatorHarness) -> tuple[list[Any], list[Any], int]:
    results = sorted([json.loads(v), t] for v, t in h.output())
    late = sorted(normalise([[list(v[:2]), t] for v, t in h.side_output(LATE)]))
    return results, late, h.num_late_records_dropped


def spark_results(result: Any, case: Transcript) -> tuple[list[Any], list[Any]]:
    combined = result.combined_dataframe().collect()
    results = sorted(
        [json.loads(r["result"]), r["__tm_ts"]] for r in combined if r["__tm_output"] == "main"
    )
    late: list[Any] = []
    if case.window.get("late_side_output"):
        rows = result.get_side_output(LATE).to_dataframe().collect()
        late = sorted([[r["key"], r["value"]], r["ts"]] for r in rows)
    return results, late
