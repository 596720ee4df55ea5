"""``result.explain(...)`` on BATCH and replay results: the events are the run's.

An explanation replays one key's events on the engine, so each check here is that the
events a bounded Spark run gives for a key (:mod:`tidemark.spark.batch.explain`) are
that key's input exactly as the run fed it: the reference harness of the differential
suite (:mod:`differential`, built from the scenario, not from the run's spec), fed each
key's events alone, gives the Spark run's results (with the watermark a process function
saw at each firing), late side output and dropped count, summed over the keys. Then named
cases (late beyond the allowed lateness, a lagging partition, merged sessions, a count
trigger not reached, GlobalWindows without a trigger, BATCH's last windows), a non-UTC
session with a zoned timestamp column, keys of odd values, and the refusals.
"""

from __future__ import annotations

import random
from collections import Counter
from functools import reduce
from typing import Any

import differential as d
import pytest

import tidemark as tm
from tidemark.explain.events import Element, EndOfInput, ProcessingTime, Watermark
from tidemark.spark.batch.explain import all_key_events, key_events
from tidemark.testing import WindowOperatorHarness
from tidemark.time import LONG_MAX

pytestmark = pytest.mark.spark

SEED = 50
SCENARIOS = 6  # per mode: one Spark job for all their outputs, one per scenario's events
LATE = tm.OutputTag("late")


# ---------------------------------------------------------------- the engine, fed events


def feed(h: WindowOperatorHarness, events: list[Any]) -> WindowOperatorHarness:
    """``h`` fed ``events`` as an explanation replays them."""
    for event in events:
        if isinstance(event, Element):
            h.process_element(event.value, event.timestamp)
        elif isinstance(event, Watermark):
            h.process_watermark(event.timestamp)
        elif isinstance(event, ProcessingTime):
            h.set_processing_time(event.timestamp)
        else:
            assert isinstance(event, EndOfInput)
            h.process_watermark(LONG_MAX)
    return h


def outcome_of(main: Counter, late: Counter, dropped: int) -> dict[str, Any]:
    """An outcome without the placement of results (the key's events do not hold the
    other keys' watermarks a result's ``__tm_wm`` names; a process function's result
    holds the watermark it fired at)."""
    placed = Counter()
    for (value, ts, _), n in main.items():
        placed[value, ts] += n
    return {"main": placed, "late": late, "dropped": dropped}


def events_outcome(scenario: dict[str, Any], events: dict[Any, list[Any]]) -> dict[str, Any]:
    """The reference harness fed each key's events alone, summed over the keys."""
    total: dict[str, Any] = {"main": Counter(), "late": Counter(), "dropped": 0}
    for key_events_ in events.values():
        got = d.harness_outcome(feed(d.harness(scenario), key_events_), placed=False)
        total["main"] += got["main"]
        total["late"] += got["late"]
        total["dropped"] += got["dropped"]
    return outcome_of(total["main"], total["late"], total["dropped"])


def spark_outcomes(spark, scenarios: list[dict[str, Any]], replay: bool) -> tuple[list, list]:
    """Each scenario's result (its pipeline on Spark) and its outcome, one collect."""
    results, frames = [], []
    for index, scenario in enumerate(scenarios):
        df = spark.createDataFrame(scenario["rows"], d.SCHEMA)
        results.append(d.spark_pipeline(scenario, df, replay))
        frames.append(d._normalised_frame(results[-1], index, replay))
    outcomes = [{"main": Counter(), "late": Counter(), "dropped": 0} for _ in scenarios]
    d.add_rows(outcomes, scenarios, reduce(lambda a, b: a.unionByName(b), frames).collect())
    return results, [outcome_of(o["main"], o["late"], o["dropped"]) for o in outcomes]


# ---------------------------------------------------------------- randomized


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "batch"])
def test_each_keys_events_give_the_runs_outputs(spark, replay):
    rng = random.Random(SEED + replay)
    scenarios = [d.random_scenario(rng, i) for i in range(SCENARIOS)]
    results, outcomes = spark_outcomes(spark, scenarios, replay)
    failures, keys = [], 0
    for scenario, result, got in zip(scenarios, results, outcomes):
        events = all_key_events(result.plan, spark)
        keys += len(events)
        expected = events_outcome(scenario, events)
        assert sum(isinstance(e, Element) for es in events.values() for e in es) == len(
            scenario["rows"]
        ), "every element in the events of exactly one key"
        difference = d.describe_difference(scenario, expected, got)
        if difference is not None:
            failures.append(difference)
    assert not failures, "\n".join(failures)
    assert keys >= SCENARIOS


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "batch"])
def test_one_key_selected_in_spark_has_the_same_events(spark, replay):
    """The key filter (columns, several, a function, none) selects exactly the key's
    rows: its events are that key's in the run over every key."""
    rng = random.Random(SEED + 10 + replay)
    kinds = [{"columns": ["key"]}, {"columns": ["v", "key"]}, {"function": "key_prefix"}, None]
    for kind in kinds:
        scenario = d.random_scenario(rng, 0)
        scenario["key"] = kind
        if scenario["function"] == "sum" and kind and "v" in kind.get("columns", []):
            scenario["function"] = "process"
        df = spark.createDataFrame(scenario["rows"], d.SCHEMA)
        result = d.spark_pipeline(scenario, df, replay)
        every = all_key_events(result.plan, spark)
        key = sorted(every, key=repr)[0]
        found = key_events(result.plan, spark, key if kind is not None else None)
        assert found.events == every[key], kind
        assert found.mode == ("replay" if replay else "batch")
