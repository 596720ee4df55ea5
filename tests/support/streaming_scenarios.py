"""Scenarios for the Structured Streaming runner, and the engine reference they must equal.

A scenario is a window pipeline and a list of micro-batches of ``(key, v, ts)`` rows.
:func:`engine_reference` feeds the engine exactly what the streaming runner promises to
equal: each batch's elements, then the watermark Spark moves to after it
(``max_ts - out_of_orderness - 1``), and ``Long.MAX_VALUE`` after an end-of-input marker.
:class:`FileStream` feeds the same batches to a file-source stream, one JSON file per
micro-batch, and collects every output by batch id (idempotently).

Run as a script, it is the child process of the kill -9 test: it runs a scenario to the
end with ``availableNow`` and parquet sinks written by batch id.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import Row
from pyspark.sql.types import LongType, StringType, StructField, StructType

from tidemark import (
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    ContinuousEventTimeTrigger,
    CountEvictor,
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    OutputTag,
    ProcessWindowFunction,
    PurgingTrigger,
    SlidingEventTimeWindows,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
)
from tidemark._engine.create import create_window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.spark.streaming import (
    DROPPED_OUTPUT,
    END_OF_INPUT_MS,
    StreamPlan,
    window_stream,
    write_outputs,
)
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS
from tidemark.time import LONG_MAX, TimeDomain

# Workers cannot import this module: ship its functions and classes by value.
if __name__ != "__main__":
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

LATE = OutputTag("late")
RESULT_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("start", LongType()),
        StructField("end", LongType()),
        StructField("n", LongType()),
        StructField("total", LongType()),
        StructField("watermark", LongType()),
    ]
)
VALUE_COLUMNS = ["key", "v", "ts"]
END = ("_end", 0, END_OF_INPUT_MS)


class Describe(ProcessWindowFunction):
    """(key, start, end, count, sum of v, watermark seen at firing) of a window."""

    def __init__(self, fired_log: str | None = None):
        self.fired_log = fired_log

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        window = context.window()
        start, end = getattr(window, "start", -1), getattr(window, "end", -1)
        if self.fired_log:
            with open(self.fired_log, "a") as f:
                f.write(f"{key} {start}\n")
        total = sum(e.v for e in elements)
        yield (key, start, end, len(elements), total, context.current_watermark())


class EarlyFirings(Trigger):
    """FIRE at the window's end by the watermark, and early every ``interval_ms`` of
    processing time (Beam's ``AfterWatermark`` with early firings): it declares both time
    domains, for event-time windows."""

    def __init__(self, interval_ms: int):
        self.interval_ms = interval_ms
        self.next_early = ValueStateDescriptor("next-early")

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.next_early)
        if state.value() is None:
            now = ctx.get_current_processing_time()
            self._arm(now - now % self.interval_ms + self.interval_ms, state, ctx)
        return TriggerResult.CONTINUE

    def _arm(self, time, state, ctx):  # type: ignore[no-untyped-def]
        state.update(time)
        ctx.register_processing_time_timer(time)

    def on_processing_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        state = ctx.get_partitioned_state(self.next_early)
        if state.value() != time:
            return TriggerResult.CONTINUE
        self._arm(time + self.interval_ms, state, ctx)
        return TriggerResult.FIRE

    def on_event_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def clear(self, window, ctx):  # type: ignore[no-untyped-def]
        ctx.delete_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.next_early)
        if state.value() is not None:
            ctx.delete_processing_time_timer(state.value())
        state.clear()

    def timer_domains(self) -> frozenset[TimeDomain]:
        return frozenset((TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME))


class WatermarkFiring(Trigger):
    """For processing-time windows: FIRE at the window's end (processing time), and early
    once the watermark passes the window's first element (an event-time timer). It keeps
    the default declaration of a custom trigger: both time domains."""

    def __init__(self) -> None:
        self.first = ValueStateDescriptor("first-timestamp")

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        ctx.register_processing_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.first)
        if state.value() is None:
            state.update(timestamp)
            ctx.register_event_time_timer(timestamp)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        first = ctx.get_partitioned_state(self.first).value()
        return TriggerResult.FIRE if time == first else TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def clear(self, window, ctx):  # type: ignore[no-untyped-def]
        ctx.delete_processing_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.first)
        if state.value() is not None:
            ctx.delete_event_time_timer(state.value())
        state.clear()


def _sum_rows(a: Any, b: Any) -> Any:
    return Row(key=a.key, v=a.v + b.v, ts=max(a.ts, b.ts))


def describe_row(result: Any, timestamp: int) -> tuple:
    return tuple(result)


@dataclass
class Scenario:
    name: str
    spec: OperatorSpec
    batches: list[list[tuple[str, int, int]]]
    out_of_orderness_ms: int = 0
    late_tag: OutputTag | None = None
    timestamp_type: str = "long"
    idleness_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    max_parallelism: int | None = None  # key groups; None: the runner's default


def _spec(assigner: Any, **kwargs: Any) -> OperatorSpec:
    function = kwargs.pop("function", None) or Describe()
    logic = window_logic(*function) if isinstance(function, tuple) else window_logic(function)
    return OperatorSpec(assigner, logic, **kwargs)


#   size 10, allowed lateness 5, out-of-orderness 2      W after batch: 2 12 22 27 MAX
#   batch 2: a@2 (behind Spark's previous watermark 2) -> late firing of a[0,10)
#            a@11 behind the watermark 12, window [10,20) still open -> added
#   batch 3: a@12 -> late firing of a[10,20); a@1, b@9 (windows cleaned) -> side output
LATENESS = Scenario(
    "tumbling_lateness_side_output",
    _spec(TumblingEventTimeWindows.of(10), allowed_lateness_ms=5, late_data_tag=LATE),
    [
        [("a", 1, 1), ("a", 2, 3), ("b", 3, 5)],
        [("a", 4, 12), ("a", 5, 8), ("b", 6, 15)],
        [("a", 7, 25), ("a", 8, 2), ("a", 9, 11)],
        [("b", 10, 30), ("a", 11, 21), ("a", 12, 12), ("a", 13, 1), ("b", 14, 9)],
        [END],
    ],
    out_of_orderness_ms=2,
    late_tag=LATE,
)

# LATENESS's stream under a Dataflow trigger: early panes every two elements, the on-time
# pane, a late pane per late element, ACCUMULATING (pane state in the state store).
PANES = Scenario(
    "dataflow_panes_accumulating",
    _spec(
        TumblingEventTimeWindows.of(10),
        trigger=AfterWatermark(early=AfterCount(2), late=AfterCount(1)),
        accumulation_mode=AccumulationMode.ACCUMULATING,
        allowed_lateness_ms=5,
        late_data_tag=LATE,
    ),
    LATENESS.batches,
    out_of_orderness_ms=2,
    late_tag=LATE,
)

SCENARIOS = {
    s.name: s
    for s in [
        LATENESS,
        PANES,
        Scenario(
            "tumbling_dropped_without_tag",
            _spec(TumblingEventTimeWindows.of(10)),
            [[("a", 1, 1), ("b", 2, 25)], [("a", 3, 4), ("a", 4, 26)], [END]],
        ),
        Scenario(
            "sliding_reduce_timestamp_column",
            _spec(SlidingEventTimeWindows.of(10, 5), function=(_sum_rows, Describe())),
            [[("a", 1, 1), ("a", 2, 7)], [("a", 3, 12), ("b", 4, 3)], [("a", 5, 21)], [END]],
            out_of_orderness_ms=3,
            timestamp_type="timestamp",
        ),
        Scenario(
            # a: [1,6) and [10,15) in batch 0; 5 bridges them in batch 1 (a merge across
            # batches); 30 -> new session; b: one session growing over three batches.
            "session_merges_across_batches",
            _spec(EventTimeSessionWindows.with_gap(5)),
            [
                [("a", 1, 1), ("a", 2, 10), ("b", 3, 0)],
                [("a", 4, 5), ("b", 5, 4)],
                [("a", 6, 30), ("b", 7, 8)],
                [("b", 8, 40)],
                [END],
            ],
            out_of_orderness_ms=10,
        ),
        Scenario(
            "count_window_purging",
            _spec(GlobalWindows.create(), trigger=PurgingTrigger.of(CountTrigger.of(3))),
            [[("a", 1, 1), ("a", 2, 2)], [("a", 3, 3), ("a", 4, 4), ("b", 5, 1)], [("a", 5, 9)]],
        ),
        Scenario(
            "count_window_sliding_evictor",
            _spec(GlobalWindows.create(), trigger=CountTrigger.of(2), evictor=CountEvictor.of(3)),
            [[("a", 1, 1), ("a", 2, 2), ("a", 3, 3)], [("a", 4, 4), ("a", 5, 5)], [("a", 6, 6)]],
        ),
        Scenario(
            "continuous_event_time_trigger",
            _spec(TumblingEventTimeWindows.of(100), trigger=ContinuousEventTimeTrigger.of(20)),
            [[("a", 1, 5), ("a", 2, 18)], [("a", 3, 45)], [("a", 4, 61), ("b", 5, 70)], [END]],
        ),
        Scenario(
            "tumbling_count_evictor",
            _spec(TumblingEventTimeWindows.of(10), evictor=CountEvictor.of(2)),
            [[("a", 1, 1), ("a", 2, 2)], [("a", 3, 3), ("a", 4, 12)], [("a", 5, 15)], [END]],
        ),
        Scenario(
            # b goes idle after batch 0; a's timestamps move the watermark and close b's
            # window in a batch without b's input (handleExpiredTimer). Per-key idleness
            # needs no with_idleness (which runs in ProcessingTime mode, see
            # test_streaming_idle.py): Spark's watermark is global.
            "idle_key_closed_by_timer",
            _spec(TumblingEventTimeWindows.of(10)),
            [[("a", 1, 1), ("b", 2, 2)], [("a", 3, 11)], [("a", 4, 22)]],
        ),
    ]
}


# ---------------------------------------------------------------------- reference


def engine_reference(scenario: Scenario) -> dict[str, Any]:
    """What the engine emits fed each batch, then the watermark Spark moves to."""
    op = create_window_operator(scenario.spec)
    max_ts: int | None = None
    ended = False
    for batch in scenario.batches:
        for key, v, ts in batch:
            if ts >= END_OF_INPUT_MS:
                ended = True
                continue
            op.process_element(key, Row(key=key, v=v, ts=_ts_value(ts, scenario)), ts)
            max_ts = ts if max_ts is None else max(max_ts, ts)
        if max_ts is None:
            continue
        watermark = LONG_MAX if ended else max_ts - scenario.out_of_orderness_ms - 1
        if watermark > op.current_watermark:
            op.process_watermark(watermark)
    late = op.side_outputs.get(scenario.late_tag, []) if scenario.late_tag else []
    return {
        "main": Counter(describe_row(v, ts) for v, ts in op.output),
        "late": Counter(tuple(v) for v, _ in late),
        "dropped": op.num_late_records_dropped,
    }


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _ts_value(ts: int, scenario: Scenario) -> Any:
    if scenario.timestamp_type == "timestamp":
        return (EPOCH + datetime.timedelta(milliseconds=ts)).replace(tzinfo=None)
    return ts


def summarize(outputs: dict[tuple[str, int], list[tuple]]) -> dict[str, Any]:
    """Collected sink rows by (output, batch id) -> the shape of :func:`engine_reference`."""
    main: Counter = Counter()
    late: Counter = Counter()
    dropped = 0
    for (name, _), rows in outputs.items():
        if name == "main":
            main.update(rows)
        elif name == "late":
            late.update(rows)
        elif name == DROPPED_OUTPUT:
            dropped += sum(r[0] for r in rows)
    return {"main": main, "late": late, "dropped": dropped}


# ---------------------------------------------------------------------- file stream


def _json_line(key: str, v: int, ts: int, timestamp_type: str) -> str:
    value: Any = ts
    if timestamp_type == "timestamp":
        value = (EPOCH + datetime.timedelta(milliseconds=ts)).isoformat()
    return json.dumps({"key": key, "v": v, "ts": value})


def write_batch_file(directory: Path, index: int, rows: list, timestamp_type: str) -> None:
    """One JSON file per micro-batch, renamed into place so the source sees it whole.

    The file source takes files in modification-time order, so the batch index is
    written into the mtime too (files written within one clock tick would tie).
    """
    tmp = directory.parent / f".tmp-{index:04d}.json"
    tmp.write_text("".join(_json_line(*r, timestamp_type) + "\n" for r in rows))
    stamp = time.time() - 3600 + index
    os.utime(tmp, (stamp, stamp))
    os.replace(tmp, directory / f"batch-{index:04d}.json")


def keyed_file_stream(spark: Any, directory: Path, batches: list[list[tuple]]) -> Any:
    """A file stream of ``(k, ts, n)`` rows, each batch of ``batches`` one file and one
    micro-batch (the file source orders by mtime, so each file's is its index)."""
    directory.mkdir()
    for n, batch in enumerate(batches):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("".join(json.dumps({"k": k, "ts": t, "n": v}) + "\n" for k, t, v in batch))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    return (
        spark.readStream.schema("k string, ts long, n long")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )


def combined_stream(spark: Any, scenario: Scenario, input_dir: Path) -> Any:
    schema = f"key string, v long, ts {scenario.timestamp_type}"
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(input_dir))
    plan = StreamPlan(
        scenario.spec,
        key_columns=("key",),
        value_columns=tuple(VALUE_COLUMNS),
        timestamp_column="ts",
        result_schema=RESULT_SCHEMA,
        result_to_row=describe_row,
        out_of_orderness_ms=scenario.out_of_orderness_ms,
        idleness_ms=scenario.idleness_ms,
    )
    return window_stream(
        df,
        plan,
        max_parallelism=scenario.max_parallelism,
        # scenarios run from the epoch on: their first watermarks need Spark's clock shifted
        spark_offset_ms=SPARK_OFFSET_MS,
    )


class FileStream:
    """A scenario's query over a directory of JSON files, with collecting sinks."""

    def __init__(self, spark: Any, scenario: Scenario, root: Path):
        self.spark, self.scenario, self.root = spark, scenario, root
        self.input_dir = root / "in"
        self.input_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint = str(root / "checkpoint")
        self.outputs: dict[tuple[str, int], list[tuple]] = {}
        self.fed = 0
        self.query: Any = None

    def _sink(self, name: str) -> Callable[[Any, int], None]:
        def sink(df: Any, batch_id: int) -> None:
            self.outputs[(name, batch_id)] = [tuple(r) for r in df.collect()]

        return sink

    def start(self) -> FileStream:
        names = ["main", DROPPED_OUTPUT] + (["late"] if self.scenario.late_tag else [])
        combined = combined_stream(self.spark, self.scenario, self.input_dir)
        sinks = {name: self._sink(name) for name in names}
        self.query = write_outputs(combined, sinks, self.checkpoint)
        return self

    def feed(self, count: int | None = None) -> None:
        """Write the next ``count`` batches (default: all), one file and batch each."""
        batches = self.scenario.batches
        stop = len(batches) if count is None else min(len(batches), self.fed + count)
        while self.fed < stop:
            rows = batches[self.fed]
            write_batch_file(self.input_dir, self.fed, rows, self.scenario.timestamp_type)
            self.fed += 1
            self.query.processAllAvailable()

    def stop(self) -> None:
        self.query.stop()

    def restarted(self) -> FileStream:
        """A new query on this stopped one's checkpoint, input files and outputs, started."""
        again = FileStream(self.spark, self.scenario, self.root)
        again.fed, again.outputs = self.fed, self.outputs
        return again.start()


# ---------------------------------------------------------------------- kill -9 child


def parquet_sink(root: str, name: str, pause_after: int | None) -> Callable[[Any, int], None]:
    """Overwrite ``root/name/batch=<id>``: a replayed batch replaces its own rows."""

    def sink(df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(f"{root}/{name}/batch={batch_id}")
        if pause_after is not None and batch_id >= pause_after:
            Path(f"{root}/_paused").write_text(str(batch_id))
            time.sleep(600)  # the test kills the process here, before the batch commits

    return sink


def child_main(argv: list[str]) -> None:
    scenario_name, root, pause = argv[0], Path(argv[1]), argv[2]
    from tidemark.spark.runtime.session import get_spark

    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.tidemark.streaming.stateCompactBytes": "2048",
    }
    layout = os.environ.get("TIDEMARK_TEST_STATE_LAYOUT")  # as the test session's (conftest)
    if layout:
        conf["spark.tidemark.streaming.stateLayout"] = layout
    spark = get_spark(master="local[2]", conf=conf)
    scenario = SCENARIOS[scenario_name]
    pause_after = None if pause == "none" else int(pause)
    combined = combined_stream(spark, scenario, root / "in")
    sinks = {"main": parquet_sink(str(root / "out"), "main", pause_after)}
    sinks["late"] = parquet_sink(str(root / "out"), "late", None)
    sinks[DROPPED_OUTPUT] = parquet_sink(str(root / "out"), "dropped", None)
    query = write_outputs(combined, sinks, str(root / "checkpoint"), {"availableNow": True})
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    child_main(sys.argv[1:])
