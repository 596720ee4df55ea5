"""Time at the edges of what a pipeline can mean: each is the right result or a clear
refusal, the same in every mode (issue 28).

- processing-time windows (or a processing-time trigger) on a replay without
  ``processing_time=``: the replay's clock would never move; refused at definition;
- a timestamp assigner returning epoch seconds: warned from a sample of its values, as
  a long column in seconds is; one returning no long: an error naming it and the row;
- a recorded watermark column that is a timestamp: read as the event-time column is.
"""

from __future__ import annotations

import datetime
import json
import warnings

import pytest

import tidemark as tm

pytestmark = pytest.mark.spark

SECOND = tm.Duration.of_seconds(1)
MINUTE = tm.Duration.of_minutes(1)
REPLAY_CLOCK = (
    r"on processing time, but this replay \(`order_by`\) has no `processing_time` column to "
    r"drive it, so its clock would never move and no such window would fire: pass "
    r"from_dataframe\(\.\.\., processing_time=<the arrival-time column>\) \(long ms or a "
    r"timestamp\), or drop `order_by` to run in BATCH, where processing time is the wall clock"
)


def _clicks(spark):
    rows = [(0, "a", 1, 1_000), (1, "a", 2, 2_000)]
    return spark.createDataFrame(rows, "o long, k string, v long, ts long")


# ---------------------------------------------------------------- a replay's clock


@pytest.mark.parametrize(
    "assigner",
    [
        tm.TumblingProcessingTimeWindows.of(SECOND),
        tm.SlidingProcessingTimeWindows.of(MINUTE, SECOND),
        tm.ProcessingTimeSessionWindows.with_gap(SECOND),
    ],
    ids=["tumbling", "sliding", "sessions"],
)
def test_processing_time_windows_on_a_replay_need_its_arrival_times(spark, assigner):
    stream = tm.from_dataframe(_clicks(spark), "ts", order_by="o").key_by("k")
    with pytest.raises(tm.WindowSpecError, match=f"^the windows of .* are {REPLAY_CLOCK}$"):
        stream.window(assigner)


def test_a_processing_time_trigger_on_a_replay_needs_its_arrival_times(spark):
    windowed = (
        tm.from_dataframe(
            _clicks(spark),
            "ts",
            order_by="o",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(MINUTE))
    )
    with pytest.raises(tm.WindowSpecError, match=f"^the trigger .* is {REPLAY_CLOCK}$"):
        windowed.trigger(tm.ContinuousProcessingTimeTrigger.of(SECOND))


def test_the_ways_out_run_processing_time_windows(spark):
    """With arrival times the replay's clock moves (a's window closes at the arrival at
    5 s; as in Flink, b's, still open at the last arrival, never fires); in BATCH
    processing time is the wall clock and every window fires at the end."""
    rows = [(0, "a", 1, 1_000), (1, "a", 2, 1_500), (2, "b", 4, 5_000)]
    df = spark.createDataFrame(rows, "o long, k string, v long, pt long")
    replay = tm.from_dataframe(df, order_by="o", processing_time="pt")
    batch = tm.from_dataframe(df)
    for stream, want in ((replay, [("a", 3)]), (batch, [("a", 3), ("b", 4)])):
        windows = stream.key_by("k").window(tm.TumblingProcessingTimeWindows.of(SECOND))
        result = windows.sum("v")
        assert sorted((r.k, r.v) for r in result.to_dataframe().collect()) == want
        assert result.num_late_records_dropped() == 0


# ---------------------------------------------------------------- assigners' units


def _seconds(spark):
    rows = [("a", 1, 1_700_000_000 + i) for i in range(200)]
    return spark.createDataFrame(rows, "k string, v long, t long")


def seconds_of_row(row, record_timestamp):
    return row.t


def datetime_of_row(row, record_timestamp):
    return row.when


SECONDS_WARNING = (
    r"^the WatermarkStrategy's timestamp assigner <function seconds_of_row at .*> returned "
    r"1700000007, which as milliseconds is 1970-01-20 16:13:20 UTC: it looks like seconds "
    r"since the epoch; return milliseconds from it \(e\.g\. row\.ts \* 1000\)$"
)


@pytest.mark.parametrize("order_by", [None, "t"], ids=["batch", "replay"])
def test_an_assigner_returning_seconds_warns_like_a_column_in_seconds(spark, order_by):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        seconds_of_row
    )
    with pytest.warns(tm.TidemarkWarning, match=SECONDS_WARNING):
        stream = tm.from_dataframe(_seconds(spark), watermark_strategy=strategy, order_by=order_by)
    # as the warning says: 200 events in 200 s fall into one 1-minute window in 1970
    windows = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(MINUTE)).sum("v")
    assert [r.v for r in windows.to_dataframe().collect()] == [200]


def test_an_assigner_returning_milliseconds_does_not_warn(spark):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda row, ts: row.t * 1000
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", tm.TidemarkWarning)
        stream = tm.from_dataframe(_seconds(spark), watermark_strategy=strategy)
    windows = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(MINUTE)).sum("v")
    assert sum(r.v for r in windows.to_dataframe().collect()) == 200


def _stamped(spark):
    when = datetime.datetime(2024, 1, 1, 0, 30)
    return spark.createDataFrame([("a", 1, when)], "k string, v long, when timestamp")


NOT_A_LONG = (
    r"^timestamp assigner <function datetime_of_row at .*> must return int milliseconds since "
    r"the epoch \(a long\); got datetime\.datetime\(2024, 1, 1, 0, 30\) \(datetime\) for row "
    r"Row\(k='a', v=1, when=datetime\.datetime\(2024, 1, 1, 0, 30\)\): convert it with "
    r"tidemark\.time\.from_datetime"
)


def test_an_assigner_returning_a_datetime_is_a_user_function_error(spark):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        datetime_of_row
    )
    stream = tm.from_dataframe(_stamped(spark), watermark_strategy=strategy)
    result = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(MINUTE)).sum("v")
    with pytest.raises(tm.UserFunctionError, match=NOT_A_LONG), tm.raising_tidemark_errors():
        result.to_dataframe().collect()


def test_a_streaming_assigner_returning_a_datetime_fails_its_query_so(spark, tmp_path):
    source_dir = tmp_path / "in"
    source_dir.mkdir()
    row = {"k": "a", "v": 1, "when": "2024-01-01T00:30:00Z"}
    (source_dir / "batch-0.json").write_text(json.dumps(row) + "\n")
    source = spark.readStream.schema("k string, v long, when timestamp").json(str(source_dir))
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        datetime_of_row
    )
    stream = tm.from_dataframe(source, watermark_strategy=strategy)
    result = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(MINUTE)).sum("v")
    query = result.write_outputs({"main": lambda df, b: df.collect()}, str(tmp_path / "cp"))
    try:
        with pytest.raises(tm.UserFunctionError, match=NOT_A_LONG):
            query.processAllAvailable()
    finally:
        query.stop()


# ---------------------------------------------------------------- recorded watermarks


def test_a_recorded_watermark_column_of_timestamps_is_read_as_event_time_is(spark):
    """A timestamp column of recorded watermarks is its instants in ms (a cast to long
    would give seconds, and every element would look late)."""
    utc = datetime.timezone.utc
    at = [datetime.datetime(2024, 1, 1, 0, 0, s, tzinfo=utc) for s in (0, 5, 20)]
    rows = [(0, "a", 1, at[0], at[0]), (1, "a", 2, at[1], at[0]), (2, "a", 4, at[2], at[1])]
    df = spark.createDataFrame(rows, "o long, k string, v long, ts timestamp, wm timestamp")
    stream = tm.from_dataframe(df, "ts", order_by="o", watermark="wm")
    result = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(10 * SECOND.millis)).sum("v")
    assert sorted(r.v for r in result.to_dataframe().collect()) == [3, 4]
    assert result.num_late_records_dropped() == 0


def test_a_recorded_watermark_column_of_another_type_is_refused(spark):
    df = spark.createDataFrame([(0, "a", 1, 1.5)], "o long, k string, ts long, wm double")
    with pytest.raises(tm.WindowSpecError, match=r"^`watermark` column 'wm' must be long"):
        tm.from_dataframe(df, "ts", order_by="o", watermark="wm")


# ---------------------------------------------------------------- the timestamp range

LONG_MIN, LONG_MAX = tm.LONG_MIN, tm.LONG_MAX
OUT_OF_RANGE = r"^timestamp {ts}ms is outside what .* can window, which is \[{low}, {high}\] ms: "


def _harness(assigner, **kwargs):
    from tidemark.testing import WindowOperatorHarness

    return WindowOperatorHarness(assigner, lambda a, b: a + b, **kwargs)


RANGES = [
    # assigner, its lowest and highest timestamp: 2**63 = 153722867280912 * 60000 + 55808,
    # so the first minute after Long.MIN_VALUE starts 55808 ms into the long range
    (tm.TumblingEventTimeWindows.of(60_000), LONG_MIN + 55_808, LONG_MAX - 55_808),
    (tm.TumblingEventTimeWindows.of(60_000, 5_000), LONG_MIN + 808, LONG_MAX - 50_808),
    (tm.SlidingEventTimeWindows.of(60_000, 7_000), LONG_MIN + 55_808, LONG_MAX - 58_808),
    (tm.SlidingEventTimeWindows.of(60_000, 7_000, -3_000), LONG_MIN + 59_808, LONG_MAX - 54_808),
    (tm.EventTimeSessionWindows.with_gap(1_000), LONG_MIN, LONG_MAX - 1_000),
    (tm.GlobalWindows.create(), LONG_MIN, LONG_MAX),
]


@pytest.mark.parametrize("assigner, low, high", RANGES, ids=lambda v: repr(v)[:40])
def test_each_assigner_states_the_timestamps_its_windows_hold(assigner, low, high):
    assert assigner.timestamp_range() == (low, high)
    for ts in (low, high):  # accepted, with windows inside the long range
        for window in assigner.assign_windows(None, ts, None):
            assert LONG_MIN <= getattr(window, "start", 0) and getattr(window, "end", 0) <= LONG_MAX
    if high < LONG_MAX:  # one more, and a window would end past Long.MAX_VALUE
        assert max(w.end for w in assigner.assign_windows(None, high + 1, None)) > LONG_MAX
    if low > LONG_MIN:
        assert min(w.start for w in assigner.assign_windows(None, low - 1, None)) < LONG_MIN


@pytest.mark.parametrize("assigner, low, high", RANGES[:5], ids=lambda v: repr(v)[:40])
def test_the_engine_refuses_an_element_beyond_the_range_and_windows_the_edges(assigner, low, high):
    for beyond in (low - 1, high + 1):
        if LONG_MIN <= beyond <= LONG_MAX:
            pattern = OUT_OF_RANGE.format(ts=beyond, low=low, high=high)
            with pytest.raises(tm.InputDataError, match=pattern):
                _harness(assigner).process_element(1, beyond)
    h = _harness(assigner, allowed_lateness=LONG_MAX)  # cleanup saturates at Long.MAX_VALUE
    h.process_element(1, low)
    h.process_element(2, high)
    h.process_watermark(LONG_MAX)
    assert sum(value for value, _ in h.output()) >= 3 and h.num_late_records_dropped == 0
    assert all(LONG_MIN <= ts < LONG_MAX for _, ts in h.output())


def test_a_dynamic_gap_past_the_range_is_refused_with_its_element():
    """The gap is the element's, so the assigner refuses it when asked (and, as any
    assigner error, it reaches the caller as the assigner's)."""
    from tidemark.testing import WindowOperatorHarness

    sessions = tm.EventTimeSessionWindows.with_dynamic_gap(lambda value: value)
    for fast_paths in (True, False):
        h = WindowOperatorHarness(sessions, lambda a, b: a + b, fast_paths=fast_paths)
        with pytest.raises(tm.UserFunctionError) as info:
            h.process_element(1_000, LONG_MAX - 807)
        cause = info.value.__cause__
        assert type(cause) is tm.InputDataError
        assert str(cause).startswith("timestamp 9223372036854775000ms is outside what ")
        assert "example row: 1000." in str(cause)


class Count(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, len(list(elements)))


@pytest.mark.parametrize(
    "order_by, finish",
    [
        pytest.param(None, lambda w: w.sum("v"), id="batch-sql"),
        pytest.param(None, lambda w: w.process(Count(), "k string, v long"), id="batch-engine"),
        pytest.param("o", lambda w: w.sum("v"), id="replay"),
    ],
)
def test_an_element_whose_window_overflows_is_refused_in_every_bounded_mode(
    spark, order_by, finish
):
    """The issue's case: ``2**63 - 1000`` in 1-minute windows; it was counted nowhere."""
    rows = [(0, "a", 1, LONG_MAX - 807), (1, "a", 2, 1_000)]
    df = spark.createDataFrame(rows, "o long, k string, v long, ts long")
    stream = tm.from_dataframe(df, "ts", timestamp_unit="ms", order_by=order_by)
    windows = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(MINUTE))
    pattern = OUT_OF_RANGE.format(
        ts=LONG_MAX - 807, low=LONG_MIN + 55_808, high=LONG_MAX - 55_808
    ) + (r"its windows would end after Long\.MAX_VALUE \(9223372036854775807\); example row: ")
    with pytest.raises(tm.InputDataError, match=pattern), tm.raising_tidemark_errors():
        finish(windows).to_dataframe().collect()


def test_a_stream_refuses_an_element_its_windows_cannot_hold(spark, tmp_path):
    """A session gap so long that an element of the year 8307 would end its window past
    Long.MAX_VALUE: the query fails with the element (streaming reads timestamps up to
    the year 9999; later ones end its input)."""
    gap = LONG_MAX - 10**14
    source_dir = tmp_path / "in"
    source_dir.mkdir()
    rows = [{"k": "a", "v": 1, "ts": 1_000}, {"k": "a", "v": 2, "ts": 2 * 10**14}]
    (source_dir / "batch-0.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    source = spark.readStream.schema("k string, v long, ts long").json(str(source_dir))
    stream = tm.from_dataframe(
        source, "ts", watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps()
    )
    result = stream.key_by("k").window(tm.EventTimeSessionWindows.with_gap(gap)).sum("v")
    query = result.write_outputs({"main": lambda df, b: df.collect()}, str(tmp_path / "cp"))
    pattern = OUT_OF_RANGE.format(ts=2 * 10**14, low=LONG_MIN, high=10**14)
    try:
        with pytest.raises(tm.InputDataError, match=pattern):
            query.processAllAvailable()
    finally:
        query.stop()


def none_of_row(row, record_timestamp):
    return None


def test_an_assigner_returning_none_is_a_user_function_error(spark):
    """Flink's assigner returns a long; None is no timestamp (BATCH's SQL fast path, the
    engine path and a replay say so alike)."""
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(none_of_row)
    for order_by in (None, "v"):
        stream = tm.from_dataframe(_stamped(spark), watermark_strategy=strategy, order_by=order_by)
        windows = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(MINUTE))
        for result in (windows.sum("v"), windows.process(Count(), "k string, v long")):
            with pytest.raises(tm.UserFunctionError, match=r"\); got None \(NoneType\) for row"):
                with tm.raising_tidemark_errors():
                    result.to_dataframe().collect()


def test_a_timestamp_column_and_an_assigner_are_refused_together(spark):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        seconds_of_row
    )
    with pytest.raises(tm.WindowSpecError, match=r"^event time must come one way: `timestamp`"):
        tm.from_dataframe(_seconds(spark), "t", watermark_strategy=strategy)
