"""The Spark batch runners agree with the engine: BATCH and replay.

Every transcript Spark can express runs as a replay (recorded watermarks) and in BATCH
mode and must match the engine fed the same input. A fast subset runs in ``make test``;
the rest is marked slow. Randomized multi-key streams check replay against the harness
with watermarks derived from a WatermarkStrategy.
"""

from __future__ import annotations

import random

import pytest
import spark_transcripts as st
from transcript import load_transcripts

import tidemark as tm
from tidemark.testing import WindowOperatorHarness

pytestmark = pytest.mark.spark

CASES = [c for c in load_transcripts() if not c.must_fail and st.spark_expressible(c)]
# One case per family (sliding, sessions with a count trigger and late merges,
# processing time, partial lateness with a side output, evicting count windows).
FAST = (
    "WOT-01-",
    "WOT-05-",
    "WOT-13-",
    "WOT-19-side",
    "WOT-24-",
    "EWOT-07-",
    "continuous-processing-time-trigger-past-",
)


def _params(fast: bool) -> list[object]:
    chosen = [c for c in CASES if c.name.startswith(FAST) == fast]
    marks = () if fast else (pytest.mark.slow,)
    return [pytest.param(c, id=c.name, marks=marks) for c in chosen]


def _check_replay(spark, case):
    df = spark.createDataFrame(st.element_rows(case), st.SCHEMA)
    results, late = st.spark_results(st.spark_pipeline(case, df, replay=True), case)
    want_results, want_late, _ = st.engine_replay(case)
    assert results == want_results
    assert late == want_late


def _check_batch(spark, case):
    if st.uses_processing_time(case):
        pytest.skip("BATCH runs processing time on the wall clock")
    df = spark.createDataFrame(st.element_rows(case), st.SCHEMA)
    results, late = st.spark_results(st.spark_pipeline(case, df, replay=False), case)
    assert results == st.engine_batch(case)[0]
    assert late == []


@pytest.mark.parametrize("case", _params(True) + _params(False))
def test_transcript_replay_on_spark(spark, case):
    _check_replay(spark, case)


@pytest.mark.parametrize("case", _params(True) + _params(False))
def test_transcript_batch_on_spark(spark, case):
    _check_batch(spark, case)


# ---------------------------------------------------------------- the seed example

SEED = [  # action, id, seconds after 12:00:00 (+08:00), in arrival order
    ("pv", "event1", 0),
    ("cart", "event2", 1),
    ("pv", "event4", 4),
    ("pv", "event5", 5),
    ("buy", "event7", 7),
    ("buy", "event3", 3),
    ("cart", "event6", 6),
    ("buy", "event8", 8),
    ("pv", "event9", 9),
]
NOON = 1590292800000  # 2020-05-24 12:00:00 +08:00


class CountPerWindow(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start - NOON, window.end - NOON, len(list(elements)))


@pytest.fixture(scope="module")
def seed_df(spark):
    rows = [(a, i, NOON + s * 1000, n) for n, (a, i, s) in enumerate(SEED)]
    return spark.createDataFrame(rows, "action string, id string, ts long, arrival long")


def _seed_windows(seed_df, order_by, **window_options):
    late = tm.OutputTag("late")
    windowed = (
        tm.from_dataframe(seed_df, timestamp="ts", order_by=order_by)
        .key_by("action")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
        .side_output_late_data(late)
    )
    if "allowed_lateness" in window_options:
        windowed = windowed.allowed_lateness(window_options["allowed_lateness"])
    result = windowed.process(CountPerWindow(), "action string, start long, end long, n long")
    windows = sorted(tuple(r) for r in result.to_dataframe().collect())
    late_ids = [r["id"] for r in result.get_side_output(late).to_dataframe().collect()]
    return windows, late_ids


def test_seed_replay_matches_the_article(seed_df):
    windows, late = _seed_windows(seed_df, "arrival")
    assert windows == [
        ("buy", 5000, 10000, 2),
        ("cart", 0, 5000, 1),
        ("cart", 5000, 10000, 1),
        ("pv", 0, 5000, 2),
        ("pv", 5000, 10000, 2),
    ]
    assert late == ["event3"]


def test_seed_batch_has_nothing_late(seed_df):
    windows, late = _seed_windows(seed_df, None)
    assert ("buy", 0, 5000, 1) in windows and late == []


def test_seed_replay_late_firing_within_allowed_lateness(seed_df):
    windows, late = _seed_windows(seed_df, "arrival", allowed_lateness=3000)
    assert ("buy", 0, 5000, 1) in windows and late == []


# ---------------------------------------------------------------- randomized replays


class Observe(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        values = sorted(e[1] for e in elements)
        yield (key, window.start, window.end, str(values), context.current_watermark())


def _random_stream(seed: int, n: int = 120) -> list[tuple[str, int, int, int]]:
    rng = random.Random(seed)
    rows, clock = [], 0
    for arrival in range(n):
        clock += rng.randrange(0, 40)
        rows.append((f"k{rng.randrange(4)}", arrival, clock - rng.randrange(0, 120), arrival))
    return rows


def _engine_replay(rows, assigner, lateness, ooo):
    late = tm.OutputTag("late")
    h = WindowOperatorHarness(
        assigner,
        Observe(),
        key_selector=lambda r: r[0],
        allowed_lateness=lateness,
        late_data_tag=late,
    )
    best = None
    for row in rows:
        h.process_element(row, row[2])
        best = row[2] if best is None else max(best, row[2])
        h.process_watermark(best - ooo - 1)
    h.process_watermark(tm.LONG_MAX)
    return sorted(h.output()), sorted(r[1] for r, _ in h.side_output(late))


@pytest.mark.parametrize(
    "seed, assigner, lateness, ooo",
    [
        pytest.param(1, tm.TumblingEventTimeWindows.of(100), 0, 20, id="tumbling"),
        pytest.param(2, tm.SlidingEventTimeWindows.of(150, 50, 10), 40, 0, id="sliding-offset"),
        pytest.param(3, tm.EventTimeSessionWindows.with_gap(60), 30, 10, id="sessions"),
    ],
)
def test_random_replay_equals_harness(spark, seed, assigner, lateness, ooo):
    rows = _random_stream(seed)
    df = spark.createDataFrame(rows, "k string, v long, ts long, arrival long")
    late = tm.OutputTag("late")
    result = (
        tm.from_dataframe(
            df,
            timestamp="ts",
            order_by="arrival",
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(ooo),
        )
        .key_by("k")
        .window(assigner)
        .allowed_lateness(lateness)
        .side_output_late_data(late)
        .process(Observe(), "k string, s long, e long, vals string, wm long")
    )
    got = sorted((tuple(r), r["e"] - 1) for r in result.to_dataframe().collect())
    got_late = sorted(r["v"] for r in result.get_side_output(late).to_dataframe().collect())
    want, want_late = _engine_replay(rows, assigner, lateness, ooo)
    assert got == want
    assert got_late == want_late


# ---------------------------------------------------------------- API behaviour


@pytest.fixture(scope="module")
def sales(spark):
    rows = [  # user, amount, ts (ms), arrival
        ("ann", 5, 1_000, 0),
        ("bob", 7, 2_000, 1),
        ("ann", 3, 30_000, 2),
        ("cid", 1, 59_999, 3),
        ("bob", 2, 61_000, 4),
        ("ann", 9, 62_000, 5),
        ("cid", 4, 119_000, 6),
    ]
    return spark.createDataFrame(rows, "user string, amount long, ts long, arrival long")


def _minute(stream):
    return stream.key_by("user").window(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(1)))


def test_shorthand_aggregations_keep_the_input_schema(sales):
    stream = tm.from_dataframe(sales, timestamp="ts")
    sums = _minute(stream).sum("amount").to_dataframe()
    assert sums.columns == sales.columns
    assert sorted((r["user"], r["amount"], r["ts"]) for r in sums.collect()) == [
        ("ann", 8, 1_000),
        ("ann", 9, 62_000),
        ("bob", 2, 61_000),
        ("bob", 7, 2_000),
        ("cid", 1, 59_999),
        ("cid", 4, 119_000),
    ]
    max_rows = _minute(stream).max("amount").to_dataframe().collect()
    maxes = {(r["user"], r["ts"] // 60_000): r["amount"] for r in max_rows}
    assert maxes[("ann", 0)] == 5
    min_by = _minute(stream).min_by("amount").to_dataframe().collect()
    assert ("ann", 3, 30_000) in [(r["user"], r["amount"], r["ts"]) for r in min_by]


class TopOne(tm.ProcessAllWindowFunction):
    def process(self, context, elements):
        best = max(elements, key=lambda r: (r["amount"], r["user"]))
        yield (context.window().start, best["user"], best["amount"])


@pytest.mark.parametrize("order_by", [None, "arrival"], ids=["batch", "replay"])
def test_windows_chain_on_result_timestamps(sales, order_by):
    stream = tm.from_dataframe(sales, timestamp="ts", order_by=order_by)
    per_user = _minute(stream).sum("amount")
    top = per_user.window_all(tm.TumblingEventTimeWindows.of(60_000)).process(
        TopOne(), "minute long, user string, amount long"
    )
    assert sorted(tuple(r) for r in top.to_dataframe().collect()) == [
        (0, "ann", 8),
        (60_000, "ann", 9),
    ]


def test_count_windows(sales):
    stream = tm.from_dataframe(sales, timestamp="ts")
    tumbling = stream.key_by("user").count_window(2).sum("amount").to_dataframe().collect()
    assert sorted((r["user"], r["amount"]) for r in tumbling) == [
        ("ann", 8),
        ("bob", 9),
        ("cid", 5),
    ]
    sliding = stream.key_by("user").count_window(2, 1).sum("amount").to_dataframe().collect()
    assert sorted((r["user"], r["amount"]) for r in sliding) == [
        ("ann", 5),
        ("ann", 8),
        ("ann", 12),
        ("bob", 7),
        ("bob", 9),
        ("cid", 1),
        ("cid", 5),
    ]


def test_key_by_a_function_of_row(sales):
    stream = tm.from_dataframe(sales, timestamp="ts")
    result = (
        stream.key_by(lambda row: row["user"][0].upper())
        .window(tm.TumblingEventTimeWindows.of(120_000))
        .sum("amount")
        .to_dataframe()
        .collect()
    )
    assert sorted(r["amount"] for r in result) == [5, 9, 17]


def test_timestamp_columns_may_be_spark_timestamps(spark):
    df = spark.sql(
        "select 'a' as k, 1L as v, timestamp'2020-05-24 04:00:01' as t union all "
        "select 'a', 2L, timestamp'2020-05-24 04:00:04'"
    )
    result = (
        tm.from_dataframe(df, timestamp="t")
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(5000))
        .sum("v")
        .to_dataframe()
        .collect()
    )
    assert [r["v"] for r in result] == [3]


# ---------------------------------------------------------------- bad input


def test_missing_columns_are_named(sales):
    with pytest.raises(tm.WindowSpecError, match="`timestamp` names a missing column 'when'"):
        tm.from_dataframe(sales, timestamp="when")
    with pytest.raises(
        tm.WindowSpecError, match=r"`key` names columns that do not exist: \['who'\]"
    ):
        tm.from_dataframe(sales, timestamp="ts").key_by("who")


def test_an_output_schema_is_asked_for(sales):
    windowed = _minute(tm.from_dataframe(sales, timestamp="ts"))
    with pytest.raises(tm.WindowSpecError, match="`output_schema` is needed"):
        windowed.process(CountPerWindow())


def test_side_output_needs_a_schema(sales):
    result = _minute(tm.from_dataframe(sales, timestamp="ts")).sum("amount")
    with pytest.raises(tm.WindowSpecError, match="needs a schema"):
        result.get_side_output(tm.OutputTag("extra"))


def test_replay_options_need_order_by(sales):
    with pytest.raises(tm.WindowSpecError, match="`processing_time` belongs to a replay"):
        tm.from_dataframe(sales, timestamp="ts", processing_time="arrival")


@pytest.mark.parametrize(
    "rows, message",
    [
        pytest.param([(None, 1, 5)], "null key in column 'user'", id="null-key"),
        pytest.param([("ann", 1, None)], "null timestamp in column 'ts'", id="null-timestamp"),
    ],
)
def test_bad_rows_fail_with_the_column_and_an_example(spark, rows, message):
    df = spark.createDataFrame(rows, "user string, amount long, ts long")
    result = _minute(tm.from_dataframe(df, timestamp="ts")).sum("amount")
    with pytest.raises(Exception, match=message):
        result.to_dataframe().collect()


def test_unparseable_timestamp_strings_are_reported(spark):
    df = spark.createDataFrame([("ann", 1, "yesterday")], "user string, amount long, ts string")
    result = _minute(tm.from_dataframe(df, timestamp="ts")).sum("amount")
    with pytest.raises(Exception, match=r"unparseable \('yesterday'\) timestamp in column 'ts'"):
        result.to_dataframe().collect()


def test_a_failing_user_function_reports_key_and_window(sales):
    def broken(a, b):
        raise ZeroDivisionError("boom")

    result = _minute(tm.from_dataframe(sales, timestamp="ts")).reduce(broken)
    with pytest.raises(Exception, match=r"key='ann', window=TimeWindow\[0, 60000\)"):
        result.to_dataframe().collect()


def test_timestamps_from_a_timestamp_assigner(sales):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda row, _: row["ts"] + 60_000
    )
    result = (
        tm.from_dataframe(sales, watermark_strategy=strategy)
        .key_by("user")
        .window(tm.TumblingEventTimeWindows.of(120_000))
        .sum("amount")
        .to_dataframe()
        .collect()
    )
    # ts + 1 min: bob@2s and cid@59.999s stay in [0, 2 min); bob@61s moves to the next
    assert sorted((r["user"], r["amount"]) for r in result) == [
        ("ann", 8),
        ("ann", 9),
        ("bob", 2),
        ("bob", 7),
        ("cid", 1),
        ("cid", 4),
    ]


def test_dropped_late_records_are_counted(seed_df):
    result = (
        tm.from_dataframe(seed_df, timestamp="ts", order_by="arrival")
        .key_by("action")
        .window(tm.TumblingEventTimeWindows.of(5000))
        .sum("arrival")
    )
    assert result.num_late_records_dropped() == 1  # event3


def test_batch_ties_in_time_follow_the_values_whatever_the_partitioning(spark):
    """Elements of one key with one timestamp reach an order-sensitive reduce in the order
    of their values, however the input is split and shuffled: a BATCH run is
    deterministic, on the engine path and on the SQL fast path alike."""
    rows = [("k", 10, f"v{n}", n % 3) for n in (5, 2, 9, 0, 7, 1)] + [("k", 70, "late", 0)]
    base = spark.createDataFrame(rows, "key string, ts long, tag string, n long")
    seen = set()
    for df in (base, base.repartition(3), base.orderBy("tag").coalesce(1)):
        stream = tm.from_dataframe(df, timestamp="ts")
        windowed = stream.key_by("key").window(tm.TumblingEventTimeWindows.of(50))
        joined = windowed.reduce(
            lambda a, b: (a[0], a[1], a[2] + "," + b[2], a[3] + b[3]),
            output_schema="key string, ts long, tag string, n long",
        )
        seen.add(tuple(sorted(tuple(r) for r in joined.to_dataframe().collect())))
        spark.conf.set("spark.tidemark.sqlFastPath", "false")
        try:
            first = windowed.sum("n").to_dataframe().collect()
        finally:
            spark.conf.unset("spark.tidemark.sqlFastPath")
        fast = windowed.sum("n").to_dataframe().collect()
        assert sorted(map(tuple, first)) == sorted(map(tuple, fast))
    assert seen == {(("k", 10, "v0,v1,v2,v5,v7,v9", 6), ("k", 70, "late", 0))}


def test_batch_with_an_unorderable_column_orders_ties_by_input_position(spark):
    """A map column cannot be sorted: ties then keep the input's order (a sequence
    column), on both paths."""
    rows = [("k", 10, {"a": n}, n) for n in (3, 1, 2)]
    df = spark.createDataFrame(rows, "key string, ts long, attrs map<string, long>, n long")
    windowed = (
        tm.from_dataframe(df.coalesce(1), timestamp="ts")
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(50))
    )
    spark.conf.set("spark.tidemark.sqlFastPath", "false")
    try:
        engine = [tuple(r) for r in windowed.sum("n").to_dataframe().collect()]
    finally:
        spark.conf.unset("spark.tidemark.sqlFastPath")
    fast = [tuple(r) for r in windowed.sum("n").to_dataframe().collect()]
    assert engine == fast == [("k", 10, {"a": 3}, 6)]


@pytest.mark.parametrize("seed", [0, 1])
def test_batch_order_is_the_same_sorted_by_spark_or_in_the_worker(spark, seed):
    """Where the worker sorts its partition (in memory, or spilled and merged) an
    order-sensitive reduce sees each key's elements in the order Spark's sort gives:
    time, then the values, nulls first."""
    from tidemark.spark.batch.sorting import CONF

    rng = random.Random(seed)
    tags = [None, "", "a", "b", "é", "\u4e2d"]
    doubles = [None, float("nan"), -0.0, 0.0, 1.5, float("-inf")]
    rows = [
        (
            rng.choice(["k1", "k2", "k3"]),
            rng.randrange(0, 300),
            rng.choice(tags),
            rng.choice([None, 1, 2, 3]),
            rng.choice(doubles),
        )
        for _ in range(400)
    ]
    df = spark.createDataFrame(rows, "key string, ts long, tag string, n long, x double")
    windowed = (
        tm.from_dataframe(df.repartition(3), timestamp="ts")
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(100))
    )

    def joined():
        result = windowed.reduce(
            lambda a, b: (a[0], a[1], f"{a[2]}|{b[1]}:{b[2]}:{b[3]}:{_zero(b[4])}", None, None),
            output_schema="key string, ts long, tag string, n long, x double",
        )
        return sorted(tuple(r)[:3] for r in result.to_dataframe().collect())

    runs = {}
    for budget in ("0", "1", "128m"):  # Spark's sort; spilled runs merged; in memory
        spark.conf.set(CONF, budget)
        try:
            runs[budget] = joined()
        finally:
            spark.conf.unset(CONF)
    assert runs["0"] == runs["1"] == runs["128m"]
    assert len(runs["0"]) == len({(k, ts // 100) for k, ts, *_ in rows})
    result = windowed.reduce(lambda a, b: a).to_dataframe()
    assert "Sort [" not in result._jdf.queryExecution().executedPlan().toString()


def _zero(x):
    """-0.0 as 0.0: the two are equal in Spark's order, so their order is not fixed."""
    return None if x is None else x + 0.0


def test_columns_arrow_orders_otherwise_leave_the_sort_to_spark(spark):
    df = spark.createDataFrame([("k", 1, [0.5])], "key string, ts long, x array<double>")
    windowed = (
        tm.from_dataframe(df, timestamp="ts")
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(100))
    )
    result = windowed.reduce(lambda a, b: a).to_dataframe()
    assert "Sort [" in result._jdf.queryExecution().executedPlan().toString()
    assert [tuple(r) for r in result.collect()] == [("k", 1, [0.5])]
