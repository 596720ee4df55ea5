"""The public API on a streaming DataFrame: the seed example, one file per micro-batch.

::

    batch 0: event1 pv 12:00:00, event2 cart :01, event4 pv :04, event5 pv :05, event7 buy :07
             -> watermark 12:00:06.999 (max 12:00:07 - 0 - 1 ms)
    batch 1: event3 buy :03 (its window [:00, :05) is gone: late), event6, event8, event9
    batch 2: the end-of-input marker -> watermark +inf, every window fires
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import Row

import tidemark as tm
from tidemark.spark.streaming import END_OF_INPUT_MS
from tidemark.testing import WindowOperatorHarness

pytestmark = pytest.mark.spark

NOON = 1590292800000
BATCHES = [
    [
        ("pv", "event1", 0),
        ("cart", "event2", 1),
        ("pv", "event4", 4),
        ("pv", "event5", 5),
        ("buy", "event7", 7),
    ],
    [("buy", "event3", 3), ("cart", "event6", 6), ("buy", "event8", 8), ("pv", "event9", 9)],
]


class CountPerWindow(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (
            key,
            window.start - NOON,
            window.end - NOON,
            len(list(elements)),
            context.current_watermark(),
        )


def _write_files(directory):
    directory.mkdir()
    lines = [
        [{"action": a, "id": i, "ts": NOON + s * 1000} for a, i, s in batch] for batch in BATCHES
    ]
    lines.append([{"action": "_end", "id": "", "ts": END_OF_INPUT_MS}])
    for n, rows in enumerate(lines):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        import os

        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def _seed_stream(spark, directory):
    """The seed example's batches as a file stream, one file per micro-batch."""
    _write_files(directory)
    return (
        spark.readStream.schema("action string, id string, ts long")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )


# The seed example's windows counted by CountPerWindow: (action, start, end, n, watermark)
SEED_COUNTS = [
    ("buy", 5000, 10000, 2, tm.LONG_MAX),
    ("cart", 0, 5000, 1, NOON + 6999),
    ("cart", 5000, 10000, 1, tm.LONG_MAX),
    ("pv", 0, 5000, 2, NOON + 6999),
    ("pv", 5000, 10000, 2, tm.LONG_MAX),
]


def test_seed_example_streams_through_the_public_api(spark, tmp_path):
    source = _seed_stream(spark, tmp_path / "in")
    late = tm.OutputTag("late")
    result = (
        tm.from_dataframe(source, timestamp="ts")
        .key_by("action")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
        .side_output_late_data(late)
        .process(CountPerWindow(), "action string, start long, end long, n long, wm long")
    )
    assert result.to_dataframe().isStreaming
    collected: dict[str, list] = {"main": [], "late": []}

    def sink(name):
        return lambda df, batch_id: collected[name].extend(tuple(r) for r in df.collect())

    query = result.write_outputs(
        {"main": sink("main"), late: sink("late")},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    assert sorted(collected["main"]) == SEED_COUNTS
    assert [r[1] for r in collected["late"]] == ["event3"]


def test_shorthand_sum_fires_windows_restored_from_state(spark, tmp_path):
    # Windows of batch 0 fire in batches 1 and 2: their accumulators come back from the
    # state store into functions that never saw an element (issue 12's crash).
    source = _seed_stream(spark, tmp_path / "in")
    result = (
        tm.from_dataframe(source, timestamp="ts")
        .key_by("action")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
        .sum("ts")
    )
    out = tmp_path / "out"
    query = result.write_outputs(
        {"main": lambda df, b: df.write.mode("overwrite").parquet(str(out / f"b={b}"))},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    rows = spark.read.parquet(str(out)).select("action", "id", "ts").collect()
    # Per window: the first element's fields with ts replaced by the window's sum of ts.
    expected = [
        ("buy", "event7", 2 * NOON + 7000 + 8000),  # event3 (:03) is late and dropped
        ("cart", "event2", NOON + 1000),
        ("cart", "event6", NOON + 6000),
        ("pv", "event1", 2 * NOON + 0 + 4000),
        ("pv", "event5", 2 * NOON + 5000 + 9000),
    ]
    assert sorted((r.action, r.id, r.ts) for r in rows) == expected


@pytest.mark.parametrize("layout", ["deltas", "row"])
def test_a_single_sink_reading_its_batch_twice_gets_the_same_rows_and_figures(
    spark, tmp_path, layout
):
    """With one sink, write_outputs hands it the micro-batch uncached (a cache would only
    serve several sinks): a sink reading it twice recomputes it as any ``foreachBatch``
    batch is recomputed, from the same input, state version, watermark and batch clock,
    so both reads hold the same rows, and the late element still reaches nothing but the
    drop count (no side output is asked for). The figures count each element once."""
    from tidemark.spark.protocol.figures import metrics_of

    source = _seed_stream(spark, tmp_path / "in")
    result = (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("action")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
        .process(CountPerWindow(), "action string, start long, end long, n long, wm long")
    )
    reads: list[tuple[list, list]] = []

    def twice(df, batch_id):
        first = sorted(tuple(r) for r in df.collect())
        reads.append((first, sorted(tuple(r) for r in df.collect())))

    spark.conf.set("spark.tidemark.streaming.stateLayout", layout)
    try:
        query = result.write_outputs(
            {"main": twice},
            checkpoint=str(tmp_path / "checkpoint"),
            trigger={"availableNow": True},
        )
    finally:
        spark.conf.unset("spark.tidemark.streaming.stateLayout")
    query.awaitTermination(300)
    assert all(first == second for first, second in reads)
    assert sorted(r for first, _ in reads for r in first) == SEED_COUNTS
    figures = [metrics_of(p) for p in query.recentProgress if metrics_of(p)]
    assert sum(f["num_records_in"] for f in figures) == 9
    assert sum(f["num_late_records_dropped"] for f in figures) == 1  # event3
    assert sum(f["num_records_out"] for f in figures) == 5


class _Batch:
    """A micro-batch's frame, counting how often it was cached and released."""

    def __init__(self):
        self.cached = self.released = 0

    def persist(self):
        self.cached += 1

    def unpersist(self):
        self.released += 1


@pytest.mark.parametrize("names, cached", [(["main"], 0), (["main", "late"], 1)])
def test_the_batch_is_cached_only_where_several_sinks_read_it(monkeypatch, names, cached):
    from tidemark.spark.streaming.driver import starting

    monkeypatch.setattr(starting, "select_output", lambda batch, name, schema=None: name)
    read: list[str] = []
    splitter = starting._BatchSplitter({n: lambda df, b: read.append(df) for n in names}, {})
    batch = _Batch()
    splitter(batch, 0)
    assert read == names
    assert (batch.cached, batch.released) == (cached, cached)


class CountAndWatermark(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, sorted(e.id for e in elements), context.current_watermark())


@pytest.mark.slow
def test_count_window_sees_the_streams_watermark(spark, tmp_path):
    """count_window(2) with a watermark strategy: ``current_watermark()`` is the stream's
    (the harness fed each batch, then the watermark Spark moved to), not Long.MIN_VALUE.

    ::

        batch 0: pv event1, event4 fire (no watermark yet); event5, event7, event2 wait
                 -> W 12:00:06.999
        batch 1: buy event3 (with event7), cart event6 (with event2), pv event9 (with
                 event5) fire at W :06.999; buy event8 waits
    """
    source = _seed_stream(spark, tmp_path / "in")
    result = (
        tm.from_dataframe(source, timestamp="ts")
        .key_by("action")
        .count_window(2)
        .process(CountAndWatermark(), "action string, ids array<string>, wm long")
    )
    collected: list = []
    query = result.write_outputs(
        {"main": lambda df, b: collected.extend((r[0], tuple(r[1]), r[2]) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    harness = WindowOperatorHarness(
        tm.GlobalWindows.create(),
        CountAndWatermark(),
        key_selector=lambda row: row.action,
        trigger=tm.PurgingTrigger.of(tm.CountTrigger.of(2)),
    )
    for batch in BATCHES:
        for action, id_, seconds in batch:
            harness.process_element(
                Row(action=action, id=id_, ts=NOON + seconds * 1000), NOON + seconds * 1000
            )
        harness.process_watermark(max(NOON + s * 1000 for _, _, s in batch) - 1)
    want = sorted((k, tuple(ids), wm) for (k, ids, wm), _ in harness.output())
    assert sorted(collected) == want
    assert ("buy", ("event3", "event7"), NOON + 6999) in want  # not Long.MIN_VALUE


def test_max_parallelism_comes_from_the_session(spark):
    from tidemark.spark.streaming.driver.keygroups import (
        MAX_PARALLELISM_CONF,
        session_max_parallelism,
    )

    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    cores = spark.sparkContext.defaultParallelism
    assert session_max_parallelism(spark) == 4 * min(partitions, cores, 32)
    spark.conf.set(MAX_PARALLELISM_CONF, "8")
    try:
        assert session_max_parallelism(spark) == 8
        spark.conf.set(MAX_PARALLELISM_CONF, "many")
        with pytest.raises(tm.WindowSpecError, match="maxParallelism` must be an int"):
            session_max_parallelism(spark)
    finally:
        spark.conf.unset(MAX_PARALLELISM_CONF)
