"""Event time and timestamp values do not depend on the session's time zone.

A Spark session takes the JVM's zone unless told otherwise (most laptops and many
clusters run so), and Spark's casts and PySpark's pandas conversions go through it. The
rule (``docs/concepts/time.md``): a zoned timestamp is its instant; a TimestampNTZ value,
a date and a zone-less string are UTC wall clocks (as Spark's own ``window()`` aligns an
NTZ column); a string with a zone is that instant. Here under several session zones,
New York's with both daylight-saving changes inside the data, in every mode.

Timeline of the data (UTC wall clock, 1-hour windows; New York springs forward at
02:00 on 2024-03-10, so 02:30 is no New York time at all)::

    01:00        02:00               03:00        04:00
      | a1@01:30  | a2@02:30 a4@02:45 | a8@03:10   |
      [   sum 1   )[      sum 6       )[  sum 8    )
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import tidemark as tm
from tidemark.spark.protocol.timestamps import timestamp_ms
from tidemark.time import from_datetime

pytestmark = pytest.mark.spark

UTC = datetime.timezone.utc
HOUR = tm.Duration.of_hours(1)
MARCH_10 = 1710028800000  # 2024-03-10 00:00 UTC
ZONES = ["UTC", "Asia/Kolkata", "America/New_York", "Australia/Lord_Howe"]


@contextlib.contextmanager
def session_zone(spark, zone):
    """Run with ``spark.sql.session.timeZone`` set to ``zone``."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


# ---------------------------------------------------------------- the rule, per type

RULE = [
    # (SQL of a value, its event time in ms)
    ("timestamp_ntz'2024-01-01 00:30:00'", 1704069000000),
    ("timestamp_ntz'2024-03-10 02:30:00'", MARCH_10 + 9_000_000),  # in New York's gap
    ("timestamp_ntz'2024-11-03 01:30:00'", 1730597400000),  # New York repeats this hour
    ("timestamp_ntz'1969-12-31 23:59:59.9995'", -1),  # floored, as unix_millis floors
    ("timestamp_ntz'0001-01-01 00:00:00'", -62135596800000),
    ("timestamp'2024-11-03 01:30:00-04:00'", 1730611800000),
    ("timestamp'2024-11-03 01:30:00-05:00'", 1730615400000),
    ("date'2024-01-01'", 1704067200000),
    ("date'1969-12-31'", -86400000),
    ("'2024-01-01 00:30:00'", 1704069000000),
    ("'2024-01-01T00:30:00.123'", 1704069000123),
    ("'2024-01-01 00:30'", 1704069000000),
    ("'2024-01-01'", 1704067200000),
    ("' 2024-01-01 00:30:00 '", 1704069000000),
    ("'2024-03-10 02:30:00'", MARCH_10 + 9_000_000),
    ("'2024-01-01T00:30:00Z'", 1704069000000),
    ("'2024-01-01 00:30:00+01:00'", 1704065400000),
    ("'2024-01-01 00:30:00 Europe/Paris'", 1704065400000),
    ("'2024-01-01T00:30:00.5-05:00'", 1704087000500),
    ("'2024-01-01 00:30:00 +05:30'", 1704049200000),
    ("'00:30:00'", None),  # a time without a date: Spark would take today's
    ("'2024-01-01T'", None),
    ("'yesterday'", None),
]


@pytest.mark.parametrize("zone", ZONES)
def test_each_type_is_one_instant_in_every_session_zone(spark, zone):
    with session_zone(spark, zone):
        for sql, expected in RULE:
            df = spark.sql(f"SELECT {sql} AS t")
            got = df.select(timestamp_ms(df.schema, "t")).first()[0]
            assert got == expected, f"{sql} in {zone}"


# ---------------------------------------------------------------- every mode

# (arrival, key, value, event time as a UTC wall clock, an instant New York shows twice)
ROWS = [
    (0, "a", 1, "2024-03-10 01:30:00", "2024-11-03 05:30:00"),
    (1, "a", 2, "2024-03-10 02:30:00", "2024-11-03 06:30:00"),
    (2, "a", 4, "2024-03-10 02:45:00", "2024-11-03 05:30:00"),
    (3, "a", 8, "2024-03-10 03:10:00", "2024-11-03 06:30:00"),
]
END = "9999-12-31 23:59:59.999"  # the end-of-input marker of a stream
FALL = [1730611800000, 1730615400000]  # the two instants in New York's repeated hour
EXPECTED = [
    ("a", MARCH_10 + 3_600_000, 1, [FALL[0]]),
    ("a", MARCH_10 + 7_200_000, 6, FALL),
    ("a", MARCH_10 + 10_800_000, 8, [FALL[1]]),
]

# How each kind of event-time column writes the wall clocks above.
COLUMNS = {
    "ntz": "CAST(t AS TIMESTAMP_NTZ)",
    "zoned": "to_timestamp(t || 'Z')",
    "string": "CASE WHEN o % 2 = 0 THEN t ELSE replace(t, ' ', 'T') || '+00:00' END",
}


class Instants(tm.ProcessWindowFunction):
    """``(key, window start, sum of v, the instants of the rows' zoned column)``."""

    def process(self, key, context, elements):
        rows = list(elements)
        instants = sorted(from_datetime(r.at) for r in rows)
        yield (key, context.window().start, sum(r.v for r in rows), instants)


OUTPUT = "k string, start long, v long, at array<long>"


def _frame(spark, kind, rows):
    df = spark.createDataFrame(rows, "o long, k string, v long, t string, at string")
    return df.select(
        "o",
        "k",
        "v",
        F.expr(COLUMNS[kind]).alias("t"),
        F.to_timestamp(F.concat("at", F.lit("Z"))).alias("at"),
    )


def _pipeline(stream):
    return (
        stream.key_by("k").window(tm.TumblingEventTimeWindows.of(HOUR)).process(Instants(), OUTPUT)
    )


def _run(spark, mode, kind, tmp_path, pipeline=None):
    """The results of ``pipeline`` (default: hourly :class:`Instants`) on the rows in
    ``mode``, the event time written as ``kind``."""
    pipeline = pipeline or _pipeline
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(HOUR)
    df = _frame(spark, kind, ROWS)
    if mode != "streaming":
        order = {"order_by": "o"} if mode == "replay" else {}
        stream = tm.from_dataframe(df, "t", watermark_strategy=strategy, **order)
        return [tuple(r) for r in pipeline(stream).to_dataframe().collect()]
    df.coalesce(1).write.parquet(str(tmp_path / "in" / "0"))  # one micro-batch
    _frame(spark, kind, [(9, "_end", 0, END, "2024-01-01 00:00:00")]).write.parquet(
        str(tmp_path / "in" / "1")
    )
    source = spark.readStream.schema(df.schema).option("maxFilesPerTrigger", 1)
    stream = tm.from_dataframe(
        source.parquet(str(tmp_path / "in" / "*")), "t", watermark_strategy=strategy
    )
    out = str(tmp_path / "out")
    query = pipeline(stream).write_outputs(
        {"main": lambda d, b: d.write.mode("append").parquet(out)},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    return [tuple(r) for r in spark.read.parquet(out).collect()]


@pytest.mark.parametrize("mode", ["batch", "replay", "streaming"])
@pytest.mark.parametrize("kind", ["ntz", "zoned", "string"])
def test_every_mode_gives_the_same_windows_and_instants_in_new_york(spark, tmp_path, mode, kind):
    with session_zone(spark, "America/New_York"):
        got = _run(spark, mode, kind, tmp_path)
    assert sorted((k, s, v, list(at)) for k, s, v, at in got) == EXPECTED


@pytest.mark.parametrize("mode", ["batch", "replay", "streaming"])
def test_ntz_windows_follow_the_wall_clock_in_kolkata(spark, tmp_path, mode):
    with session_zone(spark, "Asia/Kolkata"):
        got = _run(spark, mode, "ntz", tmp_path)
    assert sorted((k, s, v, list(at)) for k, s, v, at in got) == EXPECTED


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "America/New_York"])
def test_the_sql_fast_path_windows_ntz_as_spark_does(spark, zone):
    """BATCH's shorthand on tumbling windows runs as Spark's own aggregation: the
    windows of the issue's example, as Spark's ``window()`` gives them."""
    df = spark.sql(
        "SELECT 'a' k, 1L v, timestamp_ntz'2024-01-01 00:30:00' t "
        "UNION ALL SELECT 'a', 2L, timestamp_ntz'2024-01-01 01:00:00'"
    )
    with session_zone(spark, zone):
        stream = tm.from_dataframe(df, "t").key_by("k")
        summed = stream.window(tm.TumblingEventTimeWindows.of(HOUR)).sum("v")
        got = sorted(r.v for r in summed.to_dataframe().collect())
        spark_windows = sorted(
            r.v for r in df.groupBy(F.window("t", "1 hour")).agg(F.sum("v").alias("v")).collect()
        )
    assert got == spark_windows == [1, 2]


@pytest.mark.slow
def test_a_users_session_on_a_machine_outside_utc(tmp_path):
    """``TZ`` for the driver, the JVM (so the session's zone, from ``getOrCreate()``) and
    the Python workers (tests/support/tz_check.py, in a process of its own)."""
    script = Path(__file__).parents[2] / "support/tz_check.py"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "TZ": "America/New_York"}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("TZ-RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    assert json.loads(lines[-1].removeprefix("TZ-RESULT ")) == []


class LatestAt(tm.ProcessWindowFunction):
    """``(key, sum of v, the latest of the rows' zoned column)``: a timestamp result."""

    def process(self, key, context, elements):
        rows = list(elements)
        yield (key, sum(r.v for r in rows), max(r.at for r in rows))


def _chain(stream):
    hourly = (
        stream.key_by("k")
        .window(tm.TumblingEventTimeWindows.of(HOUR))
        .process(LatestAt(), "k string, v long, at timestamp")
    )
    return (
        hourly.key_by("k")
        .window(tm.TumblingEventTimeWindows.of(3 * HOUR.millis))
        .process(Instants(), OUTPUT)
    )


def test_a_chain_hands_a_timestamp_result_on_as_its_instant(spark, tmp_path):
    """A window's timestamp result column reaches the next window of a streaming chain
    as the instant it is, as in BATCH (PySpark's pandas would make it New York's)."""
    with session_zone(spark, "America/New_York"):
        want = sorted(_run(spark, "batch", "zoned", tmp_path, _chain))
        got = sorted(_run(spark, "streaming", "zoned", tmp_path, _chain))
    assert [(k, s, v, list(at)) for k, s, v, at in want] == [
        ("a", MARCH_10, 7, FALL),
        ("a", MARCH_10 + 10_800_000, 8, [FALL[1]]),
    ]
    assert got == want


@pytest.mark.parametrize("zone", ["America/New_York", "Australia/Lord_Howe"])
def test_the_watermark_figure_is_the_utc_wall_clock_in_any_session_zone(spark, zone):
    """tidemark's ``watermark`` figure (docs/watching.md) across daylight-saving changes:
    New York's gap at 02:30 UTC-wall-clock and both instants of its repeated hour."""
    from tidemark.spark.protocol.figures import _iso_utc

    values = [MARCH_10 + 9_000_000, *FALL, -1, 253402300799999, 2**62]
    df = spark.createDataFrame([(v,) for v in values], "ms long")
    with session_zone(spark, zone):
        got = [r[0] for r in df.selectExpr(_iso_utc("ms")).collect()]
    assert got == [
        "2024-03-10T02:30:00.000Z",
        "2024-11-03T05:30:00.000Z",
        "2024-11-03T06:30:00.000Z",
        "1969-12-31T23:59:59.999Z",
        "9999-12-31T23:59:59.999Z",
        "9999-12-31T23:59:59.999Z",  # the end of input and beyond
    ]
