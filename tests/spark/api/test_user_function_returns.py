"""What the user's functions return: a value tidemark cannot hold is refused by name.

A reduce function (or an AggregateFunction's ``add``/``merge``) returning None would
lose its window (None is "no contents"), a key function returning None would put every
row under one key, a process function yielding None would give a row of nulls: each is
refused, as Flink refuses a null record or key, in the engine and in every Spark mode.
"""

from __future__ import annotations

import json
import os
import re

import pytest

import tidemark as tm
from tidemark.testing import WindowOperatorHarness

WINDOW = tm.TumblingEventTimeWindows.of(10)
MODES = ["batch", "replay"]


def forgets_return(a, b):
    a + b  # noqa: B018 (the mistake under test)


class ForgetfulAdd(tm.AggregateFunction):
    def create_accumulator(self):
        return [0]

    def add(self, value, accumulator):
        accumulator[0] += value[1]  # mutates, forgets to return

    def get_result(self, accumulator):
        return accumulator[0]

    def merge(self, a, b):
        return [a[0] + b[0]]


class CountPerKey(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, len(list(elements)))


ASSIGNERS = {
    "tumbling": tm.TumblingEventTimeWindows.of(10),
    "sliding": tm.SlidingEventTimeWindows.of(10, 5),
    "sessions": tm.EventTimeSessionWindows.with_gap(10),
}


# ------------------------------------------------------------------ the engine


@pytest.mark.parametrize("assigner", list(ASSIGNERS), ids=list(ASSIGNERS))
@pytest.mark.parametrize("fast_paths", [True, False], ids=["fast", "general"])
@pytest.mark.parametrize("function", [forgets_return, ForgetfulAdd()], ids=["reduce", "aggregate"])
def test_an_incremental_function_returning_none_is_refused_in_the_engine(
    assigner, fast_paths, function
):
    h = WindowOperatorHarness(
        ASSIGNERS[assigner], function, key_selector=lambda v: v[0], fast_paths=fast_paths
    )
    with pytest.raises(tm.UserFunctionError) as info:
        h.process_element(("a", 1), 1)  # an aggregate's add is called at once
        h.process_element(("a", 2), 2)
        h.process_watermark(100)
    message = str(info.value)
    name = "forgets_return" if function is forgets_return else "ForgetfulAdd"
    assert message.startswith(f"the reduce/aggregate function {name} returned None")
    assert "key='a'" in message and "a missing `return`?" in message


@pytest.mark.parametrize("slice_incremental", [True, False])
def test_a_reduce_returning_none_is_refused_in_runs_and_slices(slice_incremental):
    h = WindowOperatorHarness(
        tm.SlidingEventTimeWindows.of(10, 5),
        forgets_return,
        key_selector=lambda v: v[0],
        batch_mode=True,
        slice_incremental=slice_incremental,
    )
    with pytest.raises(tm.UserFunctionError, match="forgets_return returned None"):
        for ts in range(0, 30, 3):
            h.process_element(("a", ts), ts)
        h.process_watermark(100)


def test_merging_sessions_with_a_reduce_returning_none_is_refused():
    h = WindowOperatorHarness(
        tm.EventTimeSessionWindows.with_gap(10), forgets_return, key_selector=lambda v: v[0]
    )
    h.process_element(("a", 1), 1)
    h.process_element(("a", 20), 20)
    with pytest.raises(tm.UserFunctionError, match="forgets_return returned None"):
        h.process_element(("a", 10), 10)  # bridges the two sessions: merged
        h.process_watermark(100)


def test_a_reduce_returning_a_value_is_unchanged():
    h = WindowOperatorHarness(WINDOW, lambda a, b: (a[0], a[1] + b[1]), key_selector=lambda v: v[0])
    h.process_element(("a", 1), 1)
    h.process_element(("a", 2), 2)
    h.process_watermark(100)
    assert h.output() == [(("a", 3), 9)]


# ------------------------------------------------------------------ through Spark


ROWS = [("a", 1, 1), ("a", 5, 2), ("b", 12, 4)]


def _frame(spark, rows=ROWS):
    return spark.createDataFrame(rows, "k string, ts long, v long")


def _order(mode):
    return "ts" if mode == "replay" else None


def _stream_error(spark, tmp_path, build, error=tm.TidemarkError, **source):
    """The tidemark error a stream of :data:`ROWS` through ``build(stream)`` fails with
    (``source``: ``from_dataframe``'s options; the column ``ts`` by default)."""
    source_dir = tmp_path / "in"
    source_dir.mkdir()
    lines = [json.dumps({"k": k, "ts": ts, "v": v}) for k, ts, v in ROWS]
    (source_dir / "batch-0.json").write_text("\n".join(lines) + "\n")
    os.utime(source_dir / "batch-0.json", (1_000_000, 1_000_000))
    source_df = spark.readStream.schema("k string, ts long, v long").json(str(source_dir))
    options = source or {"timestamp": "ts"}
    result = build(tm.from_dataframe(source_df, shift_spark_clock=True, **options))
    query = result.write_outputs({"main": lambda df, b: df.collect()}, str(tmp_path / "cp"))
    try:
        with pytest.raises(error) as info:
            query.processAllAvailable()
        return info.value
    finally:
        query.stop()


def _collect_error(spark, build, mode, error):
    """The message of the ``error`` collecting ``build(stream)`` of :data:`ROWS` in
    ``mode`` raises."""
    result = build(tm.from_dataframe(_frame(spark), "ts", order_by=_order(mode)))
    with pytest.raises(error) as info, tm.raising_tidemark_errors():
        result.to_dataframe().collect()
    return str(info.value)


def _reduce_none(stream):
    return stream.key_by("k").window(WINDOW).reduce(forgets_return)


@pytest.mark.spark
@pytest.mark.parametrize("mode", MODES)
def test_a_reduce_returning_none_is_refused_on_collect(spark, mode):
    message = _collect_error(spark, _reduce_none, mode, tm.UserFunctionError)
    assert message.startswith("the reduce/aggregate function forgets_return returned None")
    assert "key='a'" in message and "TimeWindow[0, 10)" in message


@pytest.mark.spark
def test_a_reduce_returning_none_fails_the_stream(spark, tmp_path):
    error = _stream_error(spark, tmp_path, _reduce_none, error=tm.UserFunctionError)
    assert str(error).startswith("the reduce/aggregate function forgets_return returned None")


def forgets_key(row):
    row.k  # noqa: B018 (the mistake under test)


def key_of_a_only(row):
    return {"a": 1}[row.k]


KEY_CASES = {
    "none": (forgets_key, "the key function forgets_key returned None for row"),
    "raises": (key_of_a_only, "the key function key_of_a_only raised KeyError: 'b'"),
}


@pytest.mark.spark
@pytest.mark.parametrize("case", list(KEY_CASES))
@pytest.mark.parametrize("mode", MODES)
def test_a_key_function_returning_none_or_raising_is_refused_on_collect(spark, mode, case):
    function, start = KEY_CASES[case]

    def build(stream):
        return stream.key_by(function).window(WINDOW).sum("v")

    message = _collect_error(spark, build, mode, tm.UserFunctionError)
    assert message.startswith(start)
    if case == "none":  # any row: each has the key None
        assert "for row Row(k=" in message and "Assigned key must not be null!" in message
    else:
        assert message.endswith("(row Row(k='b', ts=12, v=4))")


@pytest.mark.spark
@pytest.mark.parametrize("case", list(KEY_CASES))
def test_a_key_function_returning_none_or_raising_fails_the_stream(spark, tmp_path, case):
    function, start = KEY_CASES[case]

    def build(stream):
        return stream.key_by(function).window(WINDOW).sum("v")

    error = _stream_error(spark, tmp_path, build, error=tm.UserFunctionError)
    assert str(error).startswith(start)


class YieldsNone(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield None


class AppliesNone(tm.WindowFunction):
    def apply(self, key, window, inputs):
        return [None]


@pytest.mark.parametrize("function", [YieldsNone(), AppliesNone()], ids=["process", "apply"])
def test_a_window_function_yielding_none_is_refused_in_the_engine(function):
    h = WindowOperatorHarness(WINDOW, function, key_selector=lambda v: v[0])
    h.process_element(("a", 1), 1)
    with pytest.raises(tm.WindowResultError) as info:
        h.process_watermark(100)
    name = type(function).__name__
    assert str(info.value).startswith(f"the window function {name} yielded None (key='a'")
    assert info.value.key == "a"


def test_a_reduce_whose_evictor_removed_everything_still_gives_flinks_null_record():
    h = WindowOperatorHarness(
        WINDOW,
        lambda a, b: a,
        key_selector=lambda v: v[0],
        evictor=tm.TimeEvictor.of(0),
    )
    h.process_element(("a", 1), 1)
    h.process_watermark(100)
    assert h.output() == [(None, 9)]


def _yields_none(stream):
    return stream.key_by("k").window(WINDOW).process(YieldsNone(), "k string, n long")


@pytest.mark.spark
@pytest.mark.parametrize("mode", MODES)
def test_a_process_function_yielding_none_is_refused_on_collect(spark, mode):
    message = _collect_error(spark, _yields_none, mode, tm.WindowResultError)
    assert message.startswith("the window function YieldsNone yielded None (key=")


@pytest.mark.spark
def test_a_process_function_yielding_none_fails_the_stream(spark, tmp_path):
    error = _stream_error(spark, tmp_path, _yields_none, error=tm.WindowResultError)
    assert str(error).startswith("the window function YieldsNone yielded None (key=")


# ------------------------------------------------------------------ floats for integers


class Half(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, 1.5)


class WholeFloat(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, 2.0)


def _floats(stream, function=None):
    return stream.key_by("k").window(WINDOW).process(function or Half(), "k string, n long")


FLOAT_REFUSED = "`output_schema` field 'n' is bigint, but a result holds 1.5 (float) there"


@pytest.mark.spark
@pytest.mark.parametrize("mode", MODES)
def test_a_float_for_a_long_field_is_refused_on_collect(spark, mode):
    message = _collect_error(spark, _floats, mode, tm.WindowResultError)
    assert message.startswith(FLOAT_REFUSED)
    assert "Spark takes no float for an integral field" in message
    assert "Return a bigint value for 'n'" in message


@pytest.mark.spark
def test_a_whole_float_for_a_long_field_is_refused_as_spark_refuses_it(spark):
    with pytest.raises(Exception, match="FIELD_DATA_TYPE_UNACCEPTABLE"):
        spark.createDataFrame([("a", 2.0)], "k string, n long")
    result = _floats(tm.from_dataframe(_frame(spark), "ts"), WholeFloat())
    with pytest.raises(tm.WindowResultError, match="holds 2.0 \\(float\\)"):
        with tm.raising_tidemark_errors():
            result.to_dataframe().collect()


@pytest.mark.spark
def test_a_float_for_a_long_field_fails_the_stream(spark, tmp_path):
    error = _stream_error(spark, tmp_path, _floats, error=tm.WindowResultError)
    assert str(error).startswith(FLOAT_REFUSED)


def fractional_ms(row, record_timestamp):
    return row.ts + 0.7


FLOAT_STAMP = (
    r"^timestamp assigner <function fractional_ms at .*> must return int milliseconds since "
    r"the epoch \(a long\); got (1|5|12)\.7 \(float\) for row Row\(k='[ab]', ts=(1|5|12), "
    r"v=[124]\): round it to whole milliseconds, e\.g\. math\.floor\(seconds \* 1000\)"
)


def _fractional(stream):
    return stream.key_by("k").window(WINDOW).sum("v")


def _strategy():
    return tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(fractional_ms)


@pytest.mark.spark
@pytest.mark.parametrize("mode", MODES)
def test_an_assigner_returning_a_float_is_refused_on_collect(spark, mode):
    stream = tm.from_dataframe(_frame(spark), watermark_strategy=_strategy(), order_by=_order(mode))
    with pytest.raises(tm.UserFunctionError, match=FLOAT_STAMP), tm.raising_tidemark_errors():
        _fractional(stream).to_dataframe().collect()


@pytest.mark.spark
def test_an_assigner_returning_a_float_fails_the_stream(spark, tmp_path):
    error = _stream_error(
        spark, tmp_path, _fractional, tm.UserFunctionError, watermark_strategy=_strategy()
    )
    assert re.match(FLOAT_STAMP, str(error))


# ------------------------------------------------------------------ beyond datetime

FAR_SECONDS = 253402300800 + 86400 * 400  # 10001-02-04, which Spark holds
FAR_REFUSED = (
    r"^timestamp 253436860800000 ms since the epoch \(about the year 10001\) in column 'ts' "
    r"is outside what a Python datetime holds"
)


def _far(df):
    from pyspark.sql import functions as F

    return df.select(
        F.lit("a").alias("k"),
        F.when(F.col("id") == 0, F.timestamp_seconds(F.lit(1704067200)))
        .otherwise(F.timestamp_seconds(F.lit(FAR_SECONDS)))
        .alias("ts"),
        (F.col("id") + 1).alias("v"),
    )


def _far_counts(stream):
    return stream.key_by("k").window(tm.TumblingEventTimeWindows.of(3_600_000))


@pytest.mark.spark
@pytest.mark.parametrize("mode", MODES)
def test_a_timestamp_after_9999_is_an_input_data_error_on_collect(spark, mode):
    stream = tm.from_dataframe(
        _far(spark.range(2)), "ts", order_by="v" if mode == "replay" else None
    )
    windowed = _far_counts(stream)
    # a function over the rows in BATCH; even a sum hands a replay Rows
    result = (
        windowed.sum("v")
        if mode == "replay"
        else windowed.process(CountPerKey(), "k string, n long")
    )
    with pytest.raises(tm.InputDataError, match=FAR_REFUSED), tm.raising_tidemark_errors():
        result.to_dataframe().collect()


@pytest.mark.spark
def test_a_timestamp_after_9999_fails_the_stream(spark, tmp_path):
    _far(spark.range(2)).coalesce(1).write.parquet(str(tmp_path / "in"))
    source = spark.readStream.schema("k string, ts timestamp, v long").parquet(str(tmp_path / "in"))
    result = _far_counts(tm.from_dataframe(source, "ts")).sum("v")
    query = result.write_outputs({"main": lambda df, b: df.collect()}, str(tmp_path / "cp"))
    try:
        with pytest.raises(tm.InputDataError, match=FAR_REFUSED):
            query.processAllAvailable()
    finally:
        query.stop()


def test_a_timestamp_column_beyond_datetime_names_the_column_and_value():
    import pyarrow as pa

    from tidemark.spark.protocol.column_values import arrow_column

    stamps = pa.array([0, FAR_SECONDS * 10**6], pa.timestamp("us", tz="UTC"))
    with pytest.raises(tm.InputDataError, match=FAR_REFUSED):
        arrow_column(pa.record_batch([stamps], names=["ts"]), "ts")
    early = pa.array([-62135596800 * 10**6 - 1], pa.timestamp("us"))
    with pytest.raises(tm.InputDataError, match=r"about the year 1\) in column 'ts'"):
        arrow_column(pa.record_batch([early], names=["ts"]), "ts")
