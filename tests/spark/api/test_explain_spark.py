"""``result.explain(...)`` on BATCH and replay results: the events are the run's.

An explanation replays one key's events on the engine, so each check here is that the
events a bounded Spark run gives for a key (:mod:`tidemark.spark.api.key_events`) are
that key's input exactly as the run fed it: the reference harness of the differential
suite (:mod:`differential`, built from the scenario, not from the run's spec), fed each
key's events alone, gives the Spark run's results (with the watermark a process function
saw at each firing), late side output and dropped count, summed over the keys; and so
does what each key's explanation claims (its firings' results, its late and dropped
elements). Six random scenarios per mode in ``make test``, forty more in ``make
test-slow``. Then named cases (late beyond the allowed lateness, a lagging and an idle
partition, merged sessions, a count trigger not reached, GlobalWindows without a
trigger, BATCH's last windows) read through ``result.explain``, every bounded execution
(SQL fast path, vectorized, pre-aggregated, processing-time replay, panes), a non-UTC
session with a zoned timestamp column, keys of odd values, a chain, the refusals, and
the docs page's answers.
"""

from __future__ import annotations

import datetime
import random
import sys
from collections import Counter
from dataclasses import replace
from functools import reduce
from pathlib import Path
from typing import Any

import differential as d
import pytest
from pyspark import cloudpickle

import tidemark as tm
from tidemark._engine.create import create_window_operator
from tidemark.errors import WindowSpecError
from tidemark.explain.events import Element, EndOfInput, ProcessingTime, Watermark
from tidemark.panes import PaneInfo
from tidemark.spark import execution
from tidemark.spark.api.key_events import KeyEvents, all_key_events, explained, key_events
from tidemark.testing import WindowOperatorHarness
from tidemark.time import LONG_MAX, from_datetime

pytestmark = pytest.mark.spark

DOCS = Path(__file__).resolve().parents[3] / "docs"
sys.path.insert(0, str(DOCS / "examples"))
import quickstart  # noqa: E402
import why_no_result_spark  # noqa: E402

# Spark's workers do not have docs/examples on their path: ship the functions by value.
cloudpickle.register_pickle_by_value(quickstart)
cloudpickle.register_pickle_by_value(why_no_result_spark)

SEED = 50
SCENARIOS = 6  # per mode: one Spark job for all their outputs, one per scenario's events
SLOW_SCENARIOS = 40  # per mode in make test-slow
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


def events_outcome(scenario: dict[str, Any], found: dict[Any, KeyEvents]) -> dict[str, Any]:
    """The reference harness fed each key's events alone, summed over the keys."""
    total: dict[str, Any] = {"main": Counter(), "late": Counter(), "dropped": 0}
    for one in found.values():
        got = d.harness_outcome(feed(d.harness(scenario), one.events), placed=False)
        total["main"] += got["main"]
        total["late"] += got["late"]
        total["dropped"] += got["dropped"]
    return outcome_of(total["main"], total["late"], total["dropped"])


def explained_outcome(found: dict[Any, KeyEvents]) -> dict[str, Any]:
    """What each key's explanation claims, summed over the keys: its firings' results
    (without their timestamps, which the facts do not hold), its late elements sent to
    the side output, and those it counts as dropped."""
    main, late, dropped = Counter(), Counter(), 0
    for one in found.values():
        x = explained(one)
        elements = [e for e in one.events if isinstance(e, Element)]
        assert [f.arrival for f in x.elements] == list(range(len(elements)))
        main.update(d.normal(v) for f in x.firings for v in f.values)
        for fact in x.elements:
            if fact.fate == "late_side_output":
                element = elements[fact.arrival]
                late[d.normal(element.value), element.timestamp] += 1
        dropped += sum(f.fate in ("late_dropped", "skipped") for f in x.elements)
    return {"main": main, "late": late, "dropped": dropped}


def unstamped(outcome: dict[str, Any]) -> dict[str, Any]:
    """``outcome`` with its results' values only (their timestamps dropped)."""
    main = Counter()
    for (value, _), n in outcome["main"].items():
        main[value] += n
    return {**outcome, "main": main}


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
    check_scenarios(spark, replay, SEED + replay, SCENARIOS)


@pytest.mark.slow
@pytest.mark.parametrize("replay", [True, False], ids=["replay", "batch"])
def test_each_keys_events_give_the_runs_outputs_many(spark, replay):
    check_scenarios(spark, replay, SEED + 100 + replay, SLOW_SCENARIOS)


def check_scenarios(spark, replay: bool, seed: int, count: int) -> None:
    """``count`` random scenarios: each key's events fed to the reference harness, and
    each key's explanation, summed over the keys, give the Spark run's outputs."""
    rng = random.Random(seed)
    scenarios = [d.random_scenario(rng, i) for i in range(count)]
    results, outcomes = spark_outcomes(spark, scenarios, replay)
    failures, keys = [], 0
    for scenario, result, got in zip(scenarios, results, outcomes):
        found = all_key_events(result.plan, spark)
        keys += len(found)
        elements = sum(isinstance(e, Element) for one in found.values() for e in one.events)
        assert elements == len(scenario["rows"]), "every element in one key's events"
        for check, expected, spark_got in [
            ("events", events_outcome(scenario, found), got),
            ("explanation", explained_outcome(found), unstamped(got)),
        ]:
            difference = d.describe_difference(scenario, expected, spark_got)
            if difference is not None:
                failures.append(f"{check}: {difference}")
    assert not failures, "\n".join(failures)
    assert keys >= count


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
        assert found == every[key], kind
        assert found.mode == ("replay" if replay else "batch")


# ---------------------------------------------------------------- named cases

SCHEMA = "user string, n long, ts long, arrival long"
BOUND = tm.WatermarkStrategy.for_bounded_out_of_orderness(1_000)


def engine_run(found: Any) -> tuple[list[tuple[Any, int]], list[tuple[Any, int]], int]:
    """``(results, late side output, dropped)`` of the run's spec fed ``found``'s events."""
    op = create_window_operator(found.spec)
    for event in found.events:
        if isinstance(event, Element):
            op.process_element(found.key, event.value, event.timestamp)
        elif isinstance(event, Watermark):
            op.process_watermark(event.timestamp)
        elif isinstance(event, ProcessingTime):
            op.advance_processing_time(event.timestamp)
        else:
            op.process_watermark(LONG_MAX)
    late = op.side_outputs.get(LATE, [])
    return list(op.output), list(late), op.num_late_records_dropped


def stamps(events: list[Any]) -> list[Any]:
    """Events in short: an element's timestamp, ``("W", t)``, ``("P", t)``, ``"END"``."""
    short = {Watermark: "W", ProcessingTime: "P"}
    return [
        e.timestamp
        if isinstance(e, Element)
        else "END"
        if isinstance(e, EndOfInput)
        else (short[type(e)], e.timestamp)
        for e in events
    ]


def clicks(spark, rows, replay: bool, **source: Any) -> Any:
    df = spark.createDataFrame(rows, SCHEMA)
    order = "arrival" if replay else None
    strategy = source.pop("watermark_strategy", BOUND if replay else None)
    return tm.from_dataframe(df, "ts", order_by=order, watermark_strategy=strategy, **source)


def test_late_beyond_the_allowed_lateness_goes_to_the_side_output_or_is_dropped(spark):
    """Another key moves the watermark: bob's 25 s makes it 23.999 s, past the end of
    ann's window [0, 10 s) and its 2 s of lateness, so ann's 5 s arriving next is late."""
    rows = [("ann", 1, 1_000, 0), ("bob", 2, 25_000, 1), ("ann", 3, 5_000, 2)]
    stream = clicks(spark, rows, replay=True)
    windows = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(10_000))
    windows = windows.allowed_lateness(2_000)
    kept = windows.side_output_late_data(LATE).sum("n")
    found = key_events(kept.plan, spark, "ann")
    assert stamps(found.events) == [1_000, ("W", 23_999), 5_000, "END"]
    results, late, dropped = engine_run(found)
    assert [(r.n, ts) for r, ts in results] == [(1, 9_999)]
    assert [(r.n, ts) for r, ts in late] == [(3, 5_000)]
    side = kept.get_side_output(LATE).to_dataframe().collect()
    assert [(r.user, r.ts) for r in side] == [("ann", 5_000)]
    (fact,) = kept.explain(key="ann", timestamp=5_000).elements_at(5_000)
    assert (fact.fate, fact.watermark, fact.late_windows) == (
        "late_side_output",
        23_999,
        ((0, 10_000),),
    )
    dropping = windows.sum("n")
    assert engine_run(key_events(dropping.plan, spark, "ann"))[2] == 1
    assert dropping.num_late_records_dropped() == 1
    x = dropping.explain(key="ann", window=(0, 10_000))
    assert [e.fate for e in x.elements] == ["in_result", "late_dropped"]
    assert "late" in x.text() and "dropped" in x.text()


def lagging_rows() -> list[tuple[Any, ...]]:
    """Three sensors in three partitions; partition 2 ten seconds behind."""
    rows = []
    for second in range(0, 20, 2):
        for p in range(3):
            ts = second * 1_000 - (10_000 if p == 2 else 0)
            if ts >= 0:
                rows.append((p, f"s{p}", 1, ts, len(rows) * 100))
    return rows


@pytest.mark.parametrize("idle", [False, True], ids=["lagging", "idle"])
def test_a_lagging_partition_holds_the_watermark_of_a_replay(spark, idle):
    rows = lagging_rows()
    if idle:  # partition 2 stops at 2 s; 6 s of arrival later partitions 0 and 1 go on
        rows = [r for r in rows if r[0] != 2 or r[3] <= 2_000]
        after = rows[-1][4] + 6_000
        rows += [(1, "s1", 1, 20_000, after), (0, "s0", 1, 20_000, after + 100)]
        rows += [(1, "s1", 1, 21_000, after + 200)]
    df = spark.createDataFrame(rows, "partition int, user string, n long, ts long, arrival long")
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(2_000)
    if idle:
        strategy = strategy.with_idleness(5_000)
    stream = tm.from_dataframe(
        df,
        "ts",
        order_by="arrival",
        watermark_strategy=strategy,
        partition_column="partition",
        partitions=3,
        processing_time="arrival" if idle else None,
    )
    result = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(10_000)).sum("n")
    found = key_events(result.plan, spark, "s0")
    states = {s.partition: s for s in found.partitions}
    assert sorted(states) == [0, 1, 2]
    held = min((s for s in found.partitions if not s.idle), key=lambda s: s.watermark)
    if idle:  # idle for 6 s of arrival time, over the 5 s: left out of the minimum
        assert (states[2].max_event_time, states[2].idle) == (2_000, True)
        assert (states[0].max_event_time, states[0].idle) == (20_000, False)
        assert held.watermark == 17_999
        assert any(isinstance(e, ProcessingTime) for e in found.events)
    else:  # as the last element (partition 2's 8 s) arrived: the replay's last watermark
        assert held.partition == 2
        assert (states[2].max_event_time, states[2].watermark) == (6_000, 3_999)
        assert (states[0].max_event_time, states[0].watermark) == (18_000, 15_999)
        # s0's elements each came under the watermark partition 2 allowed, up to the end
        watermarks = [e.timestamp for e in found.events if isinstance(e, Watermark)]
        assert max(watermarks) == 3_999
    x = result.explain(key="s0")
    assert x.idleness is idle and x.holder == held
    if not idle:  # the watermark never passed 10 s: [0, 10 s) fired at the end of input
        (firing,) = [x.firings[i] for i in x.window(0, 10_000).firings]
        assert firing.cause == "end_of_input"
        assert "partition 2 sets the watermark at 3999" in x.text().lower()
    spark_rows = {(r.user, r.ts, r.n) for r in result.to_dataframe().collect()}
    engine = {("s0", r.ts, r.n) for r, _ in engine_run(found)[0]}
    assert engine == {r for r in spark_rows if r[0] == "s0"}


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "batch"])
def test_sessions_merge_as_the_run_merged_them(spark, replay):
    rows = [("ann", 1, 1_000, 0), ("ann", 2, 8_000, 1), ("ann", 4, 4_000, 2)]
    rows += [("bob", 8, 2_000, 3), ("ann", 16, 30_000, 4)]
    stream = clicks(spark, rows, replay, watermark_strategy=BOUND)
    gap = tm.EventTimeSessionWindows.with_gap(5_000)
    result = stream.key_by("user").window(gap).sum("n")
    found = key_events(result.plan, spark, "ann")
    if replay:  # arrival order, each under the watermark then: 6.999 s after 8 s, ...
        expected = [1_000, ("W", -1), 8_000, ("W", 6_999), 4_000, 30_000, ("W", 28_999)]
        assert stamps(found.events) == [*expected, "END"]
    else:  # time order
        assert stamps(found.events) == [1_000, 4_000, 8_000, 30_000, "END"]
    engine = sorted((r.n, ts) for r, ts in engine_run(found)[0])
    if replay:  # [1 s, 6 s) fired at 6.999 s before 4 s came; 4 s merged with 8 s's
        assert engine == [(1, 5_999), (6, 12_999), (16, 34_999)]
    else:  # 1 s, 4 s and 8 s merged into one session
        assert engine == [(7, 12_999), (16, 34_999)]
    merged = {w.window: w.merged_into for w in result.explain(key="ann").windows if w.merged_into}
    if replay:  # 8 s's session merged with 4 s's; [1 s, 6 s) had fired already
        assert merged == {(8_000, 13_000): (4_000, 13_000)}
    else:  # in time order: [1 s, 6 s) grew to [1 s, 9 s), then to [1 s, 13 s)
        assert merged == {(1_000, 6_000): (1_000, 13_000), (1_000, 9_000): (1_000, 13_000)}
    rows_of_ann = [tuple(r) for r in result.to_dataframe().collect() if r.user == "ann"]
    assert sorted(tuple(r) for r, _ in engine_run(found)[0]) == sorted(rows_of_ann)


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "batch"])
def test_a_count_trigger_not_reached_and_global_windows_without_a_trigger(spark, replay):
    rows = [("ann", 1, 1_000, 0), ("bob", 2, 2_000, 1), ("ann", 3, 3_000, 2)]
    stream = clicks(spark, rows, replay)
    counted = stream.key_by("user").window(tm.GlobalWindows.create())
    counted = counted.trigger(tm.CountTrigger.of(3)).sum("n")
    found = key_events(counted.plan, spark, "ann")
    assert [e.timestamp for e in found.events if isinstance(e, Element)] == [1_000, 3_000]
    assert engine_run(found)[0] == []
    assert [r for r in counted.to_dataframe().collect() if r.user == "ann"] == []
    waiting = counted.explain(key="ann").window(None, None).waiting
    assert (waiting.kind, waiting.count, waiting.count_of) == ("count", 2, 3)
    with pytest.warns(tm.TidemarkWarning, match="never fires"):
        never = stream.key_by("user").window(tm.GlobalWindows.create()).sum("n")
    found = key_events(never.plan, spark, "bob")
    assert stamps(found.events)[-1] == "END"
    assert engine_run(found) == ([], [], 0)
    assert never.to_dataframe().collect() == []
    x = never.explain(key="bob")
    assert x.window(None, None).waiting.kind == "no_trigger"
    assert [e.fate for e in x.elements] == ["open"]


def test_the_last_windows_of_a_batch_run_fire_at_the_end_of_the_input(spark):
    rows = [("ann", 1, 1_000, 0), ("ann", 2, 61_000, 1), ("ann", 3, 125_000, 2)]
    result = clicks(spark, rows, replay=False)
    result = result.key_by("user").window(tm.TumblingEventTimeWindows.of(60_000)).sum("n")
    found = key_events(result.plan, spark, "ann")
    assert stamps(found.events) == [1_000, 61_000, 125_000, "END"]
    before_end = replace(found, events=found.events[:-1])
    assert engine_run(before_end)[0] == []  # BATCH has no watermark until the end
    fired = engine_run(found)[0]
    assert [(r.n, ts) for r, ts in fired] == [(1, 59_999), (2, 119_999), (3, 179_999)]
    assert sorted(tuple(r) for r in result.to_dataframe().collect()) == [tuple(r) for r, _ in fired]
    x = result.explain(key="ann")
    assert {(f.cause, f.watermark) for f in x.firings} == {("end_of_input", LONG_MAX)}


# ---------------------------------------------------------------- keys, zones, chains

KOLKATA = "Asia/Kolkata"
UTC = datetime.timezone.utc
ODD = "name string, score double, at timestamp, n long, arrival long"


def odd_rows() -> list[tuple[Any, ...]]:
    """Keys of odd values: NaNs (one key), -0.0 and 0.0 (one key), a name beyond ASCII;
    zoned timestamps around midnight UTC, which is 05:30 in Kolkata."""
    nan, day = float("nan"), datetime.datetime(2024, 1, 1, tzinfo=UTC)
    names = ["zoë 🌊", "zoë 🌊", "zoë 🌊", "x", "x", "x"]
    scores = [nan, 1.0, nan, -0.0, 0.0, nan]
    return [
        (name, score, day + datetime.timedelta(minutes=7 * i - 20), i, i)
        for i, (name, score) in enumerate(zip(names, scores))
    ]


@pytest.fixture
def kolkata(spark):
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", KOLKATA)
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "batch"])
def test_odd_keys_and_zoned_timestamps_in_a_session_not_in_utc(kolkata, replay):
    spark, rows = kolkata, odd_rows()
    df = spark.createDataFrame(rows, ODD)
    stream = tm.from_dataframe(
        df, "at", order_by="arrival" if replay else None, watermark_strategy=BOUND
    )
    windows = stream.key_by(["name", "score"]).window(tm.TumblingEventTimeWindows.of(600_000))
    result = windows.sum("n")
    nan_key = key_events(result.plan, spark, ("zoë 🌊", float("nan")))
    instants = [from_datetime(rows[i][2]) for i in (0, 2)]  # independent of the zone
    assert [e.timestamp for e in nan_key.events if isinstance(e, Element)] == instants
    assert nan_key.time_zone == KOLKATA
    x = result.explain(key=("zoë 🌊", float("nan")))
    assert x.time_zone == KOLKATA and "+05:30" in x.text()
    assert len(x.elements) == 2
    zero = key_events(result.plan, spark, ("x", -0.0))  # -0.0 and 0.0: one key
    assert [e.value.n for e in zero.events if isinstance(e, Element)] == [3, 4]
    fired = {r.n for r, _ in engine_run(zero)[0]}
    spark_x = {r.n for r in result.to_dataframe().collect() if r.name == "x" and r.score == 0}
    assert fired == spark_x
    by_time = stream.key_by("at").window(tm.TumblingEventTimeWindows.of(600_000)).sum("n")
    aware = rows[1][2]  # a timestamp key: aware, or naive UTC as the functions see it
    for key in (aware, aware.astimezone(datetime.timezone(datetime.timedelta(hours=5.5)))):
        found = key_events(by_time.plan, spark, key)
        assert [e.value.n for e in found.events if isinstance(e, Element)] == [1]
    naive = aware.replace(tzinfo=None)
    assert key_events(by_time.plan, spark, naive).key == naive


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "batch"])
def test_a_window_over_a_windows_results_explains_the_stage_asked_for(spark, replay):
    rows = [("ann", 1, 1_000, 0), ("bob", 5, 3_000, 1), ("ann", 2, 12_000, 2)]
    rows += [("bob", 1, 14_000, 3), ("ann", 4, 31_000, 4)]
    stream = clicks(spark, rows, replay)
    first = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(10_000)).sum("n")
    top = first.window_all(tm.TumblingEventTimeWindows.of(20_000)).max("n")
    found = key_events(top.plan, spark)  # window_all: the one key, None
    assert {w.window for w in top.explain().windows} == {(0, 20_000), (20_000, 40_000)}
    assert found.key is None
    elements = [
        (e.value.user, e.value.n, e.timestamp) for e in found.events if isinstance(e, Element)
    ]
    assert sorted(elements) == [
        ("ann", 1, 9_999),
        ("ann", 2, 19_999),
        ("ann", 4, 39_999),
        ("bob", 1, 19_999),
        ("bob", 5, 9_999),
    ]
    fired = sorted(tuple(r) for r, _ in engine_run(found)[0])
    assert fired == sorted(tuple(r) for r in top.to_dataframe().collect())
    assert [
        e.value.n for e in key_events(first.plan, spark, "bob").events if isinstance(e, Element)
    ] == [5, 1]


# ---------------------------------------------------------------- refusals


def test_what_has_no_recorded_answer_here_is_refused_with_the_way_out(spark, tmp_path):
    rows = [("ann", 1, 1_000, 0), ("bob", 2, 2_000, 1)]
    stream = clicks(spark, rows, replay=False)
    keyed = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(10_000)).sum("n")
    with pytest.raises(WindowSpecError, match=r"`key` is needed: the window is keyed by user"):
        keyed.explain()
    with pytest.raises(WindowSpecError, match=r"keys there include \['(ann|bob)'"):
        keyed.explain(key="carl")
    pair = stream.key_by(["user", "n"]).window(tm.TumblingEventTimeWindows.of(10_000))
    with pytest.raises(WindowSpecError, match=r"a tuple of 2 values.*got key='ann'"):
        pair.max("ts").explain(key="ann")
    with pytest.raises(WindowSpecError, match=r"key column 'n' \(long\).*got '1' \(str\)"):
        pair.max("ts").explain(key=("ann", "1"))  # Spark would cast '1' to 1; keys do not
    every = stream.window_all(tm.TumblingEventTimeWindows.of(10_000)).sum("n")
    with pytest.raises(WindowSpecError, match=r"left out for window_all.*got key='ann'"):
        every.explain(key="ann")
    nothing = clicks(spark, [], replay=False).window_all(tm.TumblingEventTimeWindows.of(10))
    with pytest.raises(WindowSpecError, match=r"needs an element.*input is empty"):
        nothing.sum("n").explain()
    clock = stream.key_by("user").window(tm.TumblingProcessingTimeWindows.of(10_000)).sum("n")
    with pytest.raises(WindowSpecError, match=r"BATCH reads the wall clock.*processing_time="):
        clock.explain(key="ann")
    streaming = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    live = tm.from_dataframe(streaming, "ts", watermark_strategy=BOUND)
    live = live.key_by("user").window(tm.TumblingEventTimeWindows.of(10_000)).sum("n")
    with pytest.raises(WindowSpecError, match=r"tidemark.spark.explain_checkpoint"):
        live.explain(key="ann")


# ---------------------------------------------------------------- the docs page


def test_the_page_shows_what_its_spark_examples_answer(spark):
    """docs/why-no-result.md, "On Spark: BATCH and replay": each example's answer, run
    here, is on the page word for word."""
    page = (DOCS / "why-no-result.md").read_text()
    answers = {}
    for example in (why_no_result_spark.late_click, why_no_result_spark.lagging_partition):
        answers[example.__name__] = example(spark)
        assert answers[example.__name__].text().strip() in page, example.__name__
    batch = why_no_result_spark.batch_end(spark)
    assert batch.text().strip() in page
    (late,) = answers["late_click"].elements_at(30_000)
    assert (late.fate, late.watermark) == ("late_side_output", 114_999)
    assert answers["lagging_partition"].holder.partition == 1
    assert {f.cause for f in batch.firings} == {"end_of_input"}


# ---------------------------------------------------------------- every execution


class LargestN(tm.ReduceFunction):
    """The row with the largest ``n``: declared order-insensitive, so a BATCH
    ``window_all`` of it pre-aggregates per partition (LOCAL_GLOBAL)."""

    order_insensitive = True

    def reduce(self, value1: Any, value2: Any) -> Any:
        return value2 if (value2.n, value2.ts) > (value1.n, value1.ts) else value1


def vectorized_sum(n: Any) -> float:
    return float(n.sum())


PIPELINES = {
    # BATCH executions, each "the same as BATCH": explained by BATCH's events
    "sql": lambda s: s.key_by("user").window(tm.TumblingEventTimeWindows.of(10_000)).sum("n"),
    "vectorized": lambda s: (
        s.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(10_000))
        .aggregate_vectorized(vectorized_sum, ["n"])
    ),
    "local_global": lambda s: s.window_all(tm.TumblingEventTimeWindows.of(10_000)).reduce(
        LargestN()
    ),
    # replays: processing time from arrival times, and a Dataflow trigger's panes
    "processing_time": lambda s: (
        s.key_by("user").window(tm.TumblingProcessingTimeWindows.of(10_000)).sum("n")
    ),
    "panes": lambda s: (
        s.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(10_000))
        .trigger(tm.AfterWatermark(early=tm.AfterCount(2), late=tm.AfterCount(1)))
        .allowed_lateness(60_000)
        .sum("n")
    ),
}
MODES = {"sql": "sql", "vectorized": "vectorized", "local_global": "local_global"}


def unpaned(result: Any) -> Any:
    """A result without the pane a Dataflow trigger's results come with."""
    paned = isinstance(result, tuple) and len(result) == 3 and isinstance(result[1], PaneInfo)
    return result[0] if paned else result


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_execution_of_a_bounded_run_is_explained_by_its_modes_events(spark, name):
    rows = [("ann", 1, 1_000, 0), ("bob", 2, 2_000, 100), ("ann", 3, 12_000, 5_000)]
    rows += [("ann", 4, 3_000, 20_000), ("bob", 5, 40_000, 30_000)]
    replay = name not in MODES
    df = spark.createDataFrame(rows, SCHEMA)
    order = dict(order_by="arrival", processing_time="arrival") if replay else {}
    stream = tm.from_dataframe(df, "ts", watermark_strategy=BOUND, **order)
    result = PIPELINES[name](stream)
    if not replay:
        assert execution.mode_of(result.plan, spark).value == MODES[name]
    key = None if name == "local_global" else "ann"
    found = key_events(result.plan, spark, key)
    fired = sorted(tuple(unpaned(r)) for r, _ in engine_run(found)[0])
    width = len(fired[0])  # a Dataflow trigger's results end with the pane's columns
    mine = [tuple(r)[:width] for r in result.to_dataframe().collect()]
    assert fired == sorted(r for r in mine if key is None or r[0] == key)
    x = result.explain(key=key) if key is not None else result.explain()
    assert len([f for f in x.firings if not f.retraction]) == len(fired)
