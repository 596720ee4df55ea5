"""Windows chained on a stream run in ONE Structured Streaming query.

Each scenario is fed to a file stream, one JSON file per micro-batch, and compared with
the pure-Python harness run of the same chain: the first window fed each batch's
elements, then the watermark Spark moves to (``max_ts - out_of_orderness - 1``; +inf
after the end-of-input marker), and every later window fed, in order, what the window
before it emitted and the watermarks it forwarded (``output_with_watermarks``), as Flink
chains operators. Where nothing is late, BATCH on the same rows gives the same results.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import Row
from spark_state_fakes import Handle, TimerValues
from streaming_scenarios import RESULT_SCHEMA, VALUE_COLUMNS, Describe, _spec, describe_row

import tidemark as tm
from tidemark.spark import aggregations
from tidemark.spark.protocol.columns import (
    EARLY,
    FORWARDED,
    ON_ELEMENTS,
    OUTPUT,
    PHASE,
    SIDE,
    TS,
    decode_side,
    encode_side,
)
from tidemark.spark.streaming import DROPPED_OUTPUT, END_OF_INPUT_MS
from tidemark.spark.streaming.driver.from_plan import chain_depth
from tidemark.spark.streaming.worker.config import ProcessorConfig, UpstreamInput
from tidemark.spark.streaming.worker.processor import WindowStatefulProcessor
from tidemark.testing import Watermark, WindowOperatorHarness

pytestmark = pytest.mark.spark

INPUT_SCHEMA = "user string, region string, amount long, ts long"
END = ("_end", "", 0, END_OF_INPUT_MS)


class TopTwo(tm.ProcessWindowFunction):
    """The Flink docs' ``TopKWindowFunction`` with k = 2: (start, rank, user, amount, wm)."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        ranked = sorted(elements, key=lambda e: (-e.amount, e.user))[:2]
        start = context.window().start
        for rank, e in enumerate(ranked, 1):
            yield (start, rank, e.user, e.amount, context.current_watermark())


class RegionTotal(tm.ProcessWindowFunction):
    """(region, start, users, total, wm) of a region's window of per-user sums."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        users = ",".join(sorted(e.user for e in elements))
        total = sum(e.amount for e in elements)
        yield (key, context.window().start, users, total, context.current_watermark())


class UserSum(tm.ProcessWindowFunction):
    """(user, region, amount, ts): a user's sum in a window, as ``.sum`` keeps fields."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        items = list(elements)
        yield (key, items[0].region, sum(e.amount for e in items), items[0].ts)


def _region(row: Any) -> Any:
    return row.region


# ---------------------------------------------------------------------- references


def chain_reference(
    stages: list[tuple[WindowOperatorHarness, list[str]]],
    batches: list[list[tuple]],
    out_of_orderness_ms: int,
) -> None:
    """Run the harnesses as a Flink chain on the batches (see the module docstring).

    ``stages``: each harness with the column names of the Rows it receives.
    """
    first, names = stages[0]
    max_ts: int | None = None
    ended = False
    for batch in batches:
        for row in batch:
            if row[-1] >= END_OF_INPUT_MS:
                ended = True
                continue
            first.process_element(Row(**dict(zip(names, row))), row[-1])
            max_ts = row[-1] if max_ts is None else max(max_ts, row[-1])
        if max_ts is not None:
            first.process_watermark(tm.LONG_MAX if ended else max_ts - out_of_orderness_ms - 1)
    for (upstream, _), (downstream, names) in zip(stages, stages[1:]):
        for event in upstream.output_with_watermarks():
            if isinstance(event, Watermark):
                downstream.process_watermark(event.timestamp)
            else:
                value, timestamp = event
                if not isinstance(value, Row):
                    value = Row(**dict(zip(names, value)))
                downstream.process_element(value, timestamp)


def batch_results(spark: Any, batches: list[list[tuple]], build: Any) -> Counter:
    rows = [r for batch in batches for r in batch if r[-1] < END_OF_INPUT_MS]
    df = spark.createDataFrame(rows, INPUT_SCHEMA)
    return Counter(tuple(r) for r in build(tm.from_dataframe(df, timestamp="ts")).collect())


# ---------------------------------------------------------------------- the stream


def write_batches(directory: Path, batches: list[list[tuple]], first: int = 0) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    names = [c.split()[0] for c in INPUT_SCHEMA.split(", ")]
    for n, rows in enumerate(batches, first):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("".join(json.dumps(dict(zip(names, r))) + "\n" for r in rows))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def run_stream(
    spark: Any, tmp_path: Path, batches: list, build: Any, restart_after: int | None = None
) -> dict[str, Counter]:
    """Build the chain on a file stream with ``build(stream) -> (last, {label: sink
    key})`` and run it to the end; every output's rows by label. With ``restart_after``
    the query stops after that many batches and a new one carries on from its checkpoint.
    """
    collected: dict[tuple[str, int], list] = {}
    parts = (
        [batches] if restart_after is None else [batches[:restart_after], batches[restart_after:]]
    )
    first, labels = 0, []
    for part in parts:
        write_batches(tmp_path / "in", part, first)
        first += len(part)
        source = (
            spark.readStream.schema(INPUT_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(tmp_path / "in"))
        )
        last, keys = build(source)
        labels = list(keys)

        def sink(label: str) -> Any:
            def write(df: Any, batch_id: int) -> None:  # by batch id: a replay replaces
                collected[(label, batch_id)] = [tuple(r) for r in df.collect()]

            return write

        query = last.write_outputs(
            {key: sink(label) for label, key in keys.items()},
            checkpoint=str(tmp_path / "checkpoint"),
            trigger={"availableNow": True},
        )
        query.awaitTermination(600)
        assert query.exception() is None
        # one stateful operator per window, and Spark dropped no row between them
        operators = [op for p in query.recentProgress for op in p["stateOperators"]]
        assert {len(p["stateOperators"]) for p in query.recentProgress} == {_windows(last)}
        assert sum(op["numRowsDroppedByWatermark"] for op in operators) == 0
        # Spark allows one applyInPandasWithState per query: a chain's windows are not in it
        assert "applyInPandasWithState" not in {op["operatorName"] for op in operators}
    totals: dict[str, Counter] = {label: Counter() for label in labels}
    for (label, _), rows in collected.items():
        totals[label].update(rows)
    return totals


def _windows(stream: Any) -> int:
    """The number of window operations of the chain ending in ``stream``."""
    return chain_depth(stream.plan)


def _dropped(rows: Counter) -> int:
    return sum(n * count for (n,), count in rows.items())


# ---------------------------------------------------------------------- the docs example

#   Flink's "consecutive windowed operations": per-user sums per 5 s, then the top two
#   users of every 5 s window over all keys. Out-of-orderness 1 s.
#
#   batch 0  a@1.0 b@2.0 c@3.0 a@4.5        -> W 3.499
#   batch 1  b@6.0 c@7.0 a@5.5 b@4.0        -> W 5.999: [0,5) fires per user, then top two
#   batch 2  a@11 c@12                      -> W 10.999: [5,10) fires
#   batch 3  end of input                   -> W +inf: [10,15) fires
DOCS_BATCHES = [
    [("a", "eu", 3, 1000), ("b", "us", 5, 2000), ("c", "eu", 1, 3000), ("a", "eu", 2, 4500)],
    [("b", "us", 4, 6000), ("c", "eu", 7, 7000), ("a", "eu", 1, 5500), ("b", "us", 1, 4000)],
    [("a", "eu", 9, 11000), ("c", "eu", 2, 12000)],
    [END],
]
TOP_SCHEMA = "start long, rank int, user string, amount long, wm long"
# the harness chain's results: (window start, rank, user, sum, watermark the firing saw)
DOCS_TOP_TWO = [
    (0, 1, "b", 6, 5999),
    (0, 2, "a", 5, 5999),
    (5000, 1, "c", 7, 10999),
    (5000, 2, "b", 4, 10999),
    (10000, 1, "a", 9, tm.LONG_MAX),
    (10000, 2, "c", 2, tm.LONG_MAX),
]
FIVE_SECONDS = tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(5))


def _docs_chain(stream: Any) -> Any:
    per_user = stream.key_by("user").window(FIVE_SECONDS).sum("amount")
    return per_user.window_all(FIVE_SECONDS).process(TopTwo(), TOP_SCHEMA)


@pytest.mark.slow
def test_flink_docs_keyed_sum_then_top_k_over_all(spark, tmp_path):
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)

    def build(source: Any) -> Any:
        stream = tm.from_dataframe(
            source, timestamp="ts", watermark_strategy=strategy, shift_spark_clock=True
        )
        return _docs_chain(stream), {"main": "main", "dropped": DROPPED_OUTPUT}

    streamed = run_stream(spark, tmp_path, DOCS_BATCHES, build)
    names = INPUT_SCHEMA.replace(",", "").split()[::2]
    first = WindowOperatorHarness(
        FIVE_SECONDS, aggregations.Sum("amount"), key_selector=lambda r: r.user
    )
    top = WindowOperatorHarness(FIVE_SECONDS, TopTwo())
    chain_reference([(first, names), (top, names)], DOCS_BATCHES, 1000)
    expected = Counter(tuple(v) for v, _ in top.output())
    assert streamed["main"] == expected
    assert sorted(expected) == DOCS_TOP_TWO
    assert _dropped(streamed["dropped"]) == 0
    # BATCH on the same rows: the same windows and ranks (its watermark differs)
    batch = batch_results(spark, DOCS_BATCHES, lambda s: _docs_chain(s).to_dataframe())
    assert Counter(r[:4] for r in batch.elements()) == Counter(r[:4] for r in expected.elements())


# ---------------------------------------------------------------------- lateness

#   First window: per user, 5 s, allowed lateness 2 s, no late tag (drops are counted).
#   Second window: over all, 5 s, no lateness, late tag LATE2. Out-of-orderness 0.
#
#   batch 0  a@1 (v1) a@6 (v2)             -> W 5.999
#   batch 1  first fires a[0,5)=1 on W 5.999, then the top window gets it BEFORE W and
#            fires [0,5) with 1. a@2 (v4): a[0,5) is within lateness -> a late firing
#            a[0,5)=5 stamped 4.999, AFTER W 5.999: the second window [0,5) is gone
#            -> LATE2.   a@9 (v8)           -> W 8.999
#   batch 2  a@3 (v16): a[0,5) cleaned at 6.999 -> dropped by the first window (counted);
#            b@7 (v32)
#   batch 3  end of input: [5,10) fires per user (a 10, b 32), then over all
LATE_BATCHES = [
    [("a", "eu", 1, 1000), ("a", "eu", 2, 6000)],
    [("a", "eu", 4, 2000), ("a", "eu", 8, 9000)],
    [("a", "eu", 16, 3000), ("b", "us", 32, 7000)],
    [END],
]
LATE2 = tm.OutputTag("late2")


class PairWatermark(tm.ProcessWindowFunction):
    """(users, total, wm) of a count window of per-user sums."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        items = list(elements)
        users = ",".join(sorted(e.user for e in items))
        yield (users, sum(e.amount for e in items), context.current_watermark())


#   A count window after a time window fires on an element: its firing sees the
#   watermark the first window forwarded last, though nothing reached it since.
#
#   batch 0  a@1.0 b@2.0    -> W 0.999
#   batch 1  c@6.5          -> W 5.499: a[0,5), b[0,5) fire -> the pair fires at W 0.999
#   batch 2  a@7.0          -> W 5.999: nothing fires
#   batch 3  end of input   -> W +inf: a[5,10), c[5,10) -> the pair fires at W 5.999
PAIR_BATCHES = [
    [("a", "eu", 3, 1000), ("b", "us", 5, 2000)],
    [("c", "eu", 1, 6500)],
    [("a", "eu", 2, 7000)],
    [END],
]


@pytest.mark.slow
def test_a_count_window_after_a_time_window_sees_the_forwarded_watermark(spark, tmp_path):
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)
    schema = "users string, total long, wm long"

    def build(source: Any) -> Any:
        stream = tm.from_dataframe(
            source, timestamp="ts", watermark_strategy=strategy, shift_spark_clock=True
        )
        per_user = stream.key_by("user").window(FIVE_SECONDS).sum("amount")
        return per_user.count_window_all(2).process(PairWatermark(), schema), {"main": "main"}

    streamed = run_stream(spark, tmp_path, PAIR_BATCHES, build)
    names = INPUT_SCHEMA.replace(",", "").split()[::2]
    first = WindowOperatorHarness(
        FIVE_SECONDS, aggregations.Sum("amount"), key_selector=lambda r: r.user
    )
    pairs = WindowOperatorHarness(
        tm.GlobalWindows.create(),
        PairWatermark(),
        trigger=tm.PurgingTrigger.of(tm.CountTrigger.of(2)),
    )
    chain_reference([(first, names), (pairs, names)], PAIR_BATCHES, 1000)
    expected = Counter(tuple(v) for v, _ in pairs.output())
    assert sorted(expected) == [("a,b", 8, 999), ("a,c", 3, 5999)]
    assert streamed["main"] == expected


@pytest.mark.slow
def test_late_firing_reaches_the_second_window_and_is_late_there(spark, tmp_path):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps()
    names = INPUT_SCHEMA.replace(",", "").split()[::2]
    user_sum = "user string, region string, amount long, ts long"

    def chain(stream: Any) -> tuple[Any, Any]:
        first = (
            stream.key_by("user")
            .window(FIVE_SECONDS)
            .allowed_lateness(tm.Duration.of_seconds(2))
            .process(UserSum(), user_sum)
        )
        second = (
            first.window_all(FIVE_SECONDS)
            .side_output_late_data(LATE2)
            .process(TopTwo(), TOP_SCHEMA)
        )
        return first, second

    def build(source: Any) -> Any:
        first, second = chain(
            tm.from_dataframe(
                source, timestamp="ts", watermark_strategy=strategy, shift_spark_clock=True
            )
        )
        return second, {
            "main": "main",
            "late2": LATE2,
            "first dropped": (first, DROPPED_OUTPUT),
            "dropped": DROPPED_OUTPUT,
        }

    streamed = run_stream(spark, tmp_path, LATE_BATCHES, build)
    first = WindowOperatorHarness(
        FIVE_SECONDS, UserSum(), key_selector=lambda r: r.user, allowed_lateness=2000
    )
    top = WindowOperatorHarness(FIVE_SECONDS, TopTwo(), late_data_tag=LATE2)
    chain_reference(
        [(first, names), (top, user_sum.replace(",", "").split()[::2])], LATE_BATCHES, 0
    )
    assert streamed["main"] == Counter(tuple(v) for v, _ in top.output())
    assert sorted(streamed["main"]) == [
        (0, 1, "a", 1, 5999),
        (5000, 1, "b", 32, tm.LONG_MAX),
        (5000, 2, "a", 10, tm.LONG_MAX),
    ]
    assert streamed["late2"] == Counter(tuple(v) for v, _ in top.side_output(LATE2))
    assert list(streamed["late2"]) == [("a", "eu", 5, 1000)]
    assert _dropped(streamed["first dropped"]) == first.num_late_records_dropped == 1
    assert _dropped(streamed["dropped"]) == top.num_late_records_dropped == 0


# ---------------------------------------------------------------------- keyed second stage

#   First window: per user, 5 s, late tag LATE1. Second: per region (a key function),
#   10 s. Out-of-orderness 0.
#
#   batch 0  a/eu@1 b/eu@2 c/us@3           -> W 2.999
#   batch 1  a/eu@6 c/us@8                  -> W 7.999: [0,5) fires per user
#   batch 2  b/eu@4 (too late: to LATE1), d/us@12   -> W 11.999: [0,10) fires per region
#   batch 3  end of input
KEYED_BATCHES = [
    [("a", "eu", 1, 1000), ("b", "eu", 2, 2000), ("c", "us", 3, 3000)],
    [("a", "eu", 4, 6000), ("c", "us", 5, 8000)],
    [("b", "eu", 6, 4000), ("d", "us", 7, 12000)],
    [END],
]
LATE1 = tm.OutputTag("late1")
REGION_SCHEMA = "region string, start long, users string, total long, wm long"


@pytest.mark.slow
def test_keyed_second_window_and_the_first_windows_side_output(spark, tmp_path):
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps()
    names = INPUT_SCHEMA.replace(",", "").split()[::2]
    ten_seconds = tm.TumblingEventTimeWindows.of(tm.Duration.of_seconds(10))

    def build(source: Any) -> Any:
        stream = tm.from_dataframe(
            source, timestamp="ts", watermark_strategy=strategy, shift_spark_clock=True
        )
        first = (
            stream.key_by("user").window(FIVE_SECONDS).side_output_late_data(LATE1).sum("amount")
        )
        second = first.key_by(_region).window(ten_seconds).process(RegionTotal(), REGION_SCHEMA)
        return second, {
            "main": "main",
            "late1": first.get_side_output(LATE1),
            "dropped": DROPPED_OUTPUT,
        }

    streamed = run_stream(spark, tmp_path, KEYED_BATCHES, build)
    first = WindowOperatorHarness(
        FIVE_SECONDS,
        aggregations.Sum("amount"),
        key_selector=lambda r: r.user,
        late_data_tag=LATE1,
    )
    second = WindowOperatorHarness(ten_seconds, RegionTotal(), key_selector=_region)
    chain_reference([(first, names), (second, names)], KEYED_BATCHES, 0)
    assert streamed["main"] == Counter(tuple(v) for v, _ in second.output())
    assert sorted(streamed["main"]) == [
        ("eu", 0, "a,a,b", 7, 11999),
        ("us", 0, "c,c", 8, 11999),
        ("us", 10000, "d", 7, tm.LONG_MAX),
    ]
    assert streamed["late1"] == Counter(tuple(v) for v, _ in first.side_output(LATE1))
    assert list(streamed["late1"]) == [("b", "eu", 6, 4000)]
    assert _dropped(streamed["dropped"]) == 0


def test_a_processing_time_window_in_a_chain_is_refused(spark, tmp_path):
    (tmp_path / "in").mkdir()
    source = spark.readStream.schema(INPUT_SCHEMA).json(str(tmp_path / "in"))
    stream = tm.from_dataframe(source, timestamp="ts")
    first = stream.key_by("user").window(tm.TumblingProcessingTimeWindows.of(10)).sum("amount")
    second = first.window_all(FIVE_SECONDS).sum("amount")
    with pytest.raises(tm.WindowSpecError, match="every window of the chain needs event time"):
        second.to_dataframe()


def test_a_sink_for_a_window_outside_the_chain_is_refused(spark, tmp_path):
    (tmp_path / "in").mkdir()
    source = spark.readStream.schema(INPUT_SCHEMA).json(str(tmp_path / "in"))
    stream = tm.from_dataframe(source, timestamp="ts")
    other = stream.key_by("region").window(FIVE_SECONDS).sum("amount")
    last = _docs_chain(stream)
    with pytest.raises(tm.WindowSpecError, match="not this one or an earlier window"):
        last.write_outputs({(other, DROPPED_OUTPUT): print}, str(tmp_path / "cp"))
    first = stream.key_by("user").window(FIVE_SECONDS).sum("amount")
    last = first.window_all(FIVE_SECONDS).process(TopTwo(), TOP_SCHEMA)
    with pytest.raises(tm.WindowSpecError, match="results of an earlier window"):
        last.write_outputs({(first, "main"): print}, str(tmp_path / "cp"))


# ---------------------------------------------------------------------- the processor by hand


#   A chained window (tumbling 10, late tag LATE2) driven without Spark, two calls:
#
#   call 1  W none   on elements: x@5
#   call 2  W 9      early: x@9 (fired upstream on W 9)  -> fed BEFORE W 9: [0,10) holds
#                    5 and 9 and fires with W 9
#                    on elements: x@8 (a late firing upstream) -> after W 9: [0,10) is
#                    gone -> LATE2
#                    passed through: the upstream's late row and its dropped count
def test_chained_processor_feeds_early_results_before_the_watermark():
    result_names = ("key", "start", "end", "n", "total", "watermark")
    config = ProcessorConfig(
        spec=_spec(tm.TumblingEventTimeWindows.of(10), late_data_tag=LATE2, function=Describe()),
        time_mode="EventTime",
        value_names=tuple(VALUE_COLUMNS),
        value_types=("StringType", "LongType", "LongType"),
        value_positions=(0, 1, 2),
        result_schema=RESULT_SCHEMA,
        result_to_row=describe_row,
        timestamp_position=3,
        upstream=UpstreamInput(1, 3, len(result_names), phased=False),
    )
    processor, handle = WindowStatefulProcessor(config), Handle()
    processor.init(handle)  # type: ignore[arg-type]
    columns = [*VALUE_COLUMNS, TS, OUTPUT, SIDE, "__tm_dropped", PHASE, FORWARDED]
    late_row = Row(key="y", v=7, ts=1)
    calls = [
        (None, [("x", 1, 5, 5, "main", None, None, ON_ELEMENTS, None)]),
        (
            9,
            [
                ("x", 4, 8, 8, "main", None, None, ON_ELEMENTS, None),
                ("x", 2, 9, 9, "main", None, None, EARLY, 6),
                (None, None, None, 1, "late", encode_side(late_row), None, ON_ELEMENTS, None),
                (None, None, None, 0, "__late_records_dropped", None, 3, ON_ELEMENTS, None),
            ],
        ),
    ]
    got = []
    for watermark, rows in calls:
        pdf = pd.DataFrame(rows, columns=columns, dtype=object)
        frames = processor.handleInputRows((0,), iter([pdf]), TimerValues.at(watermark))
        got += [tuple(r) for frame in frames for r in frame.itertuples(index=False)]
    main = [r[2:8] for r in got if r[0] == "main"]
    assert main == [("x", 0, 10, 2, 3, 9)]  # fed after W 9, x@9 would be late too
    late = [decode_side(r[8]) for r in got if r[0] == "late2"]
    assert late == [Row(key="x", v=4, ts=8)]
    passed = sorted((r[0], r[1], r[9]) for r in got if r[0].startswith("__tm_window1/"))
    assert passed == [
        ("__tm_window1/__late_records_dropped", None, 3),
        ("__tm_window1/late", 1, None),
    ]


# ---------------------------------------------------------------------- random three-window chains


class Summary(tm.ProcessWindowFunction):
    """(start, n, total, wm) over a window of region totals."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        items = list(elements)
        total = sum(e.total for e in items)
        yield (context.window().start, len(items), total, context.current_watermark())


USER_SUM = "user string, region string, amount long, ts long"
SUMMARY = "start long, n long, total long, wm long"
LATE3 = tm.OutputTag("late3")
REGIONS = {"a": "eu", "b": "eu", "c": "us", "d": "us"}


def random_batches(seed: int) -> list[list[tuple]]:
    """Six batches over about 15 s, a few rows each, some behind the watermark."""
    rng = random.Random(seed)
    batches: list[list[tuple]] = []
    for n in range(6):
        rows = []
        for _ in range(rng.randint(1, 4)):
            user = rng.choice("abcd")
            ts = max(0, 2500 * n + rng.randint(-6000, 2500))
            rows.append((user, REGIONS[user], rng.randint(1, 9), ts))
        batches.append(rows)
    return [*batches, [END]]


def _three_windows(stream: Any) -> tuple[Any, Any, Any]:
    first = (
        stream.key_by("user")
        .window(tm.TumblingEventTimeWindows.of(4000))
        .allowed_lateness(1500)
        .side_output_late_data(LATE1)
        .process(UserSum(), USER_SUM)
    )
    second = (
        first.key_by("region")
        .window(tm.TumblingEventTimeWindows.of(4000))
        .allowed_lateness(500)
        .process(RegionTotal(), REGION_SCHEMA)
    )
    third = (
        second.window_all(tm.TumblingEventTimeWindows.of(4000))
        .side_output_late_data(LATE3)
        .process(Summary(), SUMMARY)
    )
    return first, second, third


def _three_harnesses() -> list[WindowOperatorHarness]:
    return [
        WindowOperatorHarness(
            tm.TumblingEventTimeWindows.of(4000),
            UserSum(),
            key_selector=lambda r: r.user,
            allowed_lateness=1500,
            late_data_tag=LATE1,
        ),
        WindowOperatorHarness(
            tm.TumblingEventTimeWindows.of(4000),
            RegionTotal(),
            key_selector=_region,
            allowed_lateness=500,
        ),
        WindowOperatorHarness(tm.TumblingEventTimeWindows.of(4000), Summary(), late_data_tag=LATE3),
    ]


def _names(schema: str) -> list[str]:
    return schema.replace(",", "").split()[::2]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "restart_after"),
    [
        # late1 1, the first window's late firings dropped by the second (3)
        pytest.param(36, None, id="late-firings-dropped-downstream"),
        # the first window's late firings fire the second late (2), late there for the
        # third (3); the query stops after batch 3 and resumes from its checkpoint
        pytest.param(5, 3, id="late-firings-through-two-windows-restarted"),
    ],
)
def test_random_three_window_chain_equals_the_harness_chain(spark, tmp_path, seed, restart_after):
    """Per user 4 s (lateness 1.5 s, late tag), per region 4 s (lateness 0.5 s, drops
    counted), over all 4 s (late tag): a late firing upstream can be added, fire again,
    go to the side output or be dropped downstream, as in the harness chain."""
    batches = random_batches(seed)
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)

    def build(source: Any) -> Any:
        stream = tm.from_dataframe(
            source, timestamp="ts", watermark_strategy=strategy, shift_spark_clock=True
        )
        first, second, third = _three_windows(stream)
        return third, {
            "main": "main",
            "late1": first.get_side_output(LATE1),
            "dropped1": (first, DROPPED_OUTPUT),
            "dropped2": (second, DROPPED_OUTPUT),
            "late3": LATE3,
            "dropped3": DROPPED_OUTPUT,
        }

    streamed = run_stream(spark, tmp_path, batches, build, restart_after)
    harnesses = _three_harnesses()
    schemas = [INPUT_SCHEMA, USER_SUM, REGION_SCHEMA]
    chain_reference(list(zip(harnesses, map(_names, schemas))), batches, 1000)
    first, second, third = harnesses
    assert streamed["main"] == Counter(tuple(v) for v, _ in third.output())
    assert streamed["late1"] == Counter(tuple(v) for v, _ in first.side_output(LATE1))
    assert streamed["late3"] == Counter(tuple(v) for v, _ in third.side_output(LATE3))
    dropped = [_dropped(streamed[f"dropped{n}"]) for n in (1, 2, 3)]
    assert dropped == [h.num_late_records_dropped for h in harnesses]
