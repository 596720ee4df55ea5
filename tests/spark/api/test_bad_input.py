"""A user's easy mistakes when DEFINING a pipeline are refused, or warned about, before
anything runs: never a different number.

Each refusal names the parameter, states the rule and gives the received value; the
tables below pin the message of each case. Runtime mistakes (bad rows, failing user
functions) are in ``test_bad_input_runtime.py``.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import warnings

import pandas as pd
import pytest
from pyspark.sql import Row

import tidemark as tm
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import InputDataError, TidemarkWarning, WindowSpecError
from tidemark.spark.protocol.keys import function_key
from tidemark.spark.protocol.timestamps import ScaledTimestamp
from tidemark.time import LONG_MIN, from_datetime, to_datetime

MINUTE = tm.Duration.of_minutes(1)
TUMBLING = tm.TumblingEventTimeWindows.of(MINUTE)

SCHEMA = (
    "user string, page string, amount long, price double, cost decimal(10,2), flag boolean, "
    "day date, tags array<string>, attrs map<string,long>, payload binary, "
    "point struct<x:int,y:int>, at timestamp, ts long"
)
NUMERIC = re.escape("['amount', 'price', 'cost', 'ts']")


@pytest.fixture(scope="module")
def rows(spark):
    """A bounded DataFrame with a column of each kind (never evaluated by these tests)."""
    return spark.createDataFrame([], SCHEMA)


# ---------------------------------------------------------------- shorthand aggregations


@pytest.mark.parametrize(
    ("method", "field", "message"),
    [
        pytest.param(
            "sum",
            "page",
            rf"`field` of sum\(\) must be a numeric column; got 'page' of type string; "
            rf"numeric columns: {NUMERIC}",
            id="sum-string-would-concatenate",
        ),
        pytest.param(
            "sum",
            "flag",
            r"sum\(\) must be a numeric column; got 'flag' of type boolean",
            id="sum-boolean",
        ),
        pytest.param(
            "sum",
            "tags",
            r"sum\(\) must be a numeric column; got 'tags' of type array<string>",
            id="sum-array-would-concatenate",
        ),
        pytest.param(
            "sum",
            "day",
            r"sum\(\) must be a numeric column; got 'day' of type date",
            id="sum-date",
        ),
        pytest.param(
            "min",
            "attrs",
            r"`field` of min\(\) must be a column with an order \(numbers, strings, booleans, "
            r"dates, timestamps, intervals\); got 'attrs' of type map<string,bigint>",
            id="min-map",
        ),
        pytest.param(
            "max",
            "tags",
            r"max\(\) must be a column with an order .*got 'tags' of type array",
            id="max-array",
        ),
        pytest.param(
            "max",
            "point",
            r"max\(\) must be a column with an order .*'point' of type struct",
            id="max-struct",
        ),
        pytest.param(
            "min_by",
            "payload",
            r"min_by\(\) must be a column with an order .*'payload' of type binary",
            id="min_by-binary",
        ),
        pytest.param(
            "max_by",
            "attrs",
            r"max_by\(\) must be a column with an order .*'attrs' of type map",
            id="max_by-map",
        ),
    ],
)
def test_a_shorthand_refuses_a_column_of_the_wrong_type(rows, method, field, message):
    windowed = tm.from_dataframe(rows, timestamp="ts").key_by("user").window(TUMBLING)
    with pytest.raises(WindowSpecError, match=message):
        getattr(windowed, method)(field)


@pytest.mark.parametrize(
    ("key", "method", "field", "message"),
    [
        pytest.param(
            "user",
            "sum",
            "user",
            r"`field` of sum\(\) must not be a key column: the stream is keyed by \['user'\]; "
            r"got 'user'",
            id="sum-the-key-would-repeat-it",
        ),
        pytest.param(
            "amount",
            "sum",
            "amount",
            r"sum\(\) must not be a key column: the stream is keyed by \['amount'\]; got 'amount'",
            id="sum-a-numeric-key",
        ),
    ],
)
def test_a_shorthand_refuses_the_key_column(rows, key, method, field, message):
    windowed = tm.from_dataframe(rows, timestamp="ts").key_by(key).window(TUMBLING)
    with pytest.raises(WindowSpecError, match=message):
        getattr(windowed, method)(field)


@pytest.mark.parametrize("method", ["min", "max", "min_by", "max_by"])
def test_min_and_max_of_a_key_column_are_the_key_as_in_flink(rows, method):
    windowed = tm.from_dataframe(rows, timestamp="ts").key_by(["user", "amount"]).window(TUMBLING)
    assert getattr(windowed, method)("amount").schema == rows.schema


def test_a_shorthand_on_the_whole_stream_refuses_a_string_sum(rows):
    windowed = tm.from_dataframe(rows, timestamp="ts").window_all(TUMBLING)
    with pytest.raises(WindowSpecError, match=r"sum\(\) must be a numeric column; got 'page'"):
        windowed.sum("page")


@pytest.mark.parametrize(
    ("method", "field"),
    [("sum", "price"), ("sum", "cost"), ("min", "page"), ("max", "day"), ("max_by", "flag")],
)
def test_a_shorthand_keeps_accepting_what_flink_accepts(rows, method, field):
    windowed = tm.from_dataframe(rows, timestamp="ts").key_by("user").window(TUMBLING)
    assert getattr(windowed, method)(field).schema == rows.schema


# ---------------------------------------------------------------- from_dataframe arguments


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(
            pd.DataFrame({"ts": [1]}),
            r"`df` must be a pyspark\.sql\.DataFrame; got a pandas DataFrame "
            r"\(pandas\.core\.frame\.DataFrame\): convert it with spark\.createDataFrame\(pdf\)",
            id="pandas",
        ),
        pytest.param(
            [Row(ts=1)],
            r"`df` must be a pyspark\.sql\.DataFrame; got list: "
            r"make one with spark\.createDataFrame\(\.\.\.\)",
            id="list-of-rows",
        ),
        pytest.param(None, r"`df` must be a pyspark\.sql\.DataFrame; got NoneType", id="none"),
        pytest.param("events", r"`df` must be .*DataFrame; got str", id="a-table-name"),
    ],
)
def test_from_dataframe_refuses_what_is_not_a_spark_dataframe(spark, value, message):
    with pytest.raises(WindowSpecError, match=message):
        tm.from_dataframe(value, timestamp="ts", spark=spark)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"timestamp": 11},
            r"`timestamp` must be a column name \(str\) or None; got 11 \(int\)",
            id="timestamp-position",
        ),
        pytest.param(
            {"timestamp": "ts", "order_by": ["amount", 1]},
            r"`order_by` must be a column name or a non-empty list of them; got \['amount', 1\]",
            id="order_by-list-of-not-names",
        ),
        pytest.param(
            {"timestamp": "ts", "order_by": "amount", "processing_time": b"ts"},
            r"`processing_time` must be a column name \(str\) or None; got b'ts' \(bytes\)",
            id="processing_time-bytes",
        ),
        pytest.param(
            {"timestamp": "ts", "order_by": "amount", "watermark": 1.0},
            r"`watermark` must be a column name \(str\) or None; got 1\.0 \(float\)",
            id="watermark-float",
        ),
        pytest.param(
            {"timestamp": "ts", "timestamp_unit": "sec"},
            r"`timestamp_unit` must be one of 'ms', 's', 'us', 'ns'; got 'sec'",
            id="unit-sec",
        ),
        pytest.param(
            {"timestamp": "ts", "timestamp_unit": "MS"},
            r"`timestamp_unit` must be one of 'ms', 's', 'us', 'ns'; got 'MS'",
            id="unit-upper-case",
        ),
        pytest.param(
            {"timestamp": "ts", "timestamp_unit": 1000},
            r"`timestamp_unit` must be one of 'ms', 's', 'us', 'ns'; got 1000",
            id="unit-a-factor",
        ),
        pytest.param(
            {"timestamp": "at", "timestamp_unit": "s"},
            r"`timestamp_unit` applies to integral `timestamp` columns; column 'at' is of type "
            r"timestamp: omit timestamp_unit",
            id="unit-on-a-timestamp",
        ),
        pytest.param(
            {"timestamp_unit": "s"},
            r"`timestamp_unit` applies to integral `timestamp` columns; got no `timestamp`",
            id="unit-without-a-timestamp",
        ),
        pytest.param(
            {"timestamp": "ts", "timestamp_unit": "s", "order_by": "amount", "watermark": "ts"},
            r"`watermark` column 'ts' is read as long milliseconds; got timestamp_unit='s': "
            r"record the watermark in ms",
            id="recorded-watermarks-in-another-unit",
        ),
    ],
)
def test_from_dataframe_refuses_options_of_the_wrong_kind(rows, options, message):
    with pytest.raises(WindowSpecError, match=message):
        tm.from_dataframe(rows, **options)


# ---------------------------------------------------------------- merging windows need merge


class CountWithoutMerge(tm.AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator


SESSION_ASSIGNERS = [
    pytest.param(tm.EventTimeSessionWindows.with_gap(MINUTE), id="event-time-sessions"),
    pytest.param(tm.ProcessingTimeSessionWindows.with_gap(MINUTE), id="processing-time-sessions"),
    pytest.param(
        tm.DynamicEventTimeSessionWindows.with_dynamic_gap(lambda element: 1000),
        id="dynamic-sessions",
    ),
]
MERGE_NEEDED = (
    r"`aggregate_function` must implement merge\(\) with the merging assigner "
    r"(EventTime|ProcessingTime|DynamicEventTime)SessionWindows.*: sessions merge their "
    r"accumulators; got CountWithoutMerge"
)


@pytest.mark.parametrize("assigner", SESSION_ASSIGNERS)
def test_an_aggregate_without_merge_is_refused_on_sessions_in_every_mode(rows, assigner):
    windowed = tm.from_dataframe(rows, timestamp="ts").key_by("user").window(assigner)
    with pytest.raises(WindowSpecError, match=MERGE_NEEDED):
        windowed.aggregate(CountWithoutMerge(), output_schema="n long")


@pytest.mark.parametrize("assigner", SESSION_ASSIGNERS)
def test_the_engine_refuses_it_too(assigner):
    with pytest.raises(WindowSpecError, match=MERGE_NEEDED):
        OperatorSpec(assigner, window_logic(CountWithoutMerge()))


def test_an_aggregate_without_merge_still_serves_windows_that_never_merge(rows):
    windowed = tm.from_dataframe(rows, timestamp="ts").key_by("user").window(TUMBLING)
    assert windowed.aggregate(CountWithoutMerge(), output_schema="n long").schema is not None


# ---------------------------------------------------------------- key functions


@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        pytest.param(["a", 1], r"\['a', 1\] \(list\)", id="list"),
        pytest.param({"user": "a"}, r"\{'user': 'a'\} \(dict\)", id="dict"),
        pytest.param({"a"}, r"\{'a'\} \(set\)", id="set"),
    ],
)
def test_a_key_function_returning_an_unhashable_value_is_named(returned, shown):
    def user_and_page(row):
        return returned

    message = (
        rf"`key` function user_and_page must return a hashable key; got {shown}: "
        r"return a tuple instead"
    )
    with pytest.raises(InputDataError, match=message):
        function_key(user_and_page, Row(user="a"))


@pytest.mark.spark
def test_an_unhashable_key_fails_the_run_with_that_message(spark):
    df = spark.createDataFrame([("a", "x", 1)], "user string, page string, ts long")
    result = (
        tm.from_dataframe(df, timestamp="ts")
        .key_by(lambda row: [row.user, row.page])
        .window(TUMBLING)
        .sum("ts")
    )
    with pytest.raises(Exception, match=r"must return a hashable key; got \['a', 'x'\] \(list\)"):
        result.to_dataframe().collect()


# ---------------------------------------------------------------- times inside functions


def test_window_times_as_datetimes_are_utc_and_half_open():
    window = tm.TimeWindow(1_590_292_800_000, 1_590_292_860_000)
    utc = datetime.timezone.utc
    assert window.start_datetime() == datetime.datetime(2020, 5, 24, 4, 0, tzinfo=utc)
    assert window.end_datetime() == datetime.datetime(2020, 5, 24, 4, 1, tzinfo=utc)
    assert window.end_datetime() - window.start_datetime() == datetime.timedelta(minutes=1)


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(datetime.datetime(2020, 5, 24, 4, 0, 0, 1000), id="naive-is-utc"),
        pytest.param(
            datetime.datetime(
                2020, 5, 24, 6, 0, 0, 1000, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
            ),
            id="aware",
        ),
    ],
)
def test_an_elements_datetime_converts_to_the_engines_ms(moment):
    assert from_datetime(moment) == 1_590_292_800_001
    aware = moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)
    assert to_datetime(1_590_292_800_001) == aware


@pytest.mark.parametrize(
    ("function", "value", "message"),
    [
        pytest.param(
            from_datetime,
            1_590_292_800_001,
            r"`moment` must be a datetime\.datetime; got 1590292800001 \(int\): "
            r"it is already milliseconds",
            id="from_datetime-of-ms",
        ),
        pytest.param(
            to_datetime,
            datetime.datetime(2020, 5, 24),
            r"`timestamp_ms` must be int milliseconds since the epoch; got "
            r"datetime\.datetime\(2020, 5, 24, 0, 0\) \(datetime\): use from_datetime",
            id="to_datetime-of-a-datetime",
        ),
    ],
)
def test_the_time_helpers_refuse_the_other_kind(function, value, message):
    with pytest.raises(TypeError, match=message):
        function(value)


# ---------------------------------------------------------------- warnings


def _warnings_of(define):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        define()
    return [str(w.message) for w in caught if issubclass(w.category, TidemarkWarning)]


@pytest.fixture(scope="module")
def stream(spark, tmp_path_factory):
    """A streaming DataFrame (a file source: defining on it starts nothing)."""
    directory = tmp_path_factory.mktemp("stream")
    return spark.readStream.schema("user string, amount long, ts long").json(str(directory))


NO_STRATEGY = (
    r"no `watermark_strategy` given for a (stream|replay) with event-time windows: using "
    r"WatermarkStrategy\.for_monotonous_timestamps\(\); an element for a window that ends "
    r"at or before the largest timestamp seen is late: dropped unless allowed_lateness or "
    r"side_output_late_data keeps it; pass watermark_strategy=tm\.WatermarkStrategy\."
    r"for_bounded_out_of_orderness\(\.\.\.\) \(or for_monotonous_timestamps\(\) to keep this\)"
)


def test_a_stream_with_event_time_windows_and_no_strategy_is_warned_once(stream):
    def define():
        (
            tm.from_dataframe(stream, timestamp="ts")
            .key_by("user")
            .window(TUMBLING)
            .allowed_lateness(0)
            .sum("amount")
        )

    caught = _warnings_of(define)
    assert len(caught) == 1
    assert re.search(NO_STRATEGY.replace("(stream|replay)", "stream"), caught[0])


def test_a_replay_with_no_strategy_is_warned(rows):
    def define():
        tm.from_dataframe(rows, timestamp="ts", order_by="amount").key_by("user").window(TUMBLING)

    caught = _warnings_of(define)
    assert len(caught) == 1 and "for a replay with event-time windows" in caught[0]


@pytest.mark.parametrize(
    "define",
    [
        pytest.param(
            lambda s, b: (
                tm.from_dataframe(
                    s,
                    timestamp="ts",
                    watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
                )
                .key_by("user")
                .window(TUMBLING)
            ),
            id="stream-with-a-strategy",
        ),
        pytest.param(
            lambda s, b: (
                tm.from_dataframe(s, timestamp="ts")
                .key_by("user")
                .window(tm.TumblingProcessingTimeWindows.of(MINUTE))
            ),
            id="stream-processing-time",
        ),
        pytest.param(
            lambda s, b: tm.from_dataframe(s, timestamp="ts").key_by("user").count_window(3),
            id="stream-count-window",
        ),
        pytest.param(
            lambda s, b: (
                tm.from_dataframe(b, timestamp="ts", timestamp_unit="ms")
                .key_by("user")
                .window(TUMBLING)
            ),
            id="batch-drops-nothing",
        ),
        pytest.param(
            lambda s, b: (
                tm.from_dataframe(b, timestamp="ts", order_by="amount", watermark="ts")
                .key_by("user")
                .window(TUMBLING)
            ),
            id="replay-of-recorded-watermarks",
        ),
    ],
)
def test_no_warning_where_nothing_is_defaulted_or_dropped(stream, rows, define):
    assert _warnings_of(lambda: define(stream, rows)) == []


# ---------------------------------------------------------------- timestamp units

T_S = 1_600_000_020  # seconds since the epoch, on a minute boundary (2020-09-13 12:27 UTC)
SECONDS_ROWS = [("a", 1, T_S), ("a", 2, T_S + 30), ("a", 4, T_S + 90)]


@pytest.mark.parametrize(
    ("value", "unit"),
    [
        pytest.param(T_S, "s", id="seconds"),
        pytest.param(T_S * 1_000_000, "us", id="microseconds"),
        pytest.param(T_S * 1_000_000_000, "ns", id="nanoseconds"),
    ],
)
@pytest.mark.spark
def test_a_bounded_long_timestamp_in_another_unit_is_warned(spark, value, unit):
    df = spark.createDataFrame([("a", 1, value)], "user string, amount long, ts long")
    caught = _warnings_of(lambda: tm.from_dataframe(df, timestamp="ts"))
    assert len(caught) == 1
    assert f"`timestamp` column 'ts' holds {value}, which as milliseconds is " in caught[0]
    assert f'pass timestamp_unit="{unit}"' in caught[0]
    assert 'timestamp_unit="ms"' in caught[0]  # how to keep milliseconds and silence it


@pytest.mark.spark
def test_milliseconds_or_an_explicit_unit_are_not_warned(spark):
    ms = spark.createDataFrame([("a", 1, T_S * 1000)], "user string, amount long, ts long")
    s = spark.createDataFrame([("a", 1, T_S)], "user string, amount long, ts long")
    assert _warnings_of(lambda: tm.from_dataframe(ms, timestamp="ts")) == []
    assert _warnings_of(lambda: tm.from_dataframe(s, timestamp="ts", timestamp_unit="ms")) == []


@pytest.mark.spark
@pytest.mark.parametrize(
    "values",
    [
        pytest.param([tm.LONG_MAX, tm.LONG_MAX - 1750], id="flinks-end-of-time-sentinels"),
        pytest.param([T_S * 1000, T_S], id="mixed-units-say-nothing-sure"),
        pytest.param([5, 60_000], id="small-test-timestamps"),
    ],
)
def test_values_of_no_one_other_unit_are_not_warned(spark, values):
    df = spark.createDataFrame([(v,) for v in values], "ts long")
    assert _warnings_of(lambda: tm.from_dataframe(df, timestamp="ts")) == []


def _minute_sums(stream):
    return stream.key_by("user").window(TUMBLING).sum("amount")


@pytest.mark.spark
@pytest.mark.parametrize("replay", [False, True], ids=["batch", "replay"])
def test_epoch_seconds_make_minute_windows_in_bounded_modes(spark, replay):
    df = spark.createDataFrame(SECONDS_ROWS, "user string, amount long, ts long")
    order = {"order_by": "amount"} if replay else {}
    stream = tm.from_dataframe(
        df,
        timestamp="ts",
        timestamp_unit="s",
        watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        **order,
    )
    result = _minute_sums(stream).to_dataframe()
    assert sorted((r.amount, r.ts) for r in result.collect()) == [(3, T_S), (4, T_S + 90)]


@pytest.mark.parametrize(
    ("unit", "scale"), [("s", 0.001), ("us", 1000), ("ns", 1_000_000)], ids=["s", "us", "ns"]
)
def test_every_unit_is_read_as_milliseconds_floored(unit, scale):
    read = ScaledTimestamp("ts", unit)
    last_of_the_ms = int(T_S * 1000 * scale + max(scale, 1) - 1)
    assert read(Row(ts=last_of_the_ms), LONG_MIN) == T_S * 1000
    assert read(Row(ts=-1), LONG_MIN) == (-1000 if unit == "s" else -1)


def test_a_null_timestamp_in_another_unit_is_named():
    with pytest.raises(InputDataError, match=r"null timestamp in column 'ts'; example row: Row"):
        ScaledTimestamp("ts", "s")(Row(ts=None, user="a"), LONG_MIN)


@pytest.mark.spark
def test_epoch_seconds_make_minute_windows_on_a_stream(spark, tmp_path):
    directory = tmp_path / "in"
    directory.mkdir()
    end_of_input_s = 253_402_300_800  # the end-of-input marker in seconds, rounded up
    batches = [SECONDS_ROWS[:2], SECONDS_ROWS[2:], [("_end", 0, end_of_input_s)]]
    for n, batch in enumerate(batches):
        path = directory / f"batch-{n:03d}.json"
        path.write_text(
            "".join(json.dumps(dict(zip(("user", "amount", "ts"), r))) + "\n" for r in batch)
        )
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime
    source = (
        spark.readStream.schema("user string, amount long, ts long")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps()
    stream = tm.from_dataframe(
        source, timestamp="ts", timestamp_unit="s", watermark_strategy=strategy
    )
    collected = []
    query = _minute_sums(stream).write_outputs(
        {"main": lambda df, batch_id: collected.extend((r.amount, r.ts) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    assert sorted(collected) == [(3, T_S), (4, T_S + 90)]
