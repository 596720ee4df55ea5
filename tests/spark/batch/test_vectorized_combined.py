"""A vectorized function with a partial step (``tm.VectorizedCombineFunction``): on the
engine (its ``aggregate`` is ``finish`` of the single partial of all values, so every
trigger and late firing keeps its meaning), its definition errors, and in BATCH combined
before the shuffle, equal to the columnar path (``spark.tidemark.preAggregate=false``)
and to the engine path on random inputs split over several partitions; a replay and a
stream give the transcript's windows; the workers' errors arrive as tidemark's.

The engine transcript is ``tests/engine/test_vectorized.py``'s::

    key a: 1.0 @0, null @1, 3.0 @6        key b: 4.0 @2
    watermark 5 -> [0, 5) fires: a [1, nan] -> 1.0, b [4] -> 4.0
    a: 5.0 @3, late within the allowed lateness -> [0, 5) again: [1, nan, 5] -> 3.0
    watermark 20 -> [5, 10) fires: a [3] -> 3.0
"""

from __future__ import annotations

import datetime
import random

import numpy as np
import pytest
from test_vectorized import NanMean, _element, _harness, late_firing
from test_vectorized_spark import LATE, SCHEMA, _collect, _pipeline, _rows, streamed, w

import tidemark as tm
from tidemark.errors import UserFunctionError, WindowResultError, WindowSpecError
from tidemark.spark import execution
from tidemark.spark.runtime.confs import FAST_PATHS, PRE_AGGREGATE
from tidemark.vectorized import vectorized_window_function


class Mean(tm.VectorizedCombineFunction):
    partials = ("total", "count")

    def partial(self, values):
        return np.nansum(values), np.count_nonzero(~np.isnan(values))

    def finish(self, total, count):
        n = count.sum()
        return total.sum() / n if n else None


class MeanPlusRange(tm.VectorizedCombineFunction):
    """Two fields, four partials: exact whatever the split (integer-valued x and y)."""

    partials = ("total", "count", "low", "high")

    def partial(self, x, y):
        kept = ~np.isnan(x)
        if not kept.any():
            return 0.0, 0, np.inf, -np.inf
        return np.sum(x[kept] * y[kept]), int(kept.sum()), np.min(x[kept]), np.max(x[kept])

    def finish(self, total, count, low, high):
        n = count.sum()
        return total.sum() / n + (high.max() - low.min()) if n else None


class Parts(tm.VectorizedCombineFunction):
    """Records the parts ``finish`` gets."""

    partials = ("n",)

    def __init__(self):
        self.finished = []

    def partial(self, values):
        return (len(values),)

    def finish(self, n):
        self.finished.append(n.tolist())
        return float(n.sum())


# ------------------------------------------------------------------ the engine


def test_a_late_firing_recomputes_over_all_values_kept():
    assert late_firing(Mean()) == late_firing(NanMean())  # the transcript of test_vectorized


def test_aggregate_is_finish_of_the_single_partial():
    parts = Parts()
    h = _harness(parts, assigner=tm.SlidingEventTimeWindows.of(6, 3))
    for ts in (0, 4, 2, 7):
        h.process_element(_element("a", 1.0), ts)
    h.process_watermark(100)
    assert [r for r, _ in h.output()] == [
        ("a", -3, 3, 2.0),
        ("a", 0, 6, 3.0),
        ("a", 3, 9, 2.0),
        ("a", 6, 12, 1.0),
    ]
    assert parts.finished == [[2.0], [3.0], [2.0], [1.0]]  # one part, float64


@pytest.mark.parametrize("seed", range(20))
def test_finish_of_any_split_equals_aggregate(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, rng.integers(1, 40)).astype(np.float64)
    x[rng.random(len(x)) < 0.2] = np.nan
    y = rng.integers(-3, 4, len(x)).astype(np.float64)
    f = MeanPlusRange()
    cuts = sorted(rng.choice(np.arange(1, len(x)), min(3, len(x) - 1), replace=False).tolist())
    pieces = [(x[a:b], y[a:b]) for a, b in zip([0, *cuts], [*cuts, len(x)], strict=True)]
    parts = [f.partial(*piece) for piece in reversed(pieces)]
    split = f.finish(*[np.array(column, dtype=np.float64) for column in zip(*parts, strict=True)])
    assert split == f.aggregate(x, y) or (split is None and f.aggregate(x, y) is None)


def test_a_wrong_partial_is_a_window_result_error_with_key_and_window():
    class Short(Mean):
        def partial(self, values):
            return (np.nansum(values),)

    class Text(Mean):
        def partial(self, values):
            return ("sum", 1)

    for function, shown in [(Short(), r"\(np.float64\(1.0\),\) \(tuple\)"), (Text(), "'sum'")]:
        h = _harness(function)
        h.process_element(_element("a", 1.0), 0)
        with pytest.raises(WindowResultError, match="partial returned") as raised:
            h.process_watermark(10)
        message = str(raised.value)
        assert "key='a'" in message and "TimeWindow[0, 5)" in message
        assert "a tuple of 2 numbers" in message and raised.match(shown)


def test_partial_or_finish_raising_is_a_user_function_error():
    class Broken(Mean):
        def finish(self, total, count):
            return 1 / 0

    h = _harness(Broken())
    h.process_element(_element("a", 1.0), 0)
    with pytest.raises(UserFunctionError, match="ZeroDivisionError"):
        h.process_watermark(10)


def _definition(body):
    namespace = {"np": np, "tm": tm}
    exec(f"class Bad(tm.VectorizedCombineFunction):\n{body}", namespace)
    return namespace["Bad"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    partials = 'total'", r"Bad.partials must be a non-empty tuple .* got 'total'"),
        ("    partials = ['total', 'count']", r"non-empty tuple of names; got \['total'"),
        ("    partials = ()", r"non-empty tuple of names; got \(\)"),
        ("    partials = ('n', 'n')", r"distinct identifiers; got \('n', 'n'\)"),
        ("    partials = ('a total',)", "distinct identifiers"),
        ("    partials = ('n',)\n    def aggregate(self, v):\n        return 1.0", "overrides"),
    ],
)
def test_a_bad_declaration_is_refused_when_the_class_is_defined(body, message):
    with pytest.raises(WindowSpecError, match=message) as raised:
        _definition(body)
    assert "partials = ('total', 'count')" in str(raised.value) or "remove aggregate" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    def partial(self, v):\n        return (1,)", r"Bad.partials .* got \(\)"),
        ("    partials = ('n',)\n    def finish(self, n):\n        return 1.0", "define `partial`"),
        ("    partials = ('n',)\n    def partial(self, v):\n        return (1,)", "`finish`"),
    ],
)
def test_what_is_missing_is_refused_when_the_pipeline_is_defined(body, message):
    function = _definition(body)()
    with pytest.raises(WindowSpecError, match=message):
        vectorized_window_function(function, ["x"], "double", 1)


# ------------------------------------------------------------------ on Spark


@pytest.fixture
def confs(spark):
    """Set Spark confs for one test; unset after."""
    names = []

    def set_conf(name, value):
        names.append(name)
        spark.conf.set(name, value)

    yield set_conf
    for name in names:
        spark.conf.unset(name)


@pytest.mark.spark
def test_batch_combines_each_window_once_over_all_its_values(spark):
    df = spark.createDataFrame(_rows(), SCHEMA).repartition(8)  # some partitions empty
    result = _pipeline(df, Mean())
    assert execution.mode_of(result.plan, spark) is execution.ExecutionMode.VECTORIZED_COMBINED
    assert _collect(result) == [
        ("a", w(0), w(5), 3.0),
        ("a", w(5), w(10), 3.0),
        ("b", w(0), w(5), 4.0),
        ("b", w(5), w(10), 2.0),
    ]
    assert result.metrics()["num_records_in"] == 6


@pytest.mark.spark
def test_replay_fires_late_with_allowed_lateness(spark):
    result = _pipeline(spark.createDataFrame(_rows(), SCHEMA), Mean(), order_by="arrival")
    assert execution.mode_of(result.plan, spark) is execution.ExecutionMode.REPLAY
    assert _collect(result) == LATE


@pytest.mark.spark
def test_stream_fires_late_with_allowed_lateness(spark, tmp_path):
    assert streamed(spark, tmp_path, Mean()) == LATE


RANDOM_SCHEMA = "k string, n int, d date, b boolean, x double, y long, ts long"


def _random_rows(seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(rng.randrange(150, 400)):
        x = rng.choice([None, float("nan"), *[float(rng.randrange(-9, 10))] * 6])
        ts = rng.choice([rng.randrange(-4000, 4000), rng.randrange(20000, 21000)])
        key = rng.choice(["a", "b", "c", "é"])
        day = datetime.date(2024, 2, rng.randrange(28, 30))
        ts = ts // 3 * 3
        rows.append((key, rng.randrange(2), day, day.day == 28, x, rng.randrange(-3, 4), ts))
    rows += [("z", 2, DAY, True, None, 1, ts) for ts in (-2000, -1999, 20500)]  # nulls only
    return rows


DAY = datetime.date(2024, 3, 1)
CASES = [  # keys of each kind the columnar path takes: strings, ints, dates, booleans
    (tm.TumblingEventTimeWindows.of(700), ["k"]),
    (tm.TumblingEventTimeWindows.of(1000, 333), ["d"]),
    (tm.SlidingEventTimeWindows.of(900, 300, -100), ["k", "n"]),
    (tm.SlidingEventTimeWindows.of(1000, 400), ["b", "k"]),  # size not a multiple of the slide
]


@pytest.mark.spark
@pytest.mark.parametrize(("seed", "case"), list(enumerate(CASES)), ids=lambda c: repr(c))
def test_combined_equals_the_columnar_and_the_engine_path(spark, confs, seed, case):
    assigner, keys = case
    df = spark.createDataFrame(_random_rows(seed), RANDOM_SCHEMA).repartition(3)
    runs = []
    for conf, expected in [
        (None, execution.ExecutionMode.VECTORIZED_COMBINED),
        (PRE_AGGREGATE.name, execution.ExecutionMode.VECTORIZED),
        (FAST_PATHS.name, execution.ExecutionMode.BATCH),
    ]:
        if conf is not None:
            confs(conf, "false")
        stream = tm.from_dataframe(df, timestamp="ts").key_by(keys).window(assigner)
        result = stream.aggregate_vectorized(MeanPlusRange(), ["x", "y"], output_name="v")
        assert execution.mode_of(result.plan, spark) is expected
        runs.append((_collect(result), result.metrics()["num_records_in"]))
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0][0]) > 10 and any(r[-1] is None for r in runs[0][0])


class ShortPartial(Mean):
    def partial(self, values):
        return (np.nansum(values),)


class BrokenPartial(Mean):
    def partial(self, values):
        return 1 / 0


class BrokenFinish(Mean):
    def finish(self, total, count):
        return 1 / 0


class TextFinish(Mean):
    def finish(self, total, count):
        return "text"


@pytest.mark.spark
def test_the_workers_errors_are_tidemarks_with_key_and_window(spark):
    df = spark.createDataFrame(_rows(), SCHEMA)
    for function, error, message in [
        (ShortPartial(), WindowResultError, "ShortPartial.partial returned"),
        (BrokenPartial(), UserFunctionError, "BrokenPartial.partial raised ZeroDivisionError"),
        (BrokenFinish(), UserFunctionError, "BrokenFinish.finish raised ZeroDivisionError"),
        (TextFinish(), WindowResultError, "return a number"),
    ]:
        result = _pipeline(df, function)
        assert execution.mode_of(result.plan, spark) is execution.ExecutionMode.VECTORIZED_COMBINED
        with pytest.raises(error, match=message) as raised:
            _collect(result)
        assert "key='a'" in str(raised.value) or "key='b'" in str(raised.value)
        assert "TimeWindow[" in str(raised.value)
