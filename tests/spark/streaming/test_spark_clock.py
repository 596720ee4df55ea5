"""What Spark shows is true: a query's watermark on Spark's own clock (issue 28).

A query runs Spark's event-time clock as the engine's unless told to shift it, so that
``lastProgress["eventTime"]["watermark"]`` and Spark's UI show the real watermark. An
element that would make a watermark at or before the epoch before the query has one is
refused, naming ``shift_spark_clock=True``, which runs Spark's clock 2**50 ms ahead (as
every query did before). The clock is chosen when a query first starts and kept with its
checkpoint: a checkpoint written before it was recorded keeps the shifted clock.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

import tidemark as tm
from tidemark.spark.streaming.driver.checkpoint import CLOCK_FILE
from tidemark.spark.streaming.worker.clock import (
    SPARK_OFFSET_MS,
    check_timestamp,
    earliest_timestamp,
    engine_watermark,
    spark_event_timer,
)

JAN_2024 = 1_704_067_200_000  # 2024-01-01T00:00:00Z
MINUTE = tm.Duration.of_minutes(1)
FIVE_SECONDS = tm.Duration.of_seconds(5)
SHIFT_HINT = r"from_dataframe\(\.\.\., shift_spark_clock=True\)"


# ---------------------------------------------------------------- the mapping


def test_unshifted_spark_watermarks_and_timers_are_the_engines():
    assert engine_watermark(0, offset_ms=0) == tm.LONG_MIN  # Spark's "none yet"
    assert engine_watermark(JAN_2024, offset_ms=0) == JAN_2024
    assert spark_event_timer(JAN_2024 + 59_999, JAN_2024, offset_ms=0) == JAN_2024 + 59_999


def test_a_watermark_of_the_other_clock_is_refused():
    """A checkpoint of one clock restarted on the other (a streaming DataFrame written by
    the user's own writeStream, without tidemark's record) fails, not 35,700 years off."""
    with pytest.raises(tm.WindowSpecError, match="ran Spark's event-time clock 2..50 ms ahead"):
        engine_watermark(SPARK_OFFSET_MS + JAN_2024, offset_ms=0)
    with pytest.raises(tm.WindowSpecError, match="ran an unshifted one"):
        engine_watermark(JAN_2024, offset_ms=SPARK_OFFSET_MS)


@pytest.mark.parametrize(
    "offset, bound, spark_watermark, earliest",
    [
        (SPARK_OFFSET_MS, 5_000, 0, -(2**49)),  # shifted: from about 15,800 BC on
        (0, 5_000, 0, 5_002),  # unshifted, no watermark yet: its watermark would be <= 0
        (0, 5_000, 1, tm.LONG_MIN),  # unshifted, with one: lateness is the engine's
        (0, None, 0, tm.LONG_MIN),  # no event time
    ],
)
def test_the_earliest_timestamp_a_query_carries(offset, bound, spark_watermark, earliest):
    assert earliest_timestamp(offset, bound, spark_watermark) == earliest


def test_an_element_before_the_first_watermark_names_the_way_out():
    with pytest.raises(tm.InputDataError) as info:
        check_timestamp(5_001, "a", True, earliest_ms=5_002)
    assert str(info.value).startswith(
        "timestamp=5001ms of key 'a' arrived before the query had a watermark, and the "
        "watermark it makes, 5001 - 5000 - 1 = 0ms (out-of-orderness 5000ms), is at or "
        "before the epoch: Spark's watermark starts at 0 and cannot carry it on an "
        "unshifted clock. To run such data, start the query on a new checkpoint with "
        "from_dataframe(..., shift_spark_clock=True)"
    )


# ---------------------------------------------------------------- queries


def _write(directory, batches):
    directory.mkdir(parents=True, exist_ok=True)
    for n, rows in enumerate(batches):
        path = directory / f"{n:03d}.json"
        path.write_text("\n".join(json.dumps({"k": k, "v": v, "ts": ts}) for k, v, ts in rows))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def _start(spark, root, shift=None, sink=None):
    source = spark.readStream.schema("k string, v long, ts long").option("maxFilesPerTrigger", 1)
    stream = tm.from_dataframe(
        source.json(str(root / "in")),
        "ts",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(FIVE_SECONDS),
        shift_spark_clock=shift,
    )
    result = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(MINUTE)).sum("v")
    out = str(root / "out")
    return result.write_outputs(
        {"main": sink or (lambda df, b: df.write.mode("append").json(out))},
        checkpoint=str(root / "checkpoint"),
        trigger={"availableNow": True},
    )


def _clock(root):
    return int((root / "checkpoint" / CLOCK_FILE / "part-00000.txt").read_text())


def test_spark_progress_shows_the_real_watermark_and_event_times(spark, tmp_path):
    _write(
        tmp_path / "in",
        [[("a", 1, JAN_2024 + 1_000), ("a", 2, JAN_2024 + 70_000)], [("a", 4, JAN_2024 + 200_000)]],
    )
    query = _start(spark, tmp_path)
    query.awaitTermination(300)
    times = {p["batchId"]: p["eventTime"] for p in query.recentProgress if p["numInputRows"]}
    # after the first file: 70 s - 5 s - 1 ms, as Flink's bounded out-of-orderness gives
    assert times[1]["watermark"] == "2024-01-01T00:01:04.999Z"
    assert times[1]["max"] == "2024-01-01T00:03:20.000Z"  # the rows' own event time
    assert _clock(tmp_path) == 0
    got = sorted((r.k, r.v) for r in spark.read.json(str(tmp_path / "out")).collect())
    assert got == [("a", 1), ("a", 2)]  # [0:03, 0:04) is still open


def _epoch_batches():
    """Clicks in the first minutes of 1970, the first file at most 5 s + 1 ms in."""
    return [[("a", 1, 2_000), ("b", 2, 4_000)], [("a", 4, 70_000)], [("_end", 0, 2**62)]]


def test_an_unshifted_query_refuses_data_that_needs_the_shifted_clock(spark, tmp_path):
    _write(tmp_path / "in", _epoch_batches())
    query = _start(spark, tmp_path)
    try:
        with pytest.raises(tm.InputDataError, match=rf"arrived before .*{SHIFT_HINT}"):
            query.processAllAvailable()
    finally:
        query.stop()


def test_the_shifted_clock_runs_it_and_is_kept_with_the_checkpoint(spark, tmp_path):
    _write(tmp_path / "in", _epoch_batches()[:2])
    _start(spark, tmp_path, shift=True).awaitTermination(300)
    assert _clock(tmp_path) == SPARK_OFFSET_MS
    _write(tmp_path / "in", _epoch_batches())  # the end of input arrives
    _start(spark, tmp_path).awaitTermination(300)  # the checkpoint's clock, not asked again
    got = sorted((r.k, r.v) for r in spark.read.json(str(tmp_path / "out")).collect())
    assert got == [("a", 1), ("a", 4), ("b", 2)]
    with pytest.raises(tm.WindowSpecError, match=r"^`shift_spark_clock` must be what the"):
        _start(spark, tmp_path, shift=False)


def test_a_checkpoint_written_before_the_clock_was_recorded_keeps_the_shifted_clock(
    spark, tmp_path
):
    """The previous release's checkpoint (tests/data/checkpoint_v0_1, session windows on
    timestamps from 1 ms) restarts on its clock, and the clock is then recorded."""
    from checkpoint_compat import start, write_input
    from test_streaming_restart_compat import FIXTURE, _relocate

    restarted = tmp_path / "restarted"
    shutil.copytree(FIXTURE, restarted)
    _relocate(restarted)
    assert not (restarted / "checkpoint" / CLOCK_FILE).exists()
    write_input(restarted / "in", 2)
    start(spark, restarted).awaitTermination(300)
    assert _clock(restarted) == SPARK_OFFSET_MS


def test_a_window_built_on_another_clock_than_its_checkpoint_is_refused(spark, tmp_path):
    from streaming_scenarios import _spec

    from tidemark.spark.streaming import StreamPlan, window_stream, write_outputs

    _write(tmp_path / "in", [[("a", 1, JAN_2024)]])
    (tmp_path / "checkpoint" / CLOCK_FILE).mkdir(parents=True)
    (tmp_path / "checkpoint" / CLOCK_FILE / "part-00000.txt").write_text(f"{SPARK_OFFSET_MS}\n")
    source = spark.readStream.schema("k string, v long, ts long").json(str(tmp_path / "in"))
    window = window_stream(
        source,
        StreamPlan(
            key_columns=["k"],
            timestamp_column="ts",
            spec=_spec(tm.TumblingEventTimeWindows.of(MINUTE)),
            out_of_orderness_ms=0,
            value_columns=["k", "v", "ts"],
            result_schema=source.schema,
            result_to_row=lambda value, ts: value,
        ),
    )
    with pytest.raises(tm.WindowSpecError, match=r"spark_offset_ms=1125899906842624"):
        write_outputs(window, {"main": lambda df, b: None}, str(tmp_path / "checkpoint"))
