"""Idleness on a streaming query: an idle input's watermark advances with processing time.

The rule (see :mod:`tidemark.spark.streaming.driver.query`): once Spark's watermark ``W`` has stood
still for ``idleness`` since the key first saw it at ``T_W``, the key's operator is
advanced to ``W + (T - T_W - idleness)`` at processing time ``T``; it never goes back.
The processor is first driven by hand (fake Spark handle, exact clocks), then a real
file-source query shows a pending window closing with no further input.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from spark_state_fakes import Handle, TimerValues
from streaming_scenarios import (
    LATE,
    RESULT_SCHEMA,
    VALUE_COLUMNS,
    _spec,
    describe_row,
    write_batch_file,
)

from tidemark import TumblingEventTimeWindows, TumblingProcessingTimeWindows
from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import TS
from tidemark.spark.streaming import StreamPlan, select_output, window_stream, write_outputs
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS, spark_watermark
from tidemark.spark.streaming.worker.config import DEFAULT_MAX_PARALLELISM, ProcessorConfig
from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
from tidemark.spark.streaming.worker.state import StoredGroup, StoredKey

IDLENESS_MS = 1_000
TUMBLING_10 = _spec(TumblingEventTimeWindows.of(10), late_data_tag=LATE)


# ---------------------------------------------------------------------- processor by hand


def _processor(idleness_ms: int | None) -> tuple[WindowStatefulProcessor, Handle]:
    config = ProcessorConfig(
        spec=TUMBLING_10,
        time_mode="EventTime",
        value_names=tuple(VALUE_COLUMNS),
        value_types=("StringType", "LongType", "LongType"),
        value_positions=(0, 1, 2),
        result_schema=RESULT_SCHEMA,
        result_to_row=describe_row,
        idleness_ms=idleness_ms,
    )
    processor, handle = WindowStatefulProcessor(config), Handle()
    processor.init(handle)  # type: ignore[arg-type]
    return processor, handle


def _stored_a(handle: Handle) -> StoredKey | None:
    """What key "a"'s group row holds for it (None when the row or the key is gone)."""
    group = StoredGroup.decode(handle.state.row, DEFAULT_MAX_PARALLELISM)
    return group.keys.get("a")


def _call(processor: WindowStatefulProcessor, step: tuple) -> list[tuple]:
    """One visit of key "a": (engine watermark or None, processing time, timestamps)."""
    watermark, now_ms, timestamps = step
    spark_ms = 0 if watermark is None else spark_watermark(watermark)
    values = TimerValues(spark_ms, now_ms)
    if timestamps:
        rows = [("a", i, ts, ts) for i, ts in enumerate(timestamps)]
        pdf = pd.DataFrame(rows, columns=[*VALUE_COLUMNS, TS], dtype=object)
        frames = processor.handleInputRows((7,), iter([pdf]), values)  # type: ignore[arg-type]
    else:
        frames = processor.handleExpiredTimer((7,), values, None)  # type: ignore[arg-type]
    return [tuple(r) for f in frames for r in f.itertuples(index=False)]


#   tumbling 10, idleness 1000, Spark's watermark after the first batch: 1 (max ts 2)
#   T=0      a@1, a@2 (no watermark yet)
#   T=500    W=1 first seen -> T_W=500
#   T=1500   idle for exactly 1000 -> W_eff = 1: nothing
#   T=1507   W_eff = 8: nothing;  T=1508   W_eff = 9 -> a[0,10) fires, seen watermark 9;
#            no window left, but the key keeps its clock (9 is ahead of Spark's 1)
#   T=2000   W_eff = 501; a@3: [0,10) cleaned -> side output "late"; a@505 opens [500,510)
#   T=2100   Spark's W moves to 100 (< 501): the operator keeps 501 (never goes back)
#   T=3508   W_eff = 100 + (3508 - 2100 - 1000) = 508: nothing
#   T=3509   W_eff = 509 -> a[500,510) fires; the clock is kept, checked at 4509
#   T=4509   Spark's W is 600, past the key's 509: the row is cleared
IDLE_STEPS = [
    (None, 0, [1, 2]),
    (1, 500, []),
    (1, 1500, []),
    (1, 1507, []),
    (1, 1508, []),
    (1, 2000, [3, 505]),
    (100, 2100, []),
    (100, 3508, []),
    (100, 3509, []),
    (600, 4509, []),
]


def test_idle_watermark_fires_pending_windows_and_never_goes_back():
    processor, handle = _processor(IDLENESS_MS)
    fired = {}
    for step in IDLE_STEPS:
        rows = _call(processor, step)
        if rows:
            fired[step[1]] = rows
        if step[1] == 1508:
            stored = _stored_a(handle)
            assert handle.timers == {2508} and stored is not None and stored.key_state is None
        if step[1] == 2100:
            assert handle.timers == {2101}  # a processing-time visit in the next batch
            stored = _stored_a(handle)
            assert stored is not None
            assert (stored.seen_watermark, stored.seen_at) == (spark_watermark(100), 2100)
    assert set(fired) == {1508, 2000, 3509}
    assert fired[1508] == [("main", 9, "a", 0, 10, 2, 1, 9, None, None)]
    assert fired[3509] == [("main", 509, "a", 500, 510, 1, 1, 509, None, None)]
    ((tag, timestamp, *_, side, _dropped),) = fired[2000]
    assert (tag, timestamp, tuple(pickle.loads(side))) == (LATE.tag_id, 3, ("a", 0, 3))
    assert handle.timers == set() and handle.state.row is None


def test_without_idleness_the_window_waits():
    processor, handle = _processor(None)
    emitted = [_call(processor, step) for step in IDLE_STEPS[:5]]
    assert emitted == [[]] * 5
    assert handle.timers == {spark_watermark(9)}  # an event-time timer at the window's end


@pytest.mark.spark
def test_idleness_needs_event_time(spark):
    df = spark.readStream.format("rate").load()
    df = df.selectExpr("'a' as key", "value as v", "value as ts")
    with pytest.raises(WindowSpecError, match="`idleness` advances the event-time watermark"):
        _window_stream(
            df,
            spec=_spec(TumblingProcessingTimeWindows.of(1000)),
            out_of_orderness_ms=None,
            time_mode="ProcessingTime",
            idleness_ms=IDLENESS_MS,
        )


# ---------------------------------------------------------------------- a real query


def _window_stream(df: Any, **overrides: Any) -> Any:
    arguments: dict[str, Any] = dict(
        key_columns=["key"],
        timestamp_column="ts",
        spec=TUMBLING_10,  # its late data under LATE
        out_of_orderness_ms=0,
        value_columns=VALUE_COLUMNS,
        result_schema=RESULT_SCHEMA,
        result_to_row=describe_row,
    )
    arguments.update(overrides)
    # timestamps from the epoch on
    return window_stream(df, StreamPlan(**arguments), spark_offset_ms=SPARK_OFFSET_MS)


def _start(spark: Any, root: Path, idleness_ms: int | None) -> tuple[Any, dict[str, list]]:
    (root / "in").mkdir(parents=True)
    df = spark.readStream.schema("key string, v long, ts long").json(str(root / "in"))
    combined = _window_stream(df, idleness_ms=idleness_ms)
    got: dict[str, list] = {"main": [], "late": []}

    def sink(name: str) -> Any:
        return lambda d, b: got[name].extend(tuple(r) for r in d.collect())

    sinks = {name: sink(name) for name in got}
    trigger = {"processingTime": "500 milliseconds"}
    query = write_outputs(combined, sinks, str(root / "checkpoint"), trigger)
    return query, got


def _wait(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


@pytest.mark.spark
def test_idle_stream_closes_pending_windows_without_input(spark, tmp_path):
    """a@1, a@2, b@5, then nothing: Spark's watermark stays at 4; after 1 s of idleness
    it advances 1 ms per ms, and [0,10) closes for both keys with no further input and
    no end-of-input marker. a@3 afterwards is late (side output)."""
    query, got = _start(spark, tmp_path, IDLENESS_MS)
    try:
        write_batch_file(tmp_path / "in", 0, [("a", 1, 1), ("a", 2, 2), ("b", 3, 5)], "long")
        assert _wait(lambda: len(got["main"]) >= 2, 90), got
        write_batch_file(tmp_path / "in", 1, [("a", 4, 3)], "long")
        assert _wait(lambda: got["late"], 60), got
    finally:
        query.stop()
    windows = sorted(r[:5] for r in got["main"])
    assert windows == [("a", 0, 10, 2, 3), ("b", 0, 10, 1, 3)]
    assert all(r[5] >= 9 for r in got["main"])  # the idle watermark that fired them
    assert got["late"] == [("a", 4, 3)]


@pytest.mark.spark
def test_without_idleness_an_idle_stream_keeps_its_window(spark, tmp_path):
    query, got = _start(spark, tmp_path, None)
    try:
        write_batch_file(tmp_path / "in", 0, [("a", 1, 1), ("a", 2, 2), ("b", 3, 5)], "long")
        assert _wait(lambda: any(p["numInputRows"] for p in query.recentProgress), 90)
        time.sleep(4 * IDLENESS_MS / 1000)
    finally:
        query.stop()
    assert got["main"] == []


@pytest.mark.spark
def test_select_output_of_idle_query_keeps_schema(spark):
    df = (
        spark.readStream.format("rate").load().selectExpr("'a' as key", "value as v", "value as ts")
    )
    combined = _window_stream(df, idleness_ms=IDLENESS_MS)
    assert select_output(combined, "main").schema == RESULT_SCHEMA
