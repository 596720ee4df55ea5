"""tidemark's figures in a streaming query's progress (Spark's observed metrics), and
the same summary of a bounded run.

The seed example, one file per micro-batch, 5-second tumbling windows, no disorder::

    batch 0: pv :00 :04 :05, cart :01, buy :07      no watermark yet: 3 keys, 4 windows
    batch 1: buy :03 (late: its window [:00, :05) is gone), cart :06, buy :08, pv :09
             under watermark :06.999: pv and cart [:00, :05) fire, 3 windows left
    batch 2: the end-of-input row (no element)      under watermark :08.999
    batch 3: no data, the final watermark            the three [:05, :10) windows fire
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import time

import pytest
from spark_state_fakes import Handle, TimerValues
from test_streaming_keygroups import CALLS, _config, _frame

import tidemark as tm
from tidemark.spark.protocol.columns import STATS_OUTPUT
from tidemark.spark.protocol.figures import StateTotals, metrics_of
from tidemark.spark.streaming import END_OF_INPUT_MS
from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
from tidemark.time import LONG_MAX

pytestmark = pytest.mark.spark

NOON = 1590292800000
BATCHES = [
    [("pv", "e1", 0), ("cart", "e2", 1), ("pv", "e4", 4), ("pv", "e5", 5), ("buy", "e7", 7)],
    [("buy", "e3", 3), ("cart", "e6", 6), ("buy", "e8", 8), ("pv", "e9", 9)],
]
SCHEMA = "action string, start long, n long, wm long"


class CountPerWindow(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        n = len(list(elements))
        yield (key, context.window().start - NOON, n, context.current_watermark())


def _write_files(directory):
    directory.mkdir()
    batches = [[{"action": a, "id": i, "ts": NOON + s * 1000} for a, i, s in b] for b in BATCHES]
    batches.append([{"action": "_end", "id": "", "ts": END_OF_INPUT_MS}])
    for n, rows in enumerate(batches):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def _pipeline(spark, directory, late):
    source = (
        spark.readStream.schema("action string, id string, ts long")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )
    windowed = (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("action")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
    )
    if late is not None:
        windowed = windowed.side_output_late_data(late)
    return windowed.process(CountPerWindow(), SCHEMA)


def _figures(records_in, out, late, dropped, keys, windows, watermark_ms):
    return {
        "num_records_in": records_in,
        "num_records_out": out,
        "num_late_records_side_output": late,
        "num_late_records_dropped": dropped,
        "keys_in_state_change": keys,
        "windows_in_state_change": windows,
        "watermark_ms": watermark_ms,
    }


def _expected(late_tagged: bool):
    late, dropped = (1, 0) if late_tagged else (0, 1)
    return [
        _figures(5, 0, 0, 0, 3, 4, None),
        _figures(4, 2, late, dropped, 0, -1, NOON + 6999),
        _figures(0, 0, 0, 0, 0, 0, NOON + 8999),
        _figures(0, 3, 0, 0, -3, -3, LONG_MAX),
    ]


def _run(spark, tmp_path, late):
    _write_files(tmp_path / "in")
    result = _pipeline(spark, tmp_path / "in", late)
    main: list = []
    query = result.write_outputs(
        {"main": lambda df, b: main.extend(tuple(r) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    return query, main


def _without_watermark_timestamp(figures):
    return {k: v for k, v in figures.items() if k != "watermark"}


def test_progress_reports_tidemarks_figures_per_micro_batch(spark, tmp_path):
    query, main = _run(spark, tmp_path, tm.OutputTag("late"))
    progress = sorted(query.recentProgress, key=lambda p: p["batchId"])
    got = [_without_watermark_timestamp(metrics_of(p)) for p in progress]
    assert got == _expected(late_tagged=True)
    # the watermark the windows fired under in batch 1 is the one batch 1 reports
    assert sorted(r[3] for r in main if r[1] == 0) == [NOON + 6999, NOON + 6999]
    totals = StateTotals()
    assert [totals.add(metrics_of(p)) for p in progress] == [(3, 4), (3, 3), (3, 3), (0, 0)]


def test_watermark_is_a_real_timestamp(spark, tmp_path):
    query, _ = _run(spark, tmp_path, None)
    progress = sorted(query.recentProgress, key=lambda p: p["batchId"])
    figures = [metrics_of(p) for p in progress]
    assert [_without_watermark_timestamp(f) for f in figures] == _expected(late_tagged=False)
    watermarks = [f["watermark"] for f in figures]
    # Spark's own progress shows the engine's watermark (Spark's clock is not shifted:
    # the data is of 2020), as tidemark's figures do, in Spark's format
    assert progress[1]["eventTime"]["watermark"] == watermarks[1]
    expected = dt.datetime.fromtimestamp((NOON + 6999) / 1000, dt.timezone.utc)
    assert watermarks[1] == expected.strftime("%Y-%m-%dT%H:%M:%S.999Z")
    assert watermarks == [
        None,
        "2020-05-24T04:00:06.999Z",
        "2020-05-24T04:00:08.999Z",
        "9999-12-31T23:59:59.999Z",
    ]


def test_a_listener_receives_the_figures(spark, tmp_path):
    from pyspark.sql.streaming import StreamingQueryListener

    received: dict[int, dict] = {}

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):  # noqa: N802
            pass

        def onQueryProgress(self, event):  # noqa: N802
            figures = metrics_of(event.progress)
            if figures is not None:
                received[event.progress.batchId] = figures

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            pass

    listener = Listener()
    spark.streams.addListener(listener)
    try:
        _run(spark, tmp_path, tm.OutputTag("late"))
        deadline = time.monotonic() + 60
        while len(received) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        spark.streams.removeListener(listener)
    got = [_without_watermark_timestamp(received[b]) for b in sorted(received)]
    assert got == _expected(late_tagged=True)


def _stats(frames):
    """The figures of the ``"__tm_stats"`` rows of a call's output frames."""
    rows = [r for f in frames for r in f.itertuples(index=False) if r[0] == STATS_OUTPUT]
    return [json.loads(r[-2]) for r in rows]


def test_each_call_emits_one_row_of_its_figures():
    """The calls of ``test_streaming_keygroups``: one group, keys a and b, a timer at
    every element; a key not visited (b in call 2) is not counted."""
    processor, handle = (
        WindowStatefulProcessor(dataclasses.replace(_config(), metrics=True)),
        Handle(),
    )
    processor.init(handle)  # type: ignore[arg-type]
    got = []
    for watermark, rows in CALLS:
        values = TimerValues.at(watermark)
        if rows:
            frames = processor.handleInputRows((0,), iter([_frame(rows)]), values)  # type: ignore[arg-type]
        else:
            frames = processor.handleExpiredTimer((0,), values, None)  # type: ignore[arg-type]
        (figures,) = _stats(list(frames))
        got.append(
            (
                figures["num_records_in"],
                figures["num_records_out"],
                figures["keys_in_state_change"],
                figures["windows_in_state_change"],
                figures["watermark_ms"],
            )
        )
    assert got == [(2, 0, 2, 2, None), (1, 1, 0, 0, 55), (2, 0, 0, 0, 55), (0, 4, 0, 0, 200)]


def test_a_call_without_metrics_emits_no_row():
    processor, handle = WindowStatefulProcessor(_config()), Handle()
    processor.init(handle)  # type: ignore[arg-type]
    watermark, rows = CALLS[0]
    frames = processor.handleInputRows((0,), iter([_frame(rows)]), TimerValues.at(watermark))  # type: ignore[arg-type]
    assert _stats(list(frames)) == []


def test_a_query_of_the_results_alone_reports_them_too(spark, tmp_path):
    _write_files(tmp_path / "in")
    results = _pipeline(spark, tmp_path / "in", tm.OutputTag("late")).to_dataframe()
    writer = results.writeStream.format("memory").queryName("metrics_results")
    writer = writer.option("checkpointLocation", str(tmp_path / "checkpoint"))
    query = writer.trigger(availableNow=True).start()
    try:
        query.awaitTermination(300)
        progress = sorted(query.recentProgress, key=lambda p: p["batchId"])
        got = [_without_watermark_timestamp(metrics_of(p)) for p in progress]
        assert got == _expected(late_tagged=True)
        assert spark.table("metrics_results").count() == 5
    finally:
        spark.catalog.dropTempView("metrics_results")


def test_a_chain_reports_each_windows_figures(spark, tmp_path):
    _write_files(tmp_path / "in")
    per_key = _pipeline(spark, tmp_path / "in", tm.OutputTag("late"))
    total = per_key.window_all(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(10)))
    query = total.sum("n").write_outputs(
        {"main": lambda df, b: df.collect()},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    progress = sorted(query.recentProgress, key=lambda p: p["batchId"])
    first = [_without_watermark_timestamp(metrics_of(p, "tidemark_window1")) for p in progress]
    assert first == _expected(late_tagged=True)
    last = [metrics_of(p) for p in progress]
    sums = {n: sum(f[n] for f in last) for n in ("num_records_in", "num_records_out")}
    assert sums == {"num_records_in": 5, "num_records_out": 1}  # 5 counts, 1 total
    assert sum(f["keys_in_state_change"] for f in last) == 0
    assert [f["watermark_ms"] for f in last] == [f["watermark_ms"] for f in first]


# ---------------------------------------------------------------- bounded runs


def _bounded(spark, **source):
    rows = [(a, i, NOON + s * 1000, n) for n, (a, i, s) in enumerate(sum(BATCHES, []))]
    df = spark.createDataFrame(rows, "action string, id string, ts long, arrival long")
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps()
    return (
        tm.from_dataframe(df, timestamp="ts", watermark_strategy=strategy, **source)
        .key_by("action")
        .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5)))
    )


def _summary(records_in, out, late, dropped):
    return {
        "num_records_in": records_in,
        "num_records_out": out,
        "num_late_records_side_output": late,
        "num_late_records_dropped": dropped,
    }


def test_batch_run_summary_comes_from_its_kept_run(spark):
    late = tm.OutputTag("late")
    result = _bounded(spark).side_output_late_data(late).process(CountPerWindow(), SCHEMA)
    assert result.metrics() == _summary(9, 6, 0, 0)  # nothing is late in BATCH
    assert result.combined_dataframe().storageLevel.useMemory  # the outputs read it
    assert result.to_dataframe().count() == 6
    result.unpersist()


def test_replay_summary_counts_late_elements(spark):
    # replayed in arrival order, buy :03 comes under watermark :06.999
    windowed = _bounded(spark, order_by="arrival")
    tagged = windowed.side_output_late_data(tm.OutputTag("late"))
    assert tagged.process(CountPerWindow(), SCHEMA).metrics() == _summary(9, 5, 1, 0)
    assert windowed.process(CountPerWindow(), SCHEMA).metrics() == _summary(9, 5, 0, 1)


def test_sql_fast_path_summary_counts_results_only(spark):
    result = _bounded(spark).sum("ts")
    assert result.metrics() == _summary(None, 6, 0, 0)


def test_metrics_on_a_stream_names_where_they_are(spark, tmp_path):
    (tmp_path / "in").mkdir()
    result = _pipeline(spark, tmp_path / "in", None)
    with pytest.raises(
        tm.WindowSpecError,
        match=r"needs a bounded DataFrame; on a stream.*"
        r"lastProgress\['observedMetrics'\]\['tidemark'\]",
    ):
        result.metrics()
