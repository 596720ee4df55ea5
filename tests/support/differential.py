"""Randomized differential scenarios: one window pipeline, many keys, every mode.

A scenario is a pipeline (assigner, trigger, evictor, allowed lateness, late-data tag,
its key: a column, several columns, a function of the Row, or none (``window_all``),
window function) and a recorded stream of rows ``(key, v, ts, arrival,
wm)``: arrival order, event timestamps (negative ones included) and, for a scenario
with recorded watermarks, the watermark in force when the row arrived. Many keys share
one stream, so one Spark job checks many per-key histories.

References, all from the engine harness (:mod:`tidemark.testing`):

- replay: the harness fed the rows in arrival order, each watermark before its row (or
  the strategy's watermark after each row), then ``Long.MAX_VALUE``;
- BATCH: per key, the rows in timestamp order (ties: by the other columns, as Spark
  orders them), then ``Long.MAX_VALUE``;
- streaming: the harness fed each micro-batch, then the watermark Spark moves to
  (``max_ts - out_of_orderness - 1``), and ``Long.MAX_VALUE`` after the end marker.

A result is compared as ``(result as JSON, timestamp, watermark before it)``: the
watermark is the last one forwarded before the result (the firing's watermark for a
firing at an element, the previous one for a firing a watermark caused), which the
replay reports in ``__tm_wm``. Process functions also put
``context.current_watermark()`` into the result itself.
"""

from __future__ import annotations

import json
import pickle
import random
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import Row

import tidemark as tm
from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS
from tidemark.testing import Watermark, WindowOperatorHarness
from tidemark.time import LONG_MAX, LONG_MIN

__all__ = [
    "random_scenario",
    "reference_replay",
    "reference_batch",
    "spark_pipeline",
    "run_spark",
    "describe_difference",
]

# Workers import this module by name (tests/ is on their PYTHONPATH, see conftest.py);
# a Connect server's workers may not: ship it by value there too.
if __name__ != "__main__":
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

LATE = tm.OutputTag("late")
COLUMNS = ["key", "v", "ts", "arrival", "wm"]
SCHEMA = "key string, v long, ts long, arrival long, wm long"
JSON_SCHEMA = "result string"
SHORTHANDS = ("sum", "min", "max", "min_by", "max_by")


# ---------------------------------------------------------------- functions


def _delta(old: Any, new: Any) -> float:
    return float(abs(new.v - old.v))


class DynamicGap:
    """A session gap of ``unit * (1 + v % 4)`` ms."""

    def __init__(self, unit: int):
        self.unit = unit

    def __call__(self, element: Any) -> int:
        return int(self.unit * (1 + element.v % 4))


class EvenValueTrigger(tm.Trigger):
    """A user trigger: fires on each element with an even ``v``, and at the window's end
    (an event-time timer, cleared with the window)."""

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        ctx.register_event_time_timer(window.max_timestamp())
        return tm.TriggerResult.FIRE if element.v % 2 == 0 else tm.TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        if time == window.max_timestamp():
            return tm.TriggerResult.FIRE
        return tm.TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        return tm.TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):  # type: ignore[no-untyped-def]
        ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx):  # type: ignore[no-untyped-def]
        ctx.delete_event_time_timer(window.max_timestamp())

    def timer_domains(self) -> frozenset[tm.TimeDomain]:
        # event time only: undeclared (both domains), a stream would run it as a
        # ProcessingTime query with a micro-batch at every trigger interval
        return frozenset({tm.TimeDomain.EVENT_TIME})


class Emit(tm.ProcessWindowFunction):
    """One JSON string: key, window, what the window held, the watermark it saw."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        window = context.window()
        # None: a reduce whose evictor removed every element (Flink's null record)
        items = [
            None if e is None else [e.v, e.ts] if hasattr(e, "v") else list(e) for e in elements
        ]
        yield json.dumps(
            {
                "key": key,
                "start": getattr(window, "start", None),
                "end": getattr(window, "end", None),
                "items": items,
                "wm": context.current_watermark(),
            }
        )


def sum_rows(a: Any, b: Any) -> Any:
    return Row(
        key=a.key, v=a.v + b.v, ts=max(a.ts, b.ts), arrival=min(a.arrival, b.arrival), wm=a.wm
    )


class SumCount(tm.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value.v, accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> list[int]:
        return list(accumulator)

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


class JsonAggregate(tm.AggregateFunction):
    """SumCount whose result is already the JSON output (aggregate without a window
    function needs an output of the result schema)."""

    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value.v, accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> str:
        return json.dumps(accumulator)

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


# Keys given by a function of the Row: lambdas (shipped by value with this module), a
# key of another type than the column's, a tuple, and one that joins several keys.
KEY_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "v_parity": lambda row: row.v % 2,
    "key_and_v_mod_3": lambda row: (row.key, row.v % 3),
    "key_prefix": lambda row: row.key[:2],  # k1, k10 and k11 are one key
}


def key_selector(scenario: dict[str, Any]) -> Callable[[Any], Any] | None:
    """The engine's key of an element, as ``key_by`` computes it on Spark."""
    key = scenario["key"]
    if key is None:
        return None
    if "function" in key:
        return KEY_FUNCTIONS[key["function"]]
    columns = key["columns"]
    if len(columns) == 1:
        name = columns[0]
        return lambda e: getattr(e, name)
    return lambda e: tuple(getattr(e, c) for c in columns)


def key_by_argument(scenario: dict[str, Any]) -> Any:
    """What the scenario passes to ``key_by``: a column name, a list, or a function."""
    key = scenario["key"]
    if "function" in key:
        return KEY_FUNCTIONS[key["function"]]
    columns = key["columns"]
    return columns[0] if len(columns) == 1 else list(columns)


# ---------------------------------------------------------------- pipeline pieces


def build_assigner(spec: dict[str, Any]) -> Any:
    kind = spec["type"]
    if kind == "tumbling":
        return tm.TumblingEventTimeWindows.of(spec["size"], spec["offset"])
    if kind == "sliding":
        return tm.SlidingEventTimeWindows.of(spec["size"], spec["slide"], spec["offset"])
    if kind == "session":
        return tm.EventTimeSessionWindows.with_gap(spec["gap"])
    if kind == "dynamic":
        return tm.DynamicEventTimeSessionWindows.with_dynamic_gap(
            DynamicGap(spec["unit"]), keep_all_elements=spec.get("keep")
        )
    return tm.GlobalWindows.create()


def build_trigger(spec: dict[str, Any] | None) -> Any:
    if spec is None:
        return None
    kind = spec["type"]
    if kind == "event":
        return tm.EventTimeTrigger.create()
    if kind == "count":
        return tm.CountTrigger.of(spec["count"])
    if kind == "purging":
        return tm.PurgingTrigger.of(build_trigger(spec["inner"]))
    if kind == "continuous":
        return tm.ContinuousEventTimeTrigger.of(spec["interval"])
    if kind == "delta":
        return tm.DeltaTrigger.of(spec["threshold"], _delta)
    return EvenValueTrigger()


def build_evictor(spec: dict[str, Any] | None) -> Any:
    if spec is None:
        return None
    after = spec["after"]
    if spec["type"] == "count":
        return tm.CountEvictor.of(spec["count"], after)
    if spec["type"] == "time":
        return tm.TimeEvictor.of(spec["interval"], after)
    return tm.DeltaEvictor.of(spec["threshold"], _delta, after)


def _function(scenario: dict[str, Any]) -> tuple[Any, Any, str | None]:
    """``(function, window_function, output_schema)``; schema None: the input's."""
    kind = scenario["function"]
    if kind == "process":
        return Emit(), None, JSON_SCHEMA
    if kind == "reduce":
        return sum_rows, None, None
    if kind == "aggregate":
        return JsonAggregate(), None, JSON_SCHEMA
    if kind == "reduce_process":
        return sum_rows, Emit(), JSON_SCHEMA
    if kind == "aggregate_process":
        return SumCount(), Emit(), JSON_SCHEMA
    return kind, None, None  # a shorthand, on field v


def _window_parts(scenario: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Assigner, trigger, evictor; a count window is Flink's ``countWindow``."""
    assigner = scenario["assigner"]
    if assigner["type"] == "count":
        size, slide = assigner["size"], assigner.get("slide")
        if slide is None:
            return tm.GlobalWindows.create(), tm.PurgingTrigger.of(tm.CountTrigger.of(size)), None
        return tm.GlobalWindows.create(), tm.CountTrigger.of(slide), tm.CountEvictor.of(size)
    return (
        build_assigner(assigner),
        build_trigger(scenario["trigger"]),
        build_evictor(scenario["evictor"]),
    )


# ---------------------------------------------------------------- generation


def _random_assigner(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(
        ["tumbling", "tumbling", "sliding", "session", "session", "dynamic", "global", "count"]
    )
    if kind == "tumbling":
        size = rng.choice([3, 5, 10, 20])
        return {"type": kind, "size": size, "offset": rng.randrange(-size + 1, size)}
    if kind == "sliding":
        slide = rng.choice([2, 3, 5])
        size = slide * rng.choice([1, 2, 3])
        return {
            "type": kind,
            "size": size,
            "slide": slide,
            "offset": rng.randrange(-slide + 1, slide),
        }
    if kind == "session":
        return {"type": kind, "gap": rng.choice([2, 3, 5, 8])}
    if kind == "dynamic":
        return {"type": kind, "unit": rng.choice([1, 2, 3])}
    if kind == "count":
        return {"type": kind, "size": rng.choice([2, 3]), "slide": rng.choice([None, None, 1, 2])}
    return {"type": kind}


def _random_trigger(rng: random.Random, assigner: dict[str, Any]) -> dict[str, Any] | None:
    merging = assigner["type"] in ("session", "dynamic")
    is_global = assigner["type"] == "global"
    options: list[Any] = [
        None,
        {"type": "count", "count": rng.choice([1, 2, 3])},
        {"type": "custom"},
    ]
    if not is_global:
        options += [
            None,
            {"type": "event"},
            {"type": "continuous", "interval": rng.choice([2, 3, 4])},
            {"type": "continuous", "interval": rng.choice([2, 3, 4])},
        ]
    if not merging:
        options.append({"type": "delta", "threshold": rng.choice([1, 3, 5])})
    trigger = rng.choice(options)
    if is_global and (trigger is None or trigger["type"] == "custom"):
        trigger = {"type": "count", "count": rng.choice([2, 3])}
    if trigger is not None and trigger["type"] != "custom" and rng.random() < 0.3:
        trigger = {"type": "purging", "inner": trigger}
    return trigger


def _random_evictor(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.6:
        return None
    after = rng.random() < 0.5
    return rng.choice(
        [
            {"type": "count", "count": rng.choice([1, 2, 3]), "after": after},
            {"type": "time", "interval": rng.choice([0, 2, 5]), "after": after},
            {"type": "delta", "threshold": rng.choice([1, 3, 6]), "after": after},
        ]
    )


def _random_rows(rng: random.Random, keys: list[str], recorded: bool) -> list[tuple]:
    """Rows ``(key, v, ts, arrival, wm)``; ``wm``: the recorded watermark in force at
    arrival (non-decreasing), or LONG_MIN when the strategy derives watermarks."""
    rows: list[tuple] = []
    clock = rng.randrange(-40, 10)
    watermark = LONG_MIN
    for arrival in range(rng.randrange(10, 60)):
        clock += rng.randrange(0, 4)
        ts = clock - rng.randrange(0, 12)
        if recorded and rng.random() < 0.4:
            watermark = max(watermark, clock - rng.randrange(0, 8))
        rows.append(
            (
                rng.choice(keys),
                rng.randrange(0, 9),
                ts,
                arrival,
                watermark if recorded else LONG_MIN,
            )
        )
    return rows


def _random_key(rng: random.Random) -> dict[str, Any] | None:
    """None (window_all) a fifth of the time; else mostly the key column, else several
    columns or a function of the Row."""
    if rng.random() < 0.2:
        return None
    return rng.choice(
        [
            {"columns": ["key"]},
            {"columns": ["key"]},
            {"columns": ["key"]},
            {"columns": ["key", "v"]},
            {"columns": ["v", "key"]},
            *({"function": name} for name in KEY_FUNCTIONS),
        ]
    )


def random_scenario(rng: random.Random, index: int) -> dict[str, Any]:
    assigner = _random_assigner(rng)
    counted = assigner["type"] == "count"
    recorded = rng.random() < 0.5
    n_keys = rng.choice([1, 3, 6, 12])
    scenario = {
        "name": f"differential-{index}",
        "key": _random_key(rng),
        "assigner": assigner,
        "trigger": None if counted else _random_trigger(rng, assigner),
        "evictor": None if counted else _random_evictor(rng),
        "allowed_lateness": rng.choice([0, 0, 1, 3, 7]),
        "side_output": rng.random() < 0.6,
        "function": rng.choice(
            [
                "process",
                "process",
                "reduce",
                "aggregate",
                "reduce_process",
                "aggregate_process",
                *SHORTHANDS,
            ]
        ),
        "out_of_orderness": None if recorded else rng.choice([0, 2, 5]),
        "rows": _random_rows(rng, [f"k{i}" for i in range(n_keys)], recorded),
    }
    key = scenario["key"]
    if scenario["function"] == "sum" and key is not None and "v" in key.get("columns", []):
        scenario["key"] = {"columns": ["key"]}  # summing a key column is refused
    return scenario


# ---------------------------------------------------------------- the engine


def _element(row: tuple) -> Any:
    return Row(**dict(zip(COLUMNS, row)))


def harness(scenario: dict[str, Any]) -> WindowOperatorHarness:
    from tidemark.spark import aggregations

    assigner, trigger, evictor = _window_parts(scenario)
    function, window_function, _ = _function(scenario)
    if isinstance(function, str):
        shorthand = {
            "sum": aggregations.Sum,
            "min": aggregations.Min,
            "max": aggregations.Max,
            "min_by": aggregations.MinBy,
            "max_by": aggregations.MaxBy,
        }[function]
        function = shorthand("v")
    return WindowOperatorHarness(
        assigner,
        (function, window_function) if window_function is not None else function,
        key_selector=key_selector(scenario),
        trigger=trigger,
        evictor=evictor,
        allowed_lateness=scenario["allowed_lateness"],
        late_data_tag=LATE if scenario["side_output"] else None,
    )


def normal(value: Any) -> str:
    """A result as JSON: a JSON string stays, a Row becomes the list of its values."""
    if isinstance(value, str):
        return value
    if value is None:  # Flink's null record: a row of nulls on Spark
        return json.dumps([None] * len(COLUMNS))
    return json.dumps(list(value))


def harness_outcome(h: WindowOperatorHarness, placed: bool) -> dict[str, Any]:
    main: Counter = Counter()
    last = LONG_MIN
    for item in h.output_with_watermarks():
        if isinstance(item, Watermark):
            last = item.timestamp
            continue
        value, ts = item
        main[(normal(value), ts, last if placed else None)] += 1
    late = Counter((normal(v), ts) for v, ts in h.side_output(LATE))
    return {"main": main, "late": late, "dropped": h.num_late_records_dropped}


def reference_replay(scenario: dict[str, Any]) -> dict[str, Any]:
    h = harness(scenario)
    ooo = scenario["out_of_orderness"]
    max_ts: int | None = None
    for row in scenario["rows"]:
        if ooo is None and row[4] > h.current_watermark:
            h.process_watermark(row[4])
        h.process_element(_element(row), row[2])
        if ooo is not None:
            max_ts = row[2] if max_ts is None else max(max_ts, row[2])
            h.process_watermark(max_ts - ooo - 1)
    h.process_watermark(LONG_MAX)
    return harness_outcome(h, placed=True)


def _ties(scenario: dict[str, Any]) -> list[int]:
    """Where BATCH looks when timestamps tie: the columns other than the timestamp and
    the key columns, in schema order (a key function or ``window_all``: all of them)."""
    key = scenario["key"] or {}
    keys = set(key.get("columns", ()))
    return [i for i, c in enumerate(COLUMNS) if c != "ts" and c not in keys]


def reference_batch(scenario: dict[str, Any]) -> dict[str, Any]:
    """Flink BATCH: per key, rows by timestamp, then +inf. Ties go by the other
    columns in schema order (tidemark's BATCH order): for ``key_by("key")`` v, arrival,
    wm; for ``window_all`` or a key function the key column first."""
    select = key_selector(scenario)
    groups: dict[Any, list[tuple]] = {}
    for row in scenario["rows"]:
        groups.setdefault(select(_element(row)) if select else None, []).append(row)
    ties = _ties(scenario)
    total: dict[str, Any] = {"main": Counter(), "late": Counter(), "dropped": 0}
    for members in groups.values():
        h = harness(scenario)
        for row in sorted(members, key=lambda r: (r[2], *[r[i] for i in ties])):
            h.process_element(_element(row), row[2])
        h.process_watermark(LONG_MAX)
        outcome = harness_outcome(h, placed=False)
        total["main"] += outcome["main"]
        total["late"] += outcome["late"]
        total["dropped"] += outcome["dropped"]
    return total


# ---------------------------------------------------------------- Spark


def spark_pipeline(scenario: dict[str, Any], df: Any, replay: bool) -> Any:
    """The scenario's pipeline on ``df`` (rows of :data:`SCHEMA`) through tidemark's API:
    a replay, BATCH, or (``df`` streaming) a Structured Streaming query."""
    ooo = scenario["out_of_orderness"]
    if ooo is None or not (replay or df.isStreaming):
        strategy = None
    else:
        strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(ooo)
    stream = tm.from_dataframe(
        df,
        "ts",
        order_by="arrival" if replay else None,
        watermark="wm" if replay and ooo is None else None,
        watermark_strategy=strategy,
        # timestamps from the epoch on: watermarks at or before it need Spark's clock shifted
        shift_spark_clock=True if df.isStreaming else None,
    )
    assigner = scenario["assigner"]
    keyed = scenario["key"] is not None
    if assigner["type"] == "count":
        size, slide = assigner["size"], assigner.get("slide")
        windowed = (
            stream.key_by(key_by_argument(scenario)).count_window(size, slide)
            if keyed
            else stream.count_window_all(size, slide)
        )
    else:
        built, trigger, evictor = _window_parts(scenario)
        windowed = (
            stream.key_by(key_by_argument(scenario)).window(built)
            if keyed
            else stream.window_all(built)
        )
        if trigger is not None:
            windowed = windowed.trigger(trigger)
        if evictor is not None:
            windowed = windowed.evictor(evictor)
    windowed = windowed.allowed_lateness(scenario["allowed_lateness"])
    if scenario["side_output"]:
        windowed = windowed.side_output_late_data(LATE)
    function, window_function, schema = _function(scenario)
    if isinstance(function, str):
        return getattr(windowed, function)("v")
    if scenario["function"] == "process":
        return windowed.process(function, output_schema=schema)
    if scenario["function"].startswith("aggregate"):
        return windowed.aggregate(function, window_function, output_schema=schema)
    return windowed.reduce(function, window_function, output_schema=schema)


def _normalised_frame(result: Any, index: int, replay: bool) -> Any:
    """The combined output as ``(scenario, output, ts, wm, result JSON, side blob,
    dropped)``; a stream reports dropped records per row, bounded runs in the blob."""
    from pyspark.sql import functions as F

    names = result._plan.output_schema.fieldNames()
    combined = result.combined_dataframe()
    if names == ["result"]:
        value = F.col("result")
    else:
        value = F.to_json(F.array(*[F.col(n).cast("string") for n in names]))
    wm = F.col("__tm_wm") if replay else F.lit(None).cast("long")
    streaming = "__tm_dropped" in combined.columns
    dropped = F.col("__tm_dropped") if streaming else F.lit(None).cast("long")
    return combined.select(
        F.lit(index).alias("scenario"),
        F.col("__tm_output").alias("output"),
        F.col("__tm_ts").alias("ts"),
        wm.alias("wm"),
        value.alias("value"),
        F.col("__tm_side").alias("side"),
        dropped.alias("dropped"),
    )


def _spark_value(text: str | None, scenario: dict[str, Any]) -> str:
    """A Spark result as :func:`normal` writes the engine's: a Row output came back as
    a JSON array of strings; turn it into the row's values."""
    _, _, schema = _function(scenario)
    if schema is not None:
        return text or ""
    values = json.loads(text or "[]")
    return json.dumps(
        [v if i == 0 else (None if v is None else int(v)) for i, v in enumerate(values)]
    )


def run_spark(spark: Any, scenarios: list[dict[str, Any]], replay: bool) -> list[dict[str, Any]]:
    """Every scenario's outcome from one collect over the union of their outputs."""
    from functools import reduce

    frames = []
    for index, scenario in enumerate(scenarios):
        df = spark.createDataFrame(scenario["rows"], SCHEMA)
        frames.append(_normalised_frame(spark_pipeline(scenario, df, replay), index, replay))
    union = reduce(lambda a, b: a.unionByName(b), frames)
    outcomes: list[dict[str, Any]] = [
        {"main": Counter(), "late": Counter(), "dropped": 0} for _ in scenarios
    ]
    add_rows(outcomes, scenarios, union.collect())
    return outcomes


def add_rows(outcomes: list[dict[str, Any]], scenarios: list[dict[str, Any]], rows: Any) -> None:
    """Add collected rows of :func:`_normalised_frame` to each scenario's outcome."""
    from tidemark.spark.batch.worker import DROPPED_OUTPUT

    for row in rows:
        scenario, outcome = scenarios[row.scenario], outcomes[row.scenario]
        if row.output == "main":
            value = _spark_value(row.value, scenario)
            outcome["main"][(value, row.ts, row.wm)] += 1
        elif row.output == DROPPED_OUTPUT:
            outcome["dropped"] += row.dropped if row.side is None else pickle.loads(row.side)
        elif row.output == LATE.tag_id:
            element = pickle.loads(row.side)
            outcome["late"][(normal(element), row.ts)] += 1


# ---------------------------------------------------------------- Structured Streaming

END_ROW = ("_end", 0, END_OF_INPUT_MS, -1, LONG_MIN)


def random_streaming_scenarios(
    rng: random.Random, count: int, first_index: int = 0
) -> tuple[list[dict[str, Any]], list[list[tuple]]]:
    """``count`` pipelines over ONE stream of micro-batches, all with the same watermark
    strategy (one query runs them all, so they share Spark's watermark). Count windows
    and GlobalWindows included: a stream serves them its watermark, as Flink does."""
    ooo = rng.choice([0, 2, 5])
    pipelines = []
    while len(pipelines) < count:
        scenario = random_scenario(rng, first_index + len(pipelines))
        scenario["out_of_orderness"] = ooo
        pipelines.append(scenario)
    rows = _random_rows(rng, [f"k{i}" for i in range(rng.choice([3, 6, 12]))], False)
    cuts = sorted(rng.sample(range(1, len(rows)), rng.randrange(2, 8)))
    batches = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)])]
    batches.append([END_ROW])
    for scenario in pipelines:
        scenario["rows"] = rows
    return pipelines, batches


def _write_batch_file(directory: Any, index: int, rows: list[tuple]) -> None:
    """One JSON file per micro-batch, renamed into place, its mtime in batch order (the
    file source takes files by modification time), as streaming_scenarios does."""
    import os
    import time

    tmp = directory.parent / f".tmp-{index:04d}.json"
    tmp.write_text("".join(json.dumps(dict(zip(COLUMNS, r))) + "\n" for r in rows))
    stamp = time.time() - 3600 + index
    os.utime(tmp, (stamp, stamp))
    os.replace(tmp, directory / f"batch-{index:04d}.json")


def reference_streaming(scenario: dict[str, Any], batches: list[list[tuple]]) -> dict[str, Any]:
    """The harness fed each micro-batch, then the watermark Spark moved to after it."""
    h = harness(scenario)
    ooo = scenario["out_of_orderness"]
    max_ts: int | None = None
    for batch in batches:
        for row in batch:
            if row[2] >= END_OF_INPUT_MS:
                h.process_watermark(LONG_MAX)
                continue
            h.process_element(_element(row), row[2])
            max_ts = row[2] if max_ts is None else max(max_ts, row[2])
        if max_ts is not None:
            h.process_watermark(max_ts - ooo - 1)
    return harness_outcome(h, placed=False)


def run_streaming(
    spark: Any, scenarios: list[dict[str, Any]], batches: list[list[tuple]], root: Any
) -> list[dict[str, Any]]:
    """A query per pipeline over one JSON file stream, one file per micro-batch: the
    queries run side by side (Spark allows one ``applyInPandasWithState`` per query),
    each file is processed by all of them before the next is written."""
    from pathlib import Path

    root = Path(root)
    input_dir = root / "in"
    input_dir.mkdir(parents=True, exist_ok=True)
    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(input_dir))
    collected: dict[tuple[int, int], list[Any]] = {}

    def sink_of(index: int) -> Any:
        def sink(batch: Any, batch_id: int) -> None:
            # by batch id: a replayed batch replaces
            collected[index, batch_id] = batch.collect()

        return sink

    queries = []
    try:
        for i, scenario in enumerate(scenarios):
            frame = _normalised_frame(spark_pipeline(scenario, df, replay=False), i, replay=False)
            writer = frame.writeStream.foreachBatch(sink_of(i)).outputMode("append")
            queries.append(writer.option("checkpointLocation", str(root / f"ck-{i}")).start())
        for index, rows in enumerate(batches):
            _write_batch_file(input_dir, index, rows)
            for query in queries:
                query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()
    outcomes: list[dict[str, Any]] = [
        {"main": Counter(), "late": Counter(), "dropped": 0} for _ in scenarios
    ]
    for rows in collected.values():
        add_rows(outcomes, scenarios, rows)
    return outcomes


def describe_difference(
    scenario: dict[str, Any], expected: dict[str, Any], got: dict[str, Any]
) -> str | None:
    """None when equal; else the scenario and what differs, per key where results
    carry one."""
    lines = []
    for part in ("main", "late"):
        missing = expected[part] - got[part]
        extra = got[part] - expected[part]
        if missing or extra:
            lines.append(f"  {part}: reference only {sorted(missing.elements())[:8]}")
            lines.append(f"  {part}: spark only     {sorted(extra.elements())[:8]}")
    if expected["dropped"] != got["dropped"]:
        lines.append(f"  dropped: reference {expected['dropped']}, spark {got['dropped']}")
    if not lines:
        return None
    spec = {k: v for k, v in scenario.items() if k != "rows"}
    return "\n".join(
        [f"{scenario['name']} {json.dumps(spec)}", f"  rows {scenario['rows']}", *lines]
    )
