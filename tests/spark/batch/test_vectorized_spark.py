"""``aggregate_vectorized`` through every Spark mode: the engine transcript of
``tests/engine/test_vectorized.py`` in BATCH (columnar and engine paths), as a replay and as a
stream; the columnar path against the engine path on random inputs; the errors.
"""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest

import tidemark as tm
from tidemark.errors import UserFunctionError, WindowResultError, WindowSpecError
from tidemark.spark import execution
from tidemark.spark.batch.columnar import CONF
from tidemark.spark.streaming import END_OF_INPUT_MS

pytestmark = pytest.mark.spark

SCHEMA = "k string, x double, y long, ts long, arrival long"
# (key, x, ts) in arrival order, in two micro-batches; times in seconds
BATCHES = [
    [("a", 1.0, 0), ("a", None, 1), ("b", 4.0, 2), ("a", 3.0, 6)],
    [("a", 5.0, 3), ("b", 2.0, 7)],
]
SECOND = 1000
NOON = 1590292800000  # a multiple of the windows' size: Spark's clock starts at 0


def w(seconds):
    """A window bound, ``seconds`` after NOON, in ms."""
    return NOON + seconds * SECOND


class NanMean(tm.VectorizedAggregateFunction):
    def aggregate(self, values):
        return np.nanmean(values)


def _rows():
    flat = [row for batch in BATCHES for row in batch]
    return [(k, x, 1, w(ts), n) for n, (k, x, ts) in enumerate(flat)]


LATE = [
    ("a", w(0), w(5), 1.0),  # on time: [1, null]
    ("a", w(0), w(5), 3.0),  # late firing: [1, null, 5]
    ("a", w(5), w(10), 3.0),
    ("b", w(0), w(5), 4.0),
    ("b", w(5), w(10), 2.0),
]
"""What a replay and a stream of BATCHES emit (in order)."""


def _pipeline(df, function=None, **source):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps()
    stream = tm.from_dataframe(df, timestamp="ts", watermark_strategy=strategy, **source)
    stream = stream.key_by("k")
    windowed = stream.window(tm.TumblingEventTimeWindows.of(5 * SECOND))
    return windowed.allowed_lateness(10 * SECOND).aggregate_vectorized(function or NanMean(), ["x"])


def _collect(result):
    with tm.raising_tidemark_errors():
        return sorted(tuple(r) for r in result.to_dataframe().collect())


@pytest.fixture
def columnar(spark):
    """Run the test with the columnar path on (True) and off (False)."""
    yield lambda on: spark.conf.set(CONF, "true" if on else "false")
    spark.conf.unset(CONF)


@pytest.mark.parametrize("on", [True, False], ids=["columnar", "engine"])
def test_batch_fires_each_window_once_over_all_its_values(spark, columnar, on):
    columnar(on)
    result = _pipeline(spark.createDataFrame(_rows(), SCHEMA))
    mode = execution.ExecutionMode.VECTORIZED if on else execution.ExecutionMode.BATCH
    assert execution.mode_of(result.plan, spark) is mode
    assert _collect(result) == [
        ("a", w(0), w(5), 3.0),  # [1, null, 5]: the late element is on time in BATCH
        ("a", w(5), w(10), 3.0),
        ("b", w(0), w(5), 4.0),
        ("b", w(5), w(10), 2.0),
    ]
    assert result.metrics()["num_records_in"] == 6


def test_replay_fires_late_with_allowed_lateness(spark):
    result = _pipeline(spark.createDataFrame(_rows(), SCHEMA), order_by="arrival")
    assert _collect(result) == LATE


def test_stream_fires_late_with_allowed_lateness(spark, tmp_path):
    assert streamed(spark, tmp_path) == LATE


def streamed(spark, tmp_path, function=None):
    """The sorted results of ``_pipeline(function)`` streaming BATCHES, a micro-batch
    each, then an element at the end of time (its own result left out)."""
    directory = tmp_path / "in"
    directory.mkdir()
    lines = [
        [{"k": k, "x": x, "y": 1, "ts": w(ts), "arrival": 0} for k, x, ts in batch]
        for batch in BATCHES
    ]
    lines.append([{"k": "_end", "x": None, "y": 0, "ts": END_OF_INPUT_MS, "arrival": 0}])
    for n, rows in enumerate(lines):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(directory))
    collected: list[tuple] = []
    query = _pipeline(source, function).write_outputs(
        {"main": lambda df, _: collected.extend(tuple(r) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    return sorted(r for r in collected if r[0] != "_end")


def _random_rows(seed):
    rng = random.Random(seed)
    rows = []
    for n in range(rng.randrange(150, 400)):
        x = rng.choice([None, float("nan"), *[rng.uniform(-5, 5)] * 6])
        ts = rng.choice([rng.randrange(-4000, 4000), rng.randrange(20000, 21000)])
        rows.append((rng.choice(["a", "b", "c", "é"]), x, rng.randrange(-3, 4), ts // 3 * 3, n))
    return rows


class WeightedP75(tm.VectorizedAggregateFunction):
    """Order-sensitive in floating point, two fields: any difference in what a window
    hands it, or in the order, shows."""

    def aggregate(self, x, y):
        total = 0.0
        for value, weight in zip(x, y, strict=True):
            total = total * 0.5 + value * weight
        return float(np.nanpercentile(x, 75)) + total if len(x) else None


ASSIGNERS = [
    tm.TumblingEventTimeWindows.of(700),
    tm.TumblingEventTimeWindows.of(1000, 333),
    tm.SlidingEventTimeWindows.of(900, 300, -100),
    tm.SlidingEventTimeWindows.of(1000, 400),  # size not a multiple of the slide
]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("assigner", ASSIGNERS, ids=repr)
def test_columnar_path_equals_the_engine_path(spark, columnar, seed, assigner):
    df = spark.createDataFrame(_random_rows(seed), SCHEMA)
    runs = []
    for on in (True, False):
        columnar(on)
        stream = tm.from_dataframe(df, timestamp="ts").key_by("k").window(assigner)
        result = stream.aggregate_vectorized(WeightedP75(), ["x", "y"], output_name="v")
        runs.append([tuple(map(_comparable, r)) for r in _collect(result)])
    assert runs[0] == runs[1] and len(runs[0]) > 10


def _comparable(value):
    return "nan" if isinstance(value, float) and value != value else value


def test_a_wrong_result_type_is_tidemarks_error_in_the_columnar_path(spark):
    df = spark.createDataFrame(_rows(), SCHEMA)
    stream = tm.from_dataframe(df, timestamp="ts").key_by("k")
    windowed = stream.window(tm.TumblingEventTimeWindows.of(5 * SECOND))
    with pytest.raises(WindowResultError, match="return a number"):
        _collect(windowed.aggregate_vectorized(lambda v: "text", ["x"]))
    with pytest.raises(UserFunctionError, match="ZeroDivisionError"):
        _collect(windowed.aggregate_vectorized(lambda v: 1 / 0, ["x"]))


def test_definition_mistakes_name_the_fix(spark):
    df = spark.createDataFrame(_rows(), SCHEMA).withColumn("s", tm_lit("text"))
    windowed = tm.from_dataframe(df, timestamp="ts").key_by("k")
    windowed = windowed.window(tm.TumblingEventTimeWindows.of(SECOND))
    with pytest.raises(WindowSpecError, match="columns of the stream; got 'nope'"):
        windowed.aggregate_vectorized(NanMean(), ["nope"])
    with pytest.raises(WindowSpecError, match="numeric columns .* got 's' of type string"):
        windowed.aggregate_vectorized(NanMean(), ["s"])
    with pytest.raises(WindowSpecError, match="output_name"):
        windowed.aggregate_vectorized(NanMean(), ["x"], output_name="window_start")
    with pytest.raises(WindowSpecError, match="output_type"):
        windowed.aggregate_vectorized(NanMean(), ["x"], output_type="array<double>")
    keyed = tm.from_dataframe(df, timestamp="ts").key_by(lambda row: row.k)
    with pytest.raises(WindowSpecError, match="keyed by columns"):
        keyed.window(tm.TumblingEventTimeWindows.of(SECOND)).aggregate_vectorized(NanMean(), ["x"])


def tm_lit(value):
    from pyspark.sql import functions as F

    return F.lit(value)


def test_other_windows_run_on_the_engine(spark):
    df = spark.createDataFrame(_rows(), SCHEMA)
    stream = tm.from_dataframe(df, timestamp="ts").key_by("k")
    evicting = stream.window(tm.TumblingEventTimeWindows.of(5 * SECOND)).evictor(
        tm.CountEvictor.of(1)
    )
    result = evicting.aggregate_vectorized(NanMean(), ["x"])
    assert execution.mode_of(result.plan, spark) is execution.ExecutionMode.BATCH
    assert _collect(result) == [
        ("a", w(0), w(5), 5.0),  # the evictor kept the last element by time
        ("a", w(5), w(10), 3.0),
        ("b", w(0), w(5), 4.0),
        ("b", w(5), w(10), 2.0),
    ]
