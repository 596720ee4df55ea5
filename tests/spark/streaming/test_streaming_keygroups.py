"""Keys sharing a key group keep their own clocks: the processor driven by hand.

One group holds keys a and b. A trigger registers an event-time timer at each element's
timestamp, so an element behind the watermark leaves a timer that only the next
watermark advance fires (as in the engine, which is fed a watermark only when it rises).

::

    call 1  W none   a@50 b@60                     timers a:50  b:60
    call 2  W 55     a@52      -> a:50 fires        timers a:52 (behind W)  b:60
    call 3  W 55     a@53 b@70 -> b advances to 55; a stands at 55: its 52 must not fire
    call 4  W 200              -> a:52, a:53, b:60, b:70 fire

The engine reference: E1, W 55, E2, (W 55 again: not fed), E3, W 200.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pandas as pd
from pyspark.sql import Row
from spark_state_fakes import GroupState, Handle, TimerValues
from streaming_scenarios import RESULT_SCHEMA, VALUE_COLUMNS, Describe, _spec, describe_row

from tidemark import TriggerResult, TumblingEventTimeWindows
from tidemark._engine.create import create_window_operator
from tidemark.spark.protocol.columns import TS
from tidemark.spark.streaming.worker.bindings import WindowGroupFunction
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
from tidemark.spark.streaming.worker.state import StoredGroup
from tidemark.triggers import Trigger


class TimerAtEachElement(Trigger):
    """FIRE at an event-time timer registered at every element's timestamp."""

    def on_element(self, element: Any, timestamp: Any, window: Any, ctx: Any) -> TriggerResult:
        ctx.register_event_time_timer(timestamp)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.FIRE

    def clear(self, window: Any, ctx: Any) -> None:
        pass


SPEC = _spec(TumblingEventTimeWindows.of(1000), trigger=TimerAtEachElement(), function=Describe())
CALLS: list[tuple[int | None, list[tuple[str, int]]]] = [
    (None, [("a", 50), ("b", 60)]),
    (55, [("a", 52)]),
    (55, [("a", 53), ("b", 70)]),
    (200, []),
]


def _config() -> ProcessorConfig:
    return ProcessorConfig(
        spec=SPEC,
        time_mode="EventTime",
        value_names=tuple(VALUE_COLUMNS),
        value_types=("StringType", "LongType", "LongType"),
        value_positions=(0, 1, 2),
        result_schema=RESULT_SCHEMA,
        result_to_row=describe_row,
    )


def _frame(rows: list[tuple[str, int]]) -> pd.DataFrame:
    records = [(k, ts, ts, ts) for k, ts in rows]
    return pd.DataFrame(records, columns=[*VALUE_COLUMNS, TS], dtype=object)


def _streamed() -> tuple[Counter, Handle]:
    processor, handle = WindowStatefulProcessor(_config()), Handle()
    processor.init(handle)  # type: ignore[arg-type]
    got: Counter = Counter()
    for watermark, rows in CALLS:
        values = TimerValues.at(watermark)
        if rows:
            frames = processor.handleInputRows((0,), iter([_frame(rows)]), values)  # type: ignore[arg-type]
        else:
            frames = processor.handleExpiredTimer((0,), values, None)  # type: ignore[arg-type]
        for frame in frames:
            got.update(tuple(r)[2:8] for r in frame.itertuples(index=False))
    return got, handle


def _engine() -> Counter:
    op = create_window_operator(SPEC)
    for watermark, rows in CALLS:
        if watermark is not None and watermark > op.current_watermark:
            op.process_watermark(watermark)
        for key, ts in rows:
            op.process_element(key, Row(key=key, v=ts, ts=ts), ts)
    return Counter(describe_row(v, ts) for v, ts in op.output)


def test_keys_of_one_group_keep_their_own_watermark():
    got, handle = _streamed()
    want = _engine()
    assert got == want
    # a's timer 52 fired with W 200, not in call 3: the window held 50, 52 and 53 then
    assert ("a", 0, 1000, 3, 155, 200) in want
    # every window is still open (no cleanup before 999): one group row, both keys
    group = StoredGroup.decode(handle.state.row, 32)
    assert set(group.keys) == {"a", "b"}
    assert handle.timers == {group.event_timer}


def test_applyinpandaswithstate_binding_runs_the_same_calls():
    """The same calls through WindowGroupFunction: Spark calls a group without rows only
    once its timeout is behind the watermark; the timeout is the group's timer less 1."""
    function = WindowGroupFunction(_config())
    assert function.timeout() == "EventTimeTimeout"
    row, timeout, got = None, None, Counter()
    for watermark, rows in CALLS:
        spark_wm = TimerValues.at(watermark).watermark_ms
        timed_out = not rows
        if timed_out and not (timeout is not None and timeout < spark_wm):
            continue
        state = GroupState(row, spark_wm, timed_out)
        for frame in function((0,), iter([_frame(rows)]), state):
            got.update(tuple(r)[2:8] for r in frame.itertuples(index=False))
        row, timeout = state.row, state.timeout
    assert got == _engine()
    group = StoredGroup.decode(row, 32)
    assert set(group.keys) == {"a", "b"}
    assert timeout == group.event_timer - 1


def test_applyinpandaswithstate_binding_processing_time_timeout():
    """A processing-time window through WindowGroupFunction: the group's timeout is its
    timer less 1 ms, as a duration from the batch's time; Spark calls the group when its
    timeout is behind a later batch's time, the window fires and the row is removed."""
    from tidemark import TumblingProcessingTimeWindows

    config = dataclasses.replace(
        _config(),
        spec=_spec(TumblingProcessingTimeWindows.of(10_000)),
        time_mode="ProcessingTime",
    )
    function = WindowGroupFunction(config)
    assert function.timeout() == "ProcessingTimeTimeout"
    state = GroupState(None, 0, False, now_ms=1_000)
    assert list(function((0,), iter([_frame([("a", 5), ("b", 6), ("a", 7)])]), state)) == []
    # the window [0, 10000) fires at processing time 9999: the timeout is 9998
    assert state.timeout == 9_998 and StoredGroup.decode(state.row, 32).processing_timer == 9_999
    for now in (5_000, 9_998):  # Spark calls the group once 9998 < the batch's time
        assert not state.timeout < now
    fired = GroupState(state.row, 0, True, now_ms=10_000)
    rows = [
        tuple(r)[2:7] for f in function((0,), iter([]), fired) for r in f.itertuples(index=False)
    ]
    assert sorted(rows) == [("a", 0, 10_000, 2, 12), ("b", 0, 10_000, 1, 6)]
    assert fired.row is None and fired.timeout is None  # no key left: removed, no timeout
