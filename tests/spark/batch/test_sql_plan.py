"""The SQL fast path of shorthand aggregations equals the engine path exactly."""

from __future__ import annotations

import random

import pytest

import tidemark as tm
from tidemark.spark.batch.sql_plan import CONF

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def events(spark):
    rng = random.Random(5)
    rows = []
    for n in range(400):
        amount = None if rng.random() < 0.05 else rng.randrange(-50, 50)
        ts = rng.randrange(-3000, 3000) // 7 * 7  # ties in time
        rows.append((rng.choice("abc"), amount, ts, float(rng.randrange(10)), n))
    return spark.createDataFrame(rows, "k string, amount long, ts long, score double, n long")


def _run(spark, df, assigner, shorthand, keyed, fast):
    spark.conf.set(CONF, "true" if fast else "false")
    try:
        stream = tm.from_dataframe(df, timestamp="ts")
        windowed = stream.key_by("k").window(assigner) if keyed else stream.window_all(assigner)
        result = getattr(windowed, shorthand[0])(shorthand[1])
        rows = [tuple(r) for r in result.to_dataframe().collect()]
        return sorted(rows, key=lambda row: [(v is None, v if v is not None else 0) for v in row])
    finally:
        spark.conf.unset(CONF)


@pytest.mark.parametrize(
    "shorthand",
    [
        ("sum", "amount"),
        ("min", "amount"),
        ("max", "score"),
        ("min_by", "amount"),
        ("max_by", "score"),
    ],
    ids=lambda s: f"{s[0]}-{s[1]}",
)
@pytest.mark.parametrize(
    "assigner",
    [tm.TumblingEventTimeWindows.of(500, 120), tm.SlidingEventTimeWindows.of(900, 300, -100)],
    ids=["tumbling-offset", "sliding-negative-offset"],
)
def test_fast_path_equals_engine(spark, events, assigner, shorthand):
    keyed = shorthand[0] != "max_by"
    fast = _run(spark, events, assigner, shorthand, keyed, fast=True)
    engine = _run(spark, events, assigner, shorthand, keyed, fast=False)
    assert fast == engine and len(fast) > 10


@pytest.mark.parametrize("ts_type", ["long", "timestamp"])
@pytest.mark.parametrize(
    "assigner",
    [tm.TumblingEventTimeWindows.of(500, 120), tm.SlidingEventTimeWindows.of(900, 300, -100)],
    ids=["tumbling", "sliding"],
)
@pytest.mark.parametrize("shorthand", [("sum", "amount"), ("min", "amount"), ("max", "amount")])
def test_narrow_rows_aggregate_without_the_row_struct(spark, events, assigner, shorthand, ts_type):
    # key, field and the event-time column only: the first element's other column is the
    # smallest timestamp, so Spark's hash aggregate serves it (no sort-based aggregate)
    narrow = events.selectExpr("k", "amount", f"cast(ts as {ts_type}) as ts")
    if ts_type == "timestamp":
        narrow = events.selectExpr("k", "amount", "timestamp_millis(ts) as ts")
    fast = _run(spark, narrow, assigner, shorthand, True, fast=True)
    engine = _run(spark, narrow, assigner, shorthand, True, fast=False)
    assert fast == engine and len(fast) > 10
    spark.conf.set(CONF, "true")
    try:
        stream = tm.from_dataframe(narrow, timestamp="ts").key_by("k").window(assigner)
        plan = getattr(stream, shorthand[0])(shorthand[1]).to_dataframe()._jdf.queryExecution()
        assert "SortAggregate" not in plan.executedPlan().toString()
    finally:
        spark.conf.unset(CONF)
