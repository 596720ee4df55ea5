"""Idleness as Flink's (issue 47): never a watermark advanced by wall-clock time.

Flink's ``WatermarksWithIdleness`` marks a partition idle after the timeout without
records; the source's combined watermark is the minimum over the active partitions,
stands still when all are idle, and never goes back. The issue's scenario::

    two partitions, bound 2 s, idleness 5 s, 10 s windows
    arrival 0 s:   (p0, 100 s), (p1, 50 s)     watermark min(97.999, 47.999) = 47.999
    ... a minute without input: both idle, the watermark stands at 47.999
    arrival 60 s:  (p1, 60 s)                  on time (Flink); then p1 alone: 57.999

tidemark used to advance a stalled stream's watermark with processing time, uncapped, and
sent 60 s to the late output. Now: the engine and a replay give Flink's watermark; a
stream read by partition refuses ``with_idleness`` (Spark cannot leave one input out of
its minimum), naming the fix; and on a stream of one input idleness moves nothing, as in
Flink, so the query runs in EventTime mode and ``availableNow`` ends it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import tidemark as tm
from tidemark.watermarks import PartitionWatermarks

BOUNDED = tm.WatermarkStrategy.for_bounded_out_of_orderness(2_000)
IDLE = BOUNDED.with_idleness(5_000)
WINDOW = tm.TumblingEventTimeWindows.of(10_000)
# (partition, event time, arrival time), in arrival order
SCENARIO = [(0, 100_000, 0), (1, 50_000, 0), (1, 60_000, 60_000)]


def test_the_engine_holds_the_watermark_while_every_partition_is_idle():
    w = PartitionWatermarks(IDLE, [0, 1])
    seen = []
    for partition, timestamp, arrival in SCENARIO:
        seen.append(w.watermark_at(arrival))
        w.on_event(partition, timestamp, arrival_ms=arrival)
    assert seen == [tm.LONG_MIN, tm.LONG_MIN, 47_999]  # 60 s arrives on time
    assert w.watermark_at(60_000) == 57_999  # p1 active again, p0 idle: p1's alone
    assert w.watermark_at(70_000) == 57_999  # both idle again: it stands still


class _Count(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (context.window().start, len(list(elements)))


@pytest.mark.spark
def test_a_replay_keeps_the_row_flink_keeps(spark):
    rows = [("k", p, ts, arrival) for p, ts, arrival in SCENARIO]
    df = spark.createDataFrame(rows, "k string, p int, ts long, arrival long")
    late = tm.OutputTag("late")
    result = (
        tm.from_dataframe(
            df,
            "ts",
            order_by=["arrival", "p"],
            processing_time="arrival",
            watermark_strategy=IDLE,
            partition_column="p",
        )
        .key_by("k")
        .window(WINDOW)
        .side_output_late_data(late)
        .process(_Count(), "start long, n long")
    )
    assert sorted(tuple(r) for r in result.to_dataframe().collect()) == [
        (50_000, 1),
        (60_000, 1),
        (100_000, 1),
    ]
    assert result.get_side_output(late).to_dataframe().count() == 0


def _file_stream(spark, directory: Path, batches: list[list[dict]], schema: str):
    directory.mkdir()
    for n, rows in enumerate(batches):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(directory))


@pytest.mark.spark
def test_a_stream_read_by_partition_refuses_idleness_naming_the_fix(spark, tmp_path):
    source = _file_stream(spark, tmp_path / "in", [[{"p": 0, "ts": 1}]], "p int, ts long")
    with pytest.raises(tm.WindowSpecError) as info:
        tm.from_dataframe(source, "ts", watermark_strategy=IDLE, partition_column="p", partitions=2)
    message = str(info.value)
    assert message.startswith("`with_idleness` on a stream read by partition")
    assert "got idle_timeout=5000ms, partitions=[0, 1]" in message
    assert "Drop with_idleness" in message and "replay the recorded topic" in message


@pytest.mark.spark
def test_the_issue_scenario_streamed_by_partition_without_idleness_is_flinks(spark, tmp_path):
    """The fix the refusal names: without idleness the stalled minimum holds, as Flink's
    does with both partitions idle, and (p1, 60 s) is on time."""
    rows = [{"k": "k", "p": p, "ts": ts} for p, ts, _ in SCENARIO]
    batches = [rows[:2], rows[2:]]
    source = _file_stream(spark, tmp_path / "in", batches, "k string, p int, ts long")
    collected: dict[str, list] = {"main": [], "late": []}
    late = tm.OutputTag("late")
    result = (
        tm.from_dataframe(
            source, "ts", watermark_strategy=BOUNDED, partition_column="p", partitions=2
        )
        .key_by("k")
        .window(WINDOW)
        .side_output_late_data(late)
        .process(_Count(), "start long, n long")
    )
    query = result.write_outputs(
        {
            "main": lambda df, _: collected["main"].extend(tuple(r) for r in df.collect()),
            late: lambda df, _: collected["late"].extend(tuple(r) for r in df.collect()),
        },
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    # the watermark ends at min(97.999, 57.999): no window has closed, nothing is late
    assert collected == {"main": [], "late": []}


@pytest.mark.spark
def test_idleness_on_a_stream_of_one_input_moves_no_watermark(spark, tmp_path):
    """One input (no partition_column): Flink's idleness leaves the watermark where it
    is. A window whose end is 1 ms past the watermark stays open through many idle
    timeouts (tidemark's old idle clock fired it after 1 ms past the timeout), and
    ``availableNow`` ends the query by itself."""
    source = _file_stream(spark, tmp_path / "in", [[{"k": "k", "ts": 9_999}]], "k string, ts long")
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps().with_idleness(200)
    result = tm.from_dataframe(source, "ts", watermark_strategy=strategy).key_by("k")
    counted = result.window(WINDOW).process(_Count(), "start long, n long")
    fired: list[tuple] = []

    def sink(df, _):
        fired.extend(tuple(r) for r in df.collect())

    query = counted.write_outputs(
        {"main": sink}, checkpoint=str(tmp_path / "ended"), trigger={"availableNow": True}
    )
    assert query.awaitTermination(300)  # ends by itself
    running = counted.write_outputs(
        {"main": sink},
        checkpoint=str(tmp_path / "running"),
        trigger={"processingTime": "100 milliseconds"},
    )
    try:
        time.sleep(3)  # 15 idle timeouts
        assert running.exception() is None
    finally:
        running.stop()
    assert fired == []  # the watermark stands at 9.998 s: [0, 10 s) stays open
