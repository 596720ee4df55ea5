"""Panes on Spark: a window under a Dataflow trigger gives the same panes, pane columns
included, in the harness (the engine), BATCH, a replay, a Structured Streaming query
(across a restart too) and a chain; RETRACTING rows; the definition errors.

The stream of every Spark case (tumbling 10 s windows per user, out-of-orderness 0, so the
watermark after an element is the largest timestamp so far - 1; allowed lateness 10 s)::

    arrival  user  v   ts       watermark after   (early: every 2 elements, late: every 1)
    1        a     1   1_000    999
    2        a     2   2_000    1_999             a [0,10): EARLY pane 0 (1, 2)
    3        b     5   3_000    2_999
    4        a     4   12_000   11_999            a, b [0,10): ON_TIME
    5        a     8   3_000    11_999            a [0,10): LATE (8)
    6        b     1   25_000   24_999            a [10,20): ON_TIME; [0,10) windows expire
    end                         +inf              b [20,30): ON_TIME

Streaming feeds arrivals 1-3, 4, 5, 6 and the end as five micro-batches.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.types import LongType, StringType, StructField, StructType

import tidemark as tm
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import WindowSpecError
from tidemark.panes import AccumulationMode, PanedResult, PaneInfo, PaneTiming
from tidemark.spark import aggregations, execution
from tidemark.spark.plan import WindowOp
from tidemark.spark.protocol.codec import result_tuple
from tidemark.spark.protocol.pane_columns import paned_schema
from tidemark.spark.streaming.driver.from_plan import time_mode_of
from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.testing import Watermark, WindowOperatorHarness
from tidemark.time import LONG_MAX

SCHEMA = "user string, v long, ts long, arrival long"
NAMES = ["user", "v", "ts", "arrival"]
ROWS = [  # arrival: the order, and a replay's processing time (ms)
    ("a", 1, 1_000, 1_000),
    ("a", 2, 2_000, 2_000),
    ("b", 5, 3_000, 3_000),
    ("a", 4, 12_000, 4_000),
    ("a", 8, 3_000, 5_000),
    ("b", 1, 25_000, 6_000),
]
BATCHES = [ROWS[:3], ROWS[3:4], ROWS[4:5], ROWS[5:], [("_end", 0, END_OF_INPUT_MS, 7_000)]]
TEN_SECONDS = tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(10))
LATENESS_MS = 10_000
LISTING_SCHEMA = "user string, values string, seen_index long"
PANES_SCHEMA = "user string, panes string, pane_count long"


def dataflow_trigger(early: str = "count") -> Any:
    """Early panes every 2 elements (or 1.5 s of processing time after a pane's first
    element), a late pane for every late element."""
    first = tm.AfterCount(2) if early == "count" else tm.AfterProcessingTime(1_500)
    return tm.AfterWatermark(early=first, late=tm.AfterCount(1))


class Listing(tm.ProcessWindowFunction):
    """(user, the window's values in order, the pane index ``context.pane()`` says)."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        values = ",".join(str(e.v) for e in sorted(elements, key=lambda e: (e.ts, e.v)))
        yield (key, values, context.pane().index)


FUNCTIONS: dict[str, tuple[Any, str | None]] = {
    "sum": (aggregations.Sum("v"), None),
    "process": (Listing(), LISTING_SCHEMA),
}
WIDTHS = {"sum": len(NAMES), "process": 3}  # the functions' own columns


# ---------------------------------------------------------------- the references


def harness(function: str, mode: AccumulationMode, early: str = "count") -> WindowOperatorHarness:
    return WindowOperatorHarness(
        TEN_SECONDS,
        FUNCTIONS[function][0],
        key_selector=lambda row: row.user,
        trigger=dataflow_trigger(early),
        allowed_lateness=LATENESS_MS,
        accumulation_mode=mode,
    )


def pane_rows(h: WindowOperatorHarness, mode: AccumulationMode, width: int) -> Counter:
    """The harness's results as Spark rows: own columns (``width``; None, the result of
    a reduce's empty pane, is a row of nulls), then the pane columns."""
    rows: Counter = Counter()
    for value, _, pane, retraction in h.pane_output():
        own = (None,) * width if value is None else tuple(value)
        row = (*own, pane.timing.name, pane.index, pane.is_last)
        rows[row + ((retraction,) if mode is AccumulationMode.RETRACTING else ())] += 1
    return rows


def _element(row: tuple) -> Row:
    return Row(**dict(zip(NAMES, row)))


def reference_batch(function: str, mode: AccumulationMode) -> Counter:
    """Flink BATCH: each key's elements by timestamp, then +inf."""
    total: Counter = Counter()
    for user in sorted({r[0] for r in ROWS}):
        h = harness(function, mode)
        for row in sorted((r for r in ROWS if r[0] == user), key=lambda r: (r[2], r[1])):
            h.process_element(_element(row), row[2])
        h.process_watermark(LONG_MAX)
        total += pane_rows(h, mode, WIDTHS[function])
    return total


def reference_stream(function: str, mode: AccumulationMode, batches: list[list]) -> Counter:
    """The elements in arrival order, the watermark Spark moves to after each batch,
    +inf at the end (``tests/support/differential.py``'s streaming reference)."""
    h = harness(function, mode)
    max_ts = None
    for batch in batches:
        for row in batch:
            if row[2] >= END_OF_INPUT_MS:
                h.process_watermark(LONG_MAX)
                continue
            h.process_element(_element(row), row[2])
            max_ts = row[2] if max_ts is None else max(max_ts, row[2])
        if max_ts is not None:
            h.process_watermark(max_ts - 1)
    return pane_rows(h, mode, WIDTHS[function])


def reference_replay(function: str, mode: AccumulationMode, early: str = "count") -> Counter:
    """A replay's clocks (``tests/support/spark_transcripts.py``): before each element, its
    arrival time (processing time), then the watermark in force when it arrived (the
    largest timestamp before it - 1); +inf after the last."""
    h = harness(function, mode, early)
    max_ts = None
    for row in ROWS:
        if early == "processing":
            h.set_processing_time(row[3])
        if max_ts is not None and max_ts - 1 > h.current_watermark:
            h.process_watermark(max_ts - 1)
        h.process_element(_element(row), row[2])
        max_ts = row[2] if max_ts is None else max(max_ts, row[2])
    h.process_watermark(LONG_MAX)
    return pane_rows(h, mode, WIDTHS[function])


# ---------------------------------------------------------------- Spark


def pipeline(
    df: Any, function: str, mode: AccumulationMode, replay: bool = False, early: str = "count"
) -> Any:
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(0)
    streaming_or_replay = replay or df.isStreaming
    stream = tm.from_dataframe(
        df,
        timestamp="ts",
        order_by="arrival" if replay else None,
        processing_time="arrival" if early == "processing" else None,
        watermark_strategy=strategy if streaming_or_replay else None,
    )
    windowed = (
        stream.key_by("user")
        .window(TEN_SECONDS)
        .trigger(dataflow_trigger(early))
        .allowed_lateness(LATENESS_MS)
        .accumulation_mode(mode)
    )
    if function == "sum":
        return windowed.sum("v")
    return windowed.process(*FUNCTIONS[function])


def collected(result: Any) -> Counter:
    return Counter(tuple(r) for r in result.to_dataframe().collect())


def write_batches(directory: Path, batches: list[list], first: int = 0) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n, rows in enumerate(batches, first):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("".join(json.dumps(dict(zip(NAMES, r))) + "\n" for r in rows))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def run_stream(spark: Any, root: Path, build: Any, parts: list[list[list]]) -> Counter:
    """``build(streaming DataFrame)`` on a JSON file stream, one file per micro-batch;
    each of ``parts`` (lists of batches) run by a query of its own, each carrying on
    from the checkpoint. The results' rows."""
    rows: dict[int, list] = {}
    first = 0
    for part in parts:
        write_batches(root / "in", part, first)
        first += len(part)
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(root / "in"))

        def sink(batch: Any, batch_id: int) -> None:
            rows[batch_id] = [tuple(r) for r in batch.collect()]  # a replayed batch replaces

        query = build(df).write_outputs(
            {"main": sink}, checkpoint=str(root / "checkpoint"), trigger={"availableNow": True}
        )
        query.awaitTermination(600)
        assert query.exception() is None
    return Counter(row for batch in rows.values() for row in batch)


def summing(mode: AccumulationMode) -> Any:
    """``build`` for :func:`run_stream`: the per-user sum in ``mode``."""
    return lambda df: pipeline(df, "sum", mode)


MODES = [
    pytest.param("sum", AccumulationMode.DISCARDING, id="sum-discarding"),
    pytest.param("process", AccumulationMode.RETRACTING, id="process-retracting"),
]


@pytest.mark.spark
@pytest.mark.parametrize(("function", "mode"), MODES)
def test_batch_gives_the_harness_panes(spark, function, mode):
    df = spark.createDataFrame(ROWS, SCHEMA)
    result = pipeline(df, function, mode)
    assert collected(result) == reference_batch(function, mode)
    # a shorthand sum has a SQL closed form only without panes
    assert execution.mode_of(result.plan, spark) is execution.ExecutionMode.BATCH


@pytest.mark.spark
@pytest.mark.parametrize(
    ("function", "mode", "early"),
    [
        *[pytest.param(*p.values, "count", id=p.id) for p in MODES],
        pytest.param("sum", AccumulationMode.ACCUMULATING, "processing", id="processing-time"),
    ],
)
def test_a_replay_gives_the_harness_panes(spark, function, mode, early):
    df = spark.createDataFrame(ROWS, SCHEMA)
    result = pipeline(df, function, mode, replay=True, early=early)
    expected = reference_replay(function, mode, early)
    assert collected(result) == expected
    timings = {row[-3 if mode is not AccumulationMode.RETRACTING else -4] for row in expected}
    assert timings == {"EARLY", "ON_TIME", "LATE"}  # the case reaches every timing


@pytest.mark.spark
def test_retracting_rows_take_back_the_pane_before(spark):
    """RETRACTING: each pane after the first is preceded by the previous pane's rows,
    flagged; summing ``v`` with the flag's sign gives the last pane's total."""
    df = spark.createDataFrame(ROWS, SCHEMA)
    result = pipeline(df, "sum", AccumulationMode.RETRACTING, replay=True)
    frame = result.to_dataframe()
    assert frame.columns[-4:] == ["pane_timing", "pane_index", "pane_is_last", "is_retraction"]
    rows = [r.asDict() for r in frame.filter("user = 'a' and ts < 10000").collect()]
    assert sum(-r["v"] if r["is_retraction"] else r["v"] for r in rows) == 1 + 2 + 8
    assert any(r["is_retraction"] for r in rows)
    assert collected(result) == reference_replay("sum", AccumulationMode.RETRACTING)


@pytest.mark.spark
@pytest.mark.parametrize(
    "restart_after", [pytest.param(None, id="one-query"), pytest.param(2, id="restarted")]
)
def test_streaming_gives_the_harness_panes_across_a_restart(spark, tmp_path, restart_after):
    """A query stopped after the early pane (mid-window) and restarted from its
    checkpoint gives the panes an uninterrupted query gives."""
    mode = AccumulationMode.RETRACTING
    parts = [BATCHES] if restart_after is None else [BATCHES[:2], BATCHES[2:]]
    got = run_stream(spark, tmp_path, summing(mode), parts)
    assert got == reference_stream("sum", mode, BATCHES)


@pytest.mark.spark
def test_a_restart_with_another_accumulation_mode_is_refused(spark, tmp_path):
    run_stream(spark, tmp_path, summing(AccumulationMode.DISCARDING), [BATCHES[:1]])
    with pytest.raises(WindowSpecError) as error:
        run_stream(spark, tmp_path, summing(AccumulationMode.ACCUMULATING), [BATCHES[1:2]])
    message = str(error.value)
    assert "accumulation mode was DISCARDING, now ACCUMULATING" in message
    assert "start a new checkpoint" in message
    assert spark.streams.active == []


class PaneCount(tm.ProcessWindowFunction):
    """A second window over the first's results: (user, its rows' panes and sums)."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        panes = sorted(f"{e.pane_timing}{e.pane_index}:{e.v}" for e in elements)
        yield (key, ";".join(panes), len(panes))


TWENTY_SECONDS = tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(20))
PANED_NAMES = [*NAMES, "pane_timing", "pane_index", "pane_is_last"]


def chained(df: Any) -> Any:
    """Per user: 10 s panes, then a 20 s window listing them. ACCUMULATING: a DISCARDING
    pane of a reduce that took no element is a row of nulls, the key column too, which
    a keyed window refuses."""
    first = pipeline(df, "sum", AccumulationMode.ACCUMULATING)
    return first.key_by("user").window(TWENTY_SECONDS).process(PaneCount(), PANES_SCHEMA)


def second_window() -> WindowOperatorHarness:
    return WindowOperatorHarness(TWENTY_SECONDS, PaneCount(), key_selector=lambda r: r.user)


@pytest.mark.spark
def test_a_window_on_a_dataflow_windows_results_reads_its_pane_columns(spark):
    """BATCH: the second window gets the first's results with their pane columns."""
    h = second_window()
    # a sum keeps its window's first element's ``ts``: the result's window is its 10 s
    for row in reference_batch("sum", AccumulationMode.ACCUMULATING).elements():
        h.process_element(Row(**dict(zip(PANED_NAMES, row))), row[2] // 10_000 * 10_000 + 9_999)
    h.process_watermark(LONG_MAX)
    got = collected(chained(spark.createDataFrame(ROWS, SCHEMA)))
    assert got == Counter(tuple(value) for value, _ in h.output())
    assert any("EARLY0" in row[1] for row in got)


@pytest.mark.spark
def test_a_chain_on_a_stream_gives_the_harness_chains_results(spark, tmp_path):
    """One query: the second window fed the first's panes and forwarded watermarks, as
    a chain of harnesses is (``tests/spark/streaming/test_streaming_chain.py``)."""
    first = harness("sum", AccumulationMode.ACCUMULATING)
    max_ts = None
    for batch in BATCHES:
        for row in batch:
            if row[2] >= END_OF_INPUT_MS:
                first.process_watermark(LONG_MAX)
                continue
            first.process_element(_element(row), row[2])
            max_ts = row[2] if max_ts is None else max(max_ts, row[2])
        first.process_watermark(max_ts - 1)
    second = second_window()
    panes = iter(first.pane_output())
    for event in first.output_with_watermarks():
        if isinstance(event, Watermark):
            second.process_watermark(event.timestamp)
            continue
        value, timestamp, pane, _ = next(panes)
        row = (*value, pane.timing.name, pane.index, pane.is_last)
        second.process_element(Row(**dict(zip(PANED_NAMES, row))), timestamp)
    expected = Counter(tuple(value) for value, _ in second.output())
    assert run_stream(spark, tmp_path, chained, [BATCHES]) == expected
    assert any("EARLY0" in row[1] for row in expected)


SUM = window_logic(lambda a, b: a + b)


def test_a_processing_time_pane_trigger_streams_on_the_processing_time_clock():
    """AfterProcessingTime declares processing time: an event-time window with it runs
    as an EventTimeAndProcessingTime pipeline (a ProcessingTime query in Spark)."""
    early = tm.AfterWatermark(early=tm.AfterProcessingTime(1_000))
    op = WindowOp(None, None, OperatorSpec(TEN_SECONDS, SUM, trigger=early), None)  # type: ignore[arg-type]
    assert time_mode_of(op) == TimeMode.EVENT_AND_PROCESSING_TIME
    spec = OperatorSpec(TEN_SECONDS, SUM, trigger=dataflow_trigger())
    op = WindowOp(None, None, spec, None)  # type: ignore[arg-type]
    assert time_mode_of(op) == TimeMode.EVENT_TIME


# ---------------------------------------------------------------- definition errors


def test_a_paned_result_becomes_its_row_then_its_pane():
    early = PaneInfo(True, False, PaneTiming.EARLY, 0, -1)
    row = Row(user="a", v=3)
    names = ["user", "v", "pane_timing", "pane_index", "pane_is_last"]
    assert result_tuple(PanedResult(row, early, False), names) == ("a", 3, "EARLY", 0, False)
    late = PaneInfo(False, True, PaneTiming.LATE, 2, 1)
    retracting = [*names, "is_retraction"]
    got = result_tuple(PanedResult({"v": 7, "user": "b"}, late, True), retracting)
    assert got == ("b", 7, "LATE", 2, True, True)
    assert result_tuple(PanedResult(None, late, False), names) == (None, None, "LATE", 2, True)


def test_the_pane_columns_follow_the_functions_own():
    own = StructType([StructField("user", StringType()), StructField("n", LongType())])
    assert paned_schema(own, None) is own
    discarding = paned_schema(own, AccumulationMode.DISCARDING)
    assert discarding.simpleString() == (
        "struct<user:string,n:bigint,pane_timing:string,pane_index:bigint,pane_is_last:boolean>"
    )
    retracting = paned_schema(own, AccumulationMode.RETRACTING)
    assert retracting.fieldNames()[-1] == "is_retraction"


def test_a_result_column_named_as_a_pane_column_is_refused():
    own = StructType([StructField("user", StringType()), StructField("Pane_Index", LongType())])
    with pytest.raises(WindowSpecError) as error:
        paned_schema(own, AccumulationMode.ACCUMULATING)
    assert str(error.value) == (
        "the results of a window under a Dataflow trigger carry the pane columns "
        "['pane_timing', 'pane_index', 'pane_is_last'] after the function's own, which "
        "must not share their names; got a result column 'Pane_Index' (results: ['user', "
        "'Pane_Index']). Rename 'Pane_Index' in the `output_schema` (for reduce without a "
        "window function and sum/min/max/min_by/max_by, whose results keep the input's "
        "columns: in the input)"
    )


@pytest.mark.spark
def test_definition_errors(spark):
    df = spark.createDataFrame(ROWS, SCHEMA)
    windowed = tm.from_dataframe(df, timestamp="ts").key_by("user").window(TEN_SECONDS)
    with pytest.raises(WindowSpecError) as error:
        windowed.accumulation_mode("retracting")
    assert str(error.value) == (
        "`mode` must be a tm.AccumulationMode (DISCARDING, ACCUMULATING, RETRACTING); got "
        "'retracting' (str): pass tm.AccumulationMode.RETRACTING"
    )
    with pytest.raises(WindowSpecError) as error:
        windowed.accumulation_mode(AccumulationMode.ACCUMULATING).sum("v")
    assert str(error.value) == (
        "`accumulation_mode` applies to Dataflow triggers (tm.AfterWatermark, "
        "tm.AfterCount, tm.AfterProcessingTime, tm.Repeatedly, ...); got "
        "accumulation_mode=ACCUMULATING with the assigner's default trigger "
        "EventTimeTrigger(). A Flink trigger says it itself: FIRE keeps the window's "
        "contents (accumulating), FIRE_AND_PURGE drops them (discarding, "
        "PurgingTrigger.of(trigger)). Give a Dataflow trigger with .trigger(...), or drop "
        ".accumulation_mode(...)"
    )
    counted = windowed.trigger(tm.CountTrigger.of(2)).accumulation_mode(AccumulationMode.DISCARDING)
    with pytest.raises(WindowSpecError, match=r"with trigger CountTrigger\(.*\)\. A Flink"):
        counted.reduce(lambda a, b: a)
    paned = windowed.trigger(dataflow_trigger())
    with pytest.raises(WindowSpecError, match="got a result column 'pane_timing'"):
        paned.process(Listing(), output_schema="user string, pane_timing string")
    # without accumulation_mode: DISCARDING, and the pane columns
    result = paned.sum("v")
    assert result.plan.accumulation_mode is AccumulationMode.DISCARDING
    assert result.schema.fieldNames() == [*NAMES, "pane_timing", "pane_index", "pane_is_last"]
    # a Flink trigger's results keep their schema
    assert windowed.sum("v").schema.fieldNames() == NAMES


#   key b's early timer (1.5 s after its first element) falls due at arrival 4, after
#   the watermark that closes its window came in force at arrival 3; b's next element
#   comes at arrival 5: the replay moves b's two clocks as the stream moved them.
#
#   arrival  pt     user  ts       the stream's clocks before the element
#   1        1_000  b     3_000
#   2        2_000  a     12_000
#   3        2_200  a     12_500   wm 11_999: b [0,10) ON_TIME pane 0
#   4        3_000  a     13_000   pt 3_000: b's timer (2_500) finds its window done
#   5        4_000  b     26_000
INTERLEAVED = [
    ("b", 5, 3_000, 1_000),
    ("a", 1, 12_000, 2_000),
    ("a", 1, 12_500, 2_200),
    ("a", 1, 13_000, 3_000),
    ("b", 1, 26_000, 4_000),
]


@pytest.mark.spark
def test_a_replay_interleaves_processing_time_and_watermarks_across_other_keys(spark):
    h = harness("sum", AccumulationMode.ACCUMULATING, "processing")
    max_ts = None
    for row in INTERLEAVED:
        h.set_processing_time(row[3])
        if max_ts is not None and max_ts - 1 > h.current_watermark:
            h.process_watermark(max_ts - 1)
        h.process_element(_element(row), row[2])
        max_ts = row[2] if max_ts is None else max(max_ts, row[2])
    h.process_watermark(LONG_MAX)
    expected = pane_rows(h, AccumulationMode.ACCUMULATING, WIDTHS["sum"])
    df = spark.createDataFrame(INTERLEAVED, SCHEMA)
    result = pipeline(df, "sum", AccumulationMode.ACCUMULATING, replay=True, early="processing")
    assert collected(result) == expected
