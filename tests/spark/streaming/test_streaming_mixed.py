"""Mixed time domains: event-time and processing-time timers in one streaming query.

Such a query runs in Spark's ProcessingTime mode (a micro-batch at every trigger
interval) with Spark's watermark still mapped onto the engine's. The reference is the
engine fed, per micro-batch at processing time ``T``: the watermark Spark moved to after
the previous batch, then ``T``, then the batch's elements. The processor is first driven
by hand, on exact clocks, by a stand-in for Spark that calls it as Spark does (rows
first, then each expired timer of the group); then real file-source queries run.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import Row
from spark_state_fakes import Handle, TimerValues
from streaming_scenarios import (
    END,
    RESULT_SCHEMA,
    VALUE_COLUMNS,
    Describe,
    EarlyFirings,
    WatermarkFiring,
    _spec,
    describe_row,
    write_batch_file,
)
from transcript import within_seconds

import tidemark as tm
from tidemark import (
    ContinuousProcessingTimeTrigger,
    PurgingTrigger,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from tidemark._engine.create import create_window_operator
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import TS
from tidemark.spark.streaming import StreamPlan, window_stream, write_outputs
from tidemark.spark.streaming.driver.state_reader import read_group_rows
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS, spark_watermark
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
from tidemark.spark.streaming.worker.state import StoredGroup
from tidemark.testing import WindowOperatorHarness
from tidemark.time import LONG_MAX, LONG_MIN

# ---------------------------------------------------------------------- the engine


def test_engine_continuous_processing_trigger_on_event_time_windows():
    """Flink's ContinuousProcessingTimeTrigger on event-time windows fires early by
    processing time; at the window's end the watermark cleans the window up (its
    cleanup timer) without a firing of its own, and every timer goes with it."""
    h = WindowOperatorHarness(
        TumblingEventTimeWindows.of(100),
        lambda a, b: (a[0], a[1] + b[1]),
        key_selector=lambda v: v[0],
        trigger=ContinuousProcessingTimeTrigger.of(10),
    )
    h.set_processing_time(1)
    h.process_element(("a", 1), 5)
    h.set_processing_time(12)  # the timer at 10 fires
    h.process_element(("a", 2), 20)
    h.set_processing_time(21)  # and the one at 20
    assert h.output() == [(("a", 1), 99), (("a", 3), 99)]
    assert h.num_processing_time_timers() == 1 and h.num_event_time_timers() == 1
    h.process_watermark(149)
    h.set_processing_time(31)  # the timer at 30 went with the window
    assert h.output() == [(("a", 1), 99), (("a", 3), 99)]
    assert (h.num_keyed_state_entries(), h.num_event_time_timers()) == (0, 0)
    assert h.num_processing_time_timers() == 0


def test_engine_early_firings_then_the_watermark_fires_the_window():
    h = WindowOperatorHarness(
        TumblingEventTimeWindows.of(100),
        lambda a, b: (a[0], a[1] + b[1]),
        key_selector=lambda v: v[0],
        trigger=EarlyFirings(10),
    )
    h.set_processing_time(1)
    h.process_element(("a", 1), 5)
    h.set_processing_time(12)
    h.process_element(("a", 2), 20)
    h.process_watermark(99)
    assert h.output() == [(("a", 1), 99), (("a", 3), 99)]
    h.set_processing_time(50)  # the window is gone: no early firing any more
    assert len(h.output()) == 2
    assert h.num_keyed_state_entries() + h.num_processing_time_timers() == 0


# ---------------------------------------------------------------------- processor by hand


class _OneGroup:
    """One key group as Spark runs it in a ProcessingTime query: per micro-batch, the
    rows (``handleInputRows``), then each expired timer (``handleExpiredTimer``), which
    Spark deletes after the call."""

    def __init__(
        self, spec: OperatorSpec, time_mode: TimeMode = TimeMode.EVENT_AND_PROCESSING_TIME
    ) -> None:
        config = ProcessorConfig(
            spec=spec,
            time_mode=time_mode,
            value_names=tuple(VALUE_COLUMNS),
            value_types=("StringType", "LongType", "LongType"),
            value_positions=(0, 1, 2),
            result_schema=RESULT_SCHEMA,
            result_to_row=describe_row,
        )
        assert config.spark_time_mode() == TimeMode.PROCESSING_TIME
        self.processor, self.handle = WindowStatefulProcessor(config), Handle()
        self.processor.init(self.handle)  # type: ignore[arg-type]
        self.got: Counter = Counter()

    def batch(self, watermark: int | None, now: int, rows: list[tuple[str, int]]) -> None:
        values = TimerValues.at(watermark, now)
        if rows:
            records = [(k, ts, ts, ts) for k, ts in rows]
            pdf = pd.DataFrame(records, columns=[*VALUE_COLUMNS, TS], dtype=object)
            self._collect(self.processor.handleInputRows((0,), iter([pdf]), values))  # type: ignore[arg-type]
        for expiry in sorted(t for t in self.handle.timers if t <= now):
            self._collect(
                self.processor.handleExpiredTimer((0,), values, _Expired(expiry))  # type: ignore[arg-type]
            )
            self.handle.timers.discard(expiry)

    def _collect(self, frames: Any) -> None:
        for frame in frames:
            self.got.update(tuple(r)[2:8] for r in frame.itertuples(index=False))


class _Expired:
    def __init__(self, expiry: int) -> None:
        self.expiry = expiry

    def getExpiryTimeInMs(self) -> int:  # noqa: N802
        return self.expiry


Batches = list[tuple[int | None, int, list[tuple[str, int]]]]


def _engine_reference(spec: OperatorSpec, batches: Batches) -> Counter:
    """The engine fed, per batch: Spark's watermark (when it rose), the batch's
    processing time, then the batch's elements."""
    op = create_window_operator(spec)
    for watermark, now, rows in batches:
        if watermark is not None and watermark > op.current_watermark:
            op.process_watermark(watermark)
        op.advance_processing_time(now)
        for key, ts in rows:
            op.process_element(key, Row(key=key, v=ts, ts=ts), ts)
    return Counter(describe_row(v, ts) for v, ts in op.output)


#   tumbling 100, processing-time interval 10; a and b share one key group
#   T=1    a@5, b@7                    early timers at 10
#   T=12   a[0,100) (1 element), b[0,100) fire early, at the watermark of none yet
#   T=15   W 6, a@20
#   T=21   a (2 elements), b fire early
#   T=25   W 19, b@150: b[100,200), early timer at 30
#   T=31   W 149: first the watermark: [0,100) ends (and for EarlyFirings fires), so the
#          window's timer at 30 is gone; then T=31: b[100,200) fires early
#   T=45   b[100,200) fires early at 40
#   T=50   W MAX: everything ends; no state and no timer is left
BATCHES: Batches = [
    (None, 1, [("a", 5), ("b", 7)]),
    (None, 12, []),
    (6, 15, [("a", 20)]),
    (6, 21, []),
    (19, 25, [("b", 150)]),
    (149, 31, []),
    (149, 45, []),
    (LONG_MAX, 50, []),
]


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(
            _spec(TumblingEventTimeWindows.of(100), trigger=ContinuousProcessingTimeTrigger.of(10)),
            id="continuous-processing",
        ),
        pytest.param(
            _spec(
                TumblingEventTimeWindows.of(100),
                trigger=PurgingTrigger.of(ContinuousProcessingTimeTrigger.of(10)),
            ),
            id="purging-continuous-processing",
        ),
        pytest.param(
            _spec(TumblingEventTimeWindows.of(100), trigger=EarlyFirings(10)), id="early-firings"
        ),
    ],
)
def test_event_time_windows_with_processing_time_firings_equal_the_engine(spec):
    group = _OneGroup(spec)
    for step in BATCHES:
        group.batch(*step)
    want = _engine_reference(spec, BATCHES)
    assert group.got == want
    assert ("b", 100, 200, 1, 150, 149) in want  # early, after [0,100) ended at W 149
    at_end = [r for r in want if r[:3] == ("a", 0, 100) and r[5] == 149]
    fires_at_end = isinstance(spec.trigger, EarlyFirings)
    assert at_end == ([("a", 0, 100, 2, 25, 149)] if fires_at_end else [])
    assert group.handle.state.row is None and group.handle.timers == set()


def test_processing_time_past_an_event_time_window_end_fires_once_per_batch():
    """ContinuousProcessingTimeTrigger caps its next firing at the window's
    max_timestamp, an event time: once processing time is past it, every firing registers
    its next timer in the past. Flink fires that timer again at once, forever (a worker
    here would hang); the engine holds it for the next advance, so each micro-batch fires
    the window once (transcripts/timer_registered_in_the_past.yaml)."""
    spec = _spec(TumblingEventTimeWindows.of(100), trigger=ContinuousProcessingTimeTrigger.of(10))
    batches: Batches = [
        (None, 1, [("a", 5)]),
        (None, 150, []),  # 10, 20, ..., 90, then 99 (capped): caught up; 99 again is held
        (None, 160, []),  # the held 99 fires once
        (None, 170, []),
        (LONG_MAX, 180, []),  # the watermark first: the window's cleanup takes its timer
        (LONG_MAX, 190, []),
    ]
    group = _OneGroup(spec)
    with within_seconds(60, "a ContinuousProcessingTimeTrigger past the window end"):
        for step in batches:
            group.batch(*step)
        want = _engine_reference(spec, batches)
    assert group.got == want
    assert sum(want.values()) == 10 + 1 + 1
    assert group.handle.state.row is None and group.handle.timers == set()


def test_pending_event_time_timers_poll_the_next_batch_and_visit_only_due_keys():
    """Spark holds no event-time timer in a ProcessingTime query: the group asks for a
    call in the next micro-batch while its keys wait for the watermark, and a key is
    visited only when Spark's watermark reaches its own timer."""
    spec = _spec(TumblingEventTimeWindows.of(100), trigger=EarlyFirings(1_000))
    group = _OneGroup(spec)
    group.batch(None, 1, [("a", 5), ("b", 150)])
    assert group.handle.timers == {2}  # the next batch; the early timers are at 1000
    stored = StoredGroup.decode(group.handle.state.row, 32)
    assert stored.keys["a"].event_timer == spark_watermark(99)
    before = stored.keys["b"]
    group.batch(99, 3, [])  # a's window fires; b is not visited: its bytes stay as they are
    stored = StoredGroup.decode(group.handle.state.row, 32)
    assert set(stored.keys) == {"b"} and stored.keys["b"] == before
    assert group.got == Counter({("a", 0, 100, 1, 5, 99): 1})
    assert group.handle.timers == {4}


#   processing-time windows of 50 and WatermarkFiring (the default declaration: both)
#   T=1    a@5, b@30           [0,50) per key; event timers at 5 and 30
#   T=10   W 8: a[0,50) fires early (the watermark passed its first element)
#   T=20   W 8, a@40 (its timer stays at 5: fired already)
#   T=49   W 39: b fires early; T=49 is the window's max timestamp: a and b fire
#   T=60   a@70 [50,100); T=99 it fires; nothing is left
REVERSE: Batches = [
    (None, 1, [("a", 5), ("b", 30)]),
    (8, 10, []),
    (8, 20, [("a", 40)]),
    (39, 49, []),
    (39, 60, [("a", 70)]),
    (69, 99, []),
]


def test_processing_time_windows_with_an_event_time_trigger_equal_the_engine():
    spec = _spec(TumblingProcessingTimeWindows.of(50), trigger=WatermarkFiring())
    group = _OneGroup(spec)
    for step in REVERSE:
        group.batch(*step)
    want = _engine_reference(spec, REVERSE)
    assert group.got == want
    assert want[("a", 0, 50, 1, 5, 8)] == 1  # early, by the watermark
    assert want[("b", 0, 50, 1, 30, 39)] == 2  # early at W 39, then at the window's end
    assert group.handle.state.row is None and group.handle.timers == set()


def test_an_event_time_timer_without_a_watermark_fails_naming_the_fix():
    """A trigger declaring both domains on a stream without a watermark runs in
    ProcessingTime; if it really registers an event-time timer, that fails loudly."""
    spec = _spec(TumblingProcessingTimeWindows.of(50), trigger=WatermarkFiring())
    group = _OneGroup(spec, time_mode=TimeMode.PROCESSING_TIME)
    with pytest.raises(WindowSpecError, match=r"event-time timer.*key='a'.*WatermarkStrategy"):
        group.batch(None, 1, [("a", 5)])


# ---------------------------------------------------------------------- a real query


def _wait(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


def _state_rows(spark: Any, checkpoint: str) -> list:
    return read_group_rows(spark, checkpoint)


def _start(
    spark: Any, root: Path, spec: OperatorSpec, mode: str, spark_offset_ms: int = 0
) -> tuple[Any, list[tuple]]:
    (root / "in").mkdir(parents=True)
    df = spark.readStream.schema("key string, v long, ts long").json(str(root / "in"))
    combined = window_stream(
        df,
        StreamPlan(
            key_columns=["key"],
            timestamp_column="ts",
            spec=spec,
            out_of_orderness_ms=0,
            value_columns=VALUE_COLUMNS,
            result_schema=RESULT_SCHEMA,
            result_to_row=describe_row,
            time_mode=mode,
        ),
        spark_offset_ms=spark_offset_ms,
    )
    got: list[tuple] = []
    sinks = {"main": lambda d, b: got.extend(tuple(r) for r in d.collect())}
    trigger = {"processingTime": "500 milliseconds"}
    return write_outputs(combined, sinks, str(root / "checkpoint"), trigger), got


@pytest.mark.spark
def test_event_time_window_fires_early_by_processing_time_and_at_its_end(spark, tmp_path):
    """Tumbling event-time windows of 100 with EarlyFirings every 300 ms of processing
    time: early firings while the window is open, then exactly one firing at its end
    when Spark's watermark passes it, and nothing left in the state store.

    ::

        batch 0: a@5            early firings (1 element) until
        batch 1: a@20           early firings (2 elements)
        batch 2: a@150          W 149 > 99: [0,100) fires once more, at W 149, and ends
        batch 3: end of input   W MAX: [100,200) fires and ends
    """
    spec = _spec(TumblingEventTimeWindows.of(100), trigger=EarlyFirings(300))
    query, got = _start(spark, tmp_path, spec, TimeMode.EVENT_AND_PROCESSING_TIME)
    directory = tmp_path / "in"

    def fired(n: int, window: int = 0) -> bool:
        return any(r[1] == window and r[3] == n for r in got)

    try:
        write_batch_file(directory, 0, [("a", 1, 5)], "long")
        assert _wait(lambda: fired(1), 90), got
        write_batch_file(directory, 1, [("a", 2, 20)], "long")
        assert _wait(lambda: fired(2), 60), got
        write_batch_file(directory, 2, [("a", 3, 150)], "long")
        assert _wait(lambda: any(r[5] == 149 for r in got), 60), got
        write_batch_file(directory, 3, [END], "long")
        assert _wait(lambda: any(r[5] == LONG_MAX for r in got), 60), got
        batches = len(query.recentProgress)
        assert _wait(lambda: len(query.recentProgress) > batches + 1, 30)
    finally:
        query.stop()
    first = [r for r in got if r[1] == 0]
    final = [r for r in first if r[5] == 149]
    assert final == [("a", 0, 100, 2, 3, 149)]  # the window's end, by the watermark
    early = {r[3:] for r in first if r not in final}
    assert early <= {(1, 1, LONG_MIN), (1, 1, 4), (2, 3, 4), (2, 3, 19)}, early
    assert {n for n, *_ in early} == {1, 2}
    assert ("a", 100, 200, 1, 3, LONG_MAX) in got
    assert _state_rows(spark, str(tmp_path / "checkpoint")) == []


@pytest.mark.slow  # waits for a 20 s processing-time window; exact by hand above
@pytest.mark.spark
def test_processing_time_window_fires_early_by_the_watermark(spark, tmp_path):
    """Processing-time windows of 20 s with WatermarkFiring (both domains by default):
    a's window fires early once Spark's watermark passes its first element, then at its
    end by processing time; b's element stays ahead of the watermark, so b's window fires
    at its end only.

    ::

        batch 0: w@0            warms the query up (its Python worker starts)
        batch 1: a@5, b@50      right after a window boundary -> W 49
        batch 2 (no data): a's event-time timer at 5 fires: early, at W 49
        the window's end (processing time): a and b fire, at W 49
    """
    size = 20_000
    spec = _spec(TumblingProcessingTimeWindows.of(size), trigger=WatermarkFiring())
    # w@0 makes a watermark before the epoch: Spark's clock runs shifted (issue 28)
    mode = TimeMode.EVENT_AND_PROCESSING_TIME
    query, got = _start(spark, tmp_path, spec, mode, spark_offset_ms=SPARK_OFFSET_MS)
    directory = tmp_path / "in"
    try:
        write_batch_file(directory, 0, [("w", 0, 0)], "long")
        assert _wait(lambda: _rows_in(query) >= 1, 90)
        time.sleep((size - time.time() * 1000 % size) / 1000 + 0.1)
        write_batch_file(directory, 1, [("a", 1, 5), ("b", 2, 50)], "long")
        assert _wait(lambda: any(r[0] == "b" for r in got), 90), got
    finally:
        query.stop()
    fired = sorted((r[0], r[3], r[4], r[5]) for r in got if r[0] != "w")
    # a: early by the watermark, then at the end; b: at the end
    assert fired == [("a", 1, 1, 49), ("a", 1, 1, 49), ("b", 1, 2, 49)], got
    assert all(r[2] - r[1] == size for r in got)
    assert len({r[1] for r in got if r[0] != "w"}) == 1  # a and b in one window


@pytest.mark.spark
def test_the_public_api_streams_mixed_domains(spark, tmp_path):
    """``from_dataframe(...).window(...).trigger(...)`` picks the mixed time mode from
    the declarations and keeps the stream's watermark: a[0,100) fires at its end by the
    watermark (149, after b@150), b[100,200) early by processing time."""
    (tmp_path / "in").mkdir()
    source = spark.readStream.schema("key string, v long, ts long").json(str(tmp_path / "in"))
    result = (
        tm.from_dataframe(source, timestamp="ts")
        .key_by("key")
        .window(TumblingEventTimeWindows.of(100))
        .trigger(EarlyFirings(300))
        .process(Describe(), RESULT_SCHEMA)
    )
    got: list[tuple] = []
    query = result.write_outputs(
        {"main": lambda d, b: got.extend(tuple(r) for r in d.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"processingTime": "500 milliseconds"},
    )
    try:
        write_batch_file(tmp_path / "in", 0, [("a", 1, 5), ("b", 2, 150)], "long")
        assert _wait(lambda: {r[0] for r in got} == {"a", "b"}, 90), got
    finally:
        query.stop()
    assert [r for r in got if r[0] == "a"] == [("a", 0, 100, 1, 1, 149)]
    assert all(r[1:5] == (100, 200, 1, 2) for r in got if r[0] == "b")


def _rows_in(query: Any) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


class UndeclaredWindowEnd(tm.Trigger[tm.TimeWindow]):
    """Fires at the window's end on the watermark, without declaring timer_domains()."""

    def on_element(self, element: Any, timestamp: Any, window: Any, ctx: Any) -> Any:
        ctx.register_event_time_timer(window.max_timestamp())
        return tm.TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> Any:
        return tm.TriggerResult.FIRE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> Any:
        return tm.TriggerResult.CONTINUE

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())


@pytest.mark.spark
def test_an_undeclared_trigger_on_event_time_windows_ends_with_available_now(spark, tmp_path):
    """It runs on the windows' clock, an EventTime query, which availableNow ends (a
    ProcessingTime query would run no-data micro-batches forever)."""
    (tmp_path / "in").mkdir()
    write_batch_file(tmp_path / "in", 0, [("a", 1, 5)], "long")
    write_batch_file(tmp_path / "in", 1, [("a", 2, 250)], "long")
    source = (
        spark.readStream.schema("key string, v long, ts long")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
    )
    result = (
        tm.from_dataframe(source, timestamp="ts")
        .key_by("key")
        .window(TumblingEventTimeWindows.of(100))
        .trigger(UndeclaredWindowEnd())
        .process(Describe(), RESULT_SCHEMA)
    )
    got: list[tuple] = []
    query = result.write_outputs(
        {"main": lambda d, b: got.extend(tuple(r) for r in d.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    try:
        assert query.awaitTermination(120), "the query did not end"
    finally:
        query.stop()
    assert got == [("a", 0, 100, 1, 1, 249)]


@pytest.mark.spark
def test_available_now_on_a_processing_time_query_is_refused_naming_the_trigger(spark, tmp_path):
    source = spark.readStream.schema("key string, v long, ts long").json(str(tmp_path))
    result = (
        tm.from_dataframe(source)
        .key_by("key")
        .window(tm.TumblingProcessingTimeWindows.of(100))
        .process(Describe(), RESULT_SCHEMA)
    )
    with pytest.raises(WindowSpecError, match=r"availableNow.*never end.*'processingTime'"):
        result.write_outputs(
            {"main": lambda d, b: None},
            checkpoint=str(tmp_path / "checkpoint"),
            trigger={"availableNow": True},
        )
