"""Per-partition watermarks (Flink's Kafka-source semantics) on a file stream and a replay.

A stream of four partitions in which partition 3 lags the others by more than the
out-of-orderness bound (``partition_scenarios``): with ``partition_column`` the watermark
is the minimum over the partitions and none of partition 3's elements is late; with
Spark's one watermark over all partitions the same elements are late. Each run equals
the engine fed the same micro-batches and the watermark after each.
The same through a real Kafka topic: ``tests/kafka``.
"""

from __future__ import annotations

import json
import os

import pytest
from partition_scenarios import (
    BOUND_MS,
    PARTITIONS,
    STRATEGY,
    WINDOW_MS,
    _Count,
    _CountAt,
    batch_watermarks,
    count_by_partition,
    engine_counts,
    engine_replay,
    idle_arrivals,
    lagging_batches,
)

import tidemark as tm
from tidemark.errors import InputDataError, WindowSpecError
from tidemark.spark.streaming import END_OF_INPUT_MS
from tidemark.watermarks import PartitionWatermarks

SCHEMA = "partition int, key string, ts long"
RESULT = "key string, start long, end long, n long"

# ---------------------------------------------------------------------- engine


def test_per_partition_watermark_follows_the_lagging_partition():
    batches = lagging_batches()
    assert batch_watermarks(batches, per_partition=True) == [
        tm.LONG_MIN,  # partition 3 has nothing yet
        9_000 - BOUND_MS - 1,  # partition 3 reached 9 s
        19_000 - BOUND_MS - 1,
    ]
    assert batch_watermarks(batches, per_partition=False)[0] == 9_000 - BOUND_MS - 1


def test_engine_per_partition_has_nothing_late_the_global_watermark_has():
    batches = lagging_batches()
    results, late = engine_counts(batches, per_partition=True)
    assert late == []
    assert sum(r[3] for r in results) == sum(len(b) for b in batches)
    _, late_global = engine_counts(batches, per_partition=False)
    # partition 3's elements in [0, 5) of batch 1 and [10, 15) of batch 2: their windows
    # ended before the watermark of the batch before, 9 s - 2 s - 1 and 19 s - 2 s - 1
    assert count_by_partition(late_global) == {3: 10}


def test_idle_partition_is_left_out_after_idleness():
    idle = STRATEGY.with_idleness(1_000)
    w = PartitionWatermarks(idle, [0, 1])
    w.on_event(0, 5_000, arrival_ms=0)
    w.on_event(1, 3_000, arrival_ms=0)
    assert w.watermark_at(500) == 3_000 - BOUND_MS - 1
    w.on_event(0, 9_000, arrival_ms=500)
    assert w.watermark_at(1_000) == 3_000 - BOUND_MS - 1  # exactly 1 s: not yet idle
    assert w.watermark_at(1_001) == 9_000 - BOUND_MS - 1  # partition 1 left out
    w.on_event(1, 4_000, arrival_ms=1_500)  # back, behind: the watermark never goes back
    assert w.watermark_at(1_600) == 9_000 - BOUND_MS - 1
    w.on_event(0, 20_000, arrival_ms=1_700)
    assert w.watermark_at(1_800) == 9_000 - BOUND_MS - 1  # partition 1 holds it again


def test_partition_without_elements_goes_idle_from_the_first_arrival():
    w = PartitionWatermarks(STRATEGY.with_idleness(1_000), [0, 1])
    w.on_event(0, 5_000, arrival_ms=100)
    w.on_event(0, 6_000, arrival_ms=1_000)
    assert w.watermark_at(1_100) == tm.LONG_MIN
    assert w.watermark_at(1_101) == 6_000 - BOUND_MS - 1


def test_all_partitions_idle_the_watermark_stands_still():
    w = PartitionWatermarks(STRATEGY.with_idleness(1_000), [0, 1])
    w.on_event(0, 5_000, arrival_ms=0)
    w.on_event(1, 7_000, arrival_ms=0)
    assert w.watermark_at(0) == 5_000 - BOUND_MS - 1
    assert w.watermark_at(60_000) == 5_000 - BOUND_MS - 1


def test_unlisted_partition_and_missing_arrival_time_are_errors():
    w = PartitionWatermarks(STRATEGY, [0, 1])
    with pytest.raises(InputDataError, match=r"partition 7 \(timestamp=5ms\) is not of"):
        w.on_event(7, 5)
    idle = PartitionWatermarks(STRATEGY.with_idleness(10), [0])
    with pytest.raises(WindowSpecError, match="`processing_time` column"):
        idle.watermark_at(None)
    with pytest.raises(WindowSpecError, match="at least one partition"):
        PartitionWatermarks(STRATEGY, [])


# ---------------------------------------------------------------------- API checks


def test_partition_arguments_are_checked_when_defined(spark):
    df = spark.createDataFrame([(0, "a", 1)], SCHEMA)
    with pytest.raises(WindowSpecError, match="give partition_column='partition'"):
        tm.from_dataframe(df, "ts", partitions=4)
    with pytest.raises(WindowSpecError, match="must name a column of `df`; got 'part'"):
        tm.from_dataframe(df, "ts", partition_column="part")
    with pytest.raises(WindowSpecError, match="integer or string column"):
        tm.from_dataframe(spark.createDataFrame([(0.5, 1)], "p double, ts long"), "ts",
                          partition_column="p")  # fmt: skip
    with pytest.raises(WindowSpecError, match=r"distinct values, at least one; got \[0, 0\]"):
        tm.from_dataframe(df, "ts", partition_column="partition", partitions=[0, 0])
    with pytest.raises(WindowSpecError, match="`partitions` must be >= 1; got partitions=0"):
        tm.from_dataframe(df, "ts", partition_column="partition", partitions=0)
    with pytest.raises(WindowSpecError, match="give one of them"):
        tm.from_dataframe(df, "ts", partition_column="partition", order_by="ts", watermark="ts")


def test_a_stream_needs_its_partitions_listed(spark, tmp_path):
    stream = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    with pytest.raises(WindowSpecError, match="`partitions` is required on a stream"):
        tm.from_dataframe(stream, "ts", partition_column="partition")


def test_a_window_without_event_time_refuses_partitions(spark, tmp_path):
    stream = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    windowed = (
        tm.from_dataframe(stream, "ts", partition_column="partition", partitions=2)
        .key_by("key")
        .window(tm.TumblingProcessingTimeWindows.of(WINDOW_MS))
        .process(_Count(), RESULT)
    )
    with pytest.raises(WindowSpecError, match="uses no event time"):
        windowed.to_dataframe()


# ---------------------------------------------------------------------- streaming


def _write_batches(directory, batches, end=True):
    directory.mkdir()
    files = [[{"partition": p, "key": k, "ts": ts} for p, k, ts in rows] for rows in batches]
    if end:
        files.append([{"partition": 0, "key": "_end", "ts": END_OF_INPUT_MS}])
    for n, rows in enumerate(files):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def _run_stream(spark, tmp_path, per_partition, partitions=PARTITIONS):
    source = (
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    )
    extra = {"partition_column": "partition", "partitions": partitions} if per_partition else {}
    late = tm.OutputTag("late")
    result = (
        tm.from_dataframe(
            source, "ts", watermark_strategy=STRATEGY, shift_spark_clock=True, **extra
        )
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
        .side_output_late_data(late)
        .process(_Count(), RESULT)
    )
    collected: dict[str, list] = {"main": [], "late": []}

    def sink(name):
        return lambda df, batch_id: collected[name].extend(tuple(r) for r in df.collect())

    query = result.write_outputs(
        {"main": sink("main"), late: sink("late")},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(600)
    return sorted(collected["main"]), sorted(collected["late"])


@pytest.mark.spark
@pytest.mark.parametrize("per_partition", [True, False], ids=["per-partition", "global"])
def test_stream_equals_the_engine_fed_the_same_batches(spark, tmp_path, per_partition):
    batches = lagging_batches()
    _write_batches(tmp_path / "in", batches)
    results, late = _run_stream(spark, tmp_path, per_partition)
    expected_results, expected_late = engine_counts(batches, per_partition)
    assert results == expected_results
    assert late == expected_late
    if per_partition:
        assert late == []
    else:
        assert count_by_partition(late) == {3: 10}


@pytest.mark.spark
def test_stream_row_of_an_unlisted_partition_fails_the_query(spark, tmp_path):
    _write_batches(tmp_path / "in", [[(0, "a", 1_000), (9, "b", 2_000)]], end=False)
    with pytest.raises(InputDataError, match=r"a row of partition 9 .*timestamp=2000ms"):
        _run_stream(spark, tmp_path, per_partition=True, partitions=2)


# ---------------------------------------------------------------------- replay

RESULT_AT = "key string, start long, end long, n long, wm long"


def _replay(spark, rows, strategy, per_partition=True, partitions=None):
    """A recorded stream of ``(partition, key, ts, arrival)`` replayed in arrival order."""
    df = spark.createDataFrame(
        [(*row, n) for n, row in enumerate(rows)],
        "partition int, key string, ts long, arrival long, position long",
    )
    extra = {"partition_column": "partition", "partitions": partitions} if per_partition else {}
    late = tm.OutputTag("late")
    result = (
        tm.from_dataframe(
            df,
            "ts",
            order_by="position",
            processing_time="arrival",
            watermark_strategy=strategy,
            **extra,
        )  # fmt: skip
        .key_by("key")
        .window(tm.TumblingEventTimeWindows.of(WINDOW_MS))
        .side_output_late_data(late)
        .process(_CountAt(), RESULT_AT)
    )
    main = sorted(tuple(r) for r in result.to_dataframe().collect())
    return main, [tuple(r) for r in result.get_side_output(late).to_dataframe().collect()]


def _arrivals(batches):
    """The lagging batches as one recorded stream: batch after batch, a second apart."""
    return [(p, k, ts, 1000 * n) for n, rows in enumerate(batches) for p, k, ts in rows]


@pytest.mark.spark
def test_replay_per_partition_equals_the_engine_and_nothing_is_late(spark):
    rows = _arrivals(lagging_batches())
    main, late = _replay(spark, rows, STRATEGY)
    assert main == engine_replay(rows, STRATEGY, list(range(PARTITIONS)))
    assert late == []
    global_main, global_late = _replay(spark, rows, STRATEGY, per_partition=False)
    as_one = [(0, k, ts, arrival) for _p, k, ts, arrival in rows]
    assert global_main == engine_replay(as_one, STRATEGY, [0])
    assert {r[0] for r in global_late} == {3} and len(global_late) > 0


@pytest.mark.spark
def test_replay_idle_partition_closes_windows_only_with_idleness(spark):
    rows = idle_arrivals()
    idle = STRATEGY.with_idleness(2_000)
    main, _ = _replay(spark, rows, idle)
    assert main == engine_replay(rows, idle, [0, 1])
    first = [r for r in main if r[1] == 0]
    # partition 1 last arrived at 4.5 s: idle from 6.5 s on, the watermark then follows
    # partition 0 alone and window [0, 5) fires at 7 s's element, watermark 7 s - 2 s - 1
    assert {r[4] for r in first} == {7_000 - BOUND_MS - 1}
    waiting, _ = _replay(spark, rows, STRATEGY)
    assert waiting == engine_replay(rows, STRATEGY, [0, 1])
    assert {r[4] for r in waiting if r[1] == 0} == {tm.LONG_MAX}  # held until the end


def test_replay_idleness_needs_arrival_times(spark):
    df = spark.createDataFrame([(0, "a", 1, 0)], "partition int, key string, ts long, n long")
    with pytest.raises(WindowSpecError, match="give `processing_time`"):
        tm.from_dataframe(
            df, "ts", order_by="n", partition_column="partition",
            watermark_strategy=STRATEGY.with_idleness(1_000),
        )  # fmt: skip


@pytest.mark.spark
def test_replay_row_of_an_unlisted_partition_is_an_error(spark):
    rows = [(0, "a", 1_000, 0), (5, "a", 2_000, 1)]
    with pytest.raises(InputDataError, match=r"partition 5 \(timestamp=2000ms\) is not of"):
        _replay(spark, rows, STRATEGY, partitions=[0, 1])
