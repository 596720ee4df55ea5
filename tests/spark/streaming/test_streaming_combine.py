"""A streaming window whose function is declared order-insensitive, folded per key and
slice in each input partition before its key groups (``spark/streaming/driver/preaggregate.py``):
a ``window_all``, keyed tumbling and sliding windows and a chain's first window, against
the engine fed the same micro-batches, and against the same query with every element
folded in its key group (``spark.tidemark.streaming.preAggregate=false``).

Each micro-batch is two JSON files (two input partitions), read ``availableNow`` two
files a batch; times are ms after ``BASE``, windows 10 s, out-of-orderness 2 s::

    batch  file a              file b                 W after (Spark: max - 2 s - 1)
    0      5@1s 7@3s 2@12s     9@2s 1@15s             12.999s
    1      4@8s 3@9s (late)    6@18s 8@25s            22.999s  [0,10s) fires first
    2      10@21s              11@11s (late) 12@29s   26.999s  [10,20s) fires first
    3      13@24s              14@33s                 30.999s
    4      end of input        15@34s                 +inf     [20,30s) [30,40s) fire

[0,10s) and [20,30s) are fed over several micro-batches, by both files. Keyed, the key
``k`` is ``v % 2``.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import Row

import tidemark as tm
from tidemark._engine.create import create_window_operator, window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.spark.protocol.figures import metrics_of
from tidemark.spark.streaming import DROPPED_OUTPUT, END_OF_INPUT_MS
from tidemark.spark.streaming.driver.preaggregate import CONF, KEYED_CONF
from tidemark.time import LONG_MAX

pytestmark = pytest.mark.spark

BASE = 1_600_000_000_000
SIZE_MS = 10_000
OUT_OF_ORDERNESS_MS = 2_000
END = (0, END_OF_INPUT_MS - BASE)
BATCHES = [
    [[(5, 1000), (7, 3000), (2, 12000)], [(9, 2000), (1, 15000)]],
    [[(4, 8000), (3, 9000)], [(6, 18000), (8, 25000)]],
    [[(10, 21000)], [(11, 11000), (12, 29000)]],
    [[(13, 24000)], [(14, 33000)]],
    [[END], [(15, 34000)]],
]
SCHEMA = "start long, end long, n long, total long, high long, watermark long"


class HighestBid(tm.AggregateFunction):
    """(count, sum, max) of ``v``; appends a line to ``log`` at each merge."""

    order_insensitive = True

    def __init__(self, log: str | None = None, fail_on: int | None = None):
        self.log, self.fail_on = log, fail_on

    def create_accumulator(self):
        return (0, 0, None)

    def add(self, value, acc):
        if value.v == self.fail_on:
            raise ValueError(f"no bid of {value.v}")
        high = value.v if acc[2] is None else max(acc[2], value.v)
        return (acc[0] + 1, acc[1] + value.v, high)

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        if self.log is not None:
            with open(self.log, "a") as out:
                out.write("merge\n")
        return (a[0] + b[0], a[1] + b[1], max(a[2], b[2]))


class Describe(tm.ProcessAllWindowFunction):
    def process(self, context, elements):
        n, total, high = next(iter(elements))
        window = context.window()
        yield (window.start - BASE, window.end - BASE, n, total, high, context.current_watermark())


class LargestBid(tm.ReduceFunction):
    """The bid with the largest ``v`` (values are distinct: any order gives it)."""

    order_insensitive = True

    def reduce(self, a, b):
        return a if a.v > b.v else b


class DescribeLargest(tm.ProcessAllWindowFunction):
    def process(self, context, elements):
        bid = next(iter(elements))
        window = context.window()
        start, end = window.start - BASE, window.end - BASE
        yield (start, end, 1, bid.ts - BASE, bid.v, context.current_watermark())


class Unordered(HighestBid):
    order_insensitive = False


def _write(directory: Path, batches: list, first: int = 0) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for b, files in enumerate(batches, start=first):
        for f, rows in enumerate(files):
            path = directory / f"batch-{b:03d}-{f}.json"
            lines = [json.dumps({"k": v % 2, "v": v, "ts": BASE + t}) for v, t in rows]
            path.write_text("\n".join(lines) + "\n")
            os.utime(path, (1_000_000 + 10 * b + f, 1_000_000 + 10 * b + f))


def _stream(spark, directory: Path, function=None, configure=None, window_function=None):
    source = (
        spark.readStream.schema("v long, ts long")
        .option("maxFilesPerTrigger", 2)
        .json(str(directory))
    )
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(OUT_OF_ORDERNESS_MS)
    windowed = tm.from_dataframe(source, timestamp="ts", watermark_strategy=strategy).window_all(
        tm.TumblingEventTimeWindows.of(SIZE_MS)
    )
    if configure is not None:
        windowed = configure(windowed)
    if isinstance(function, tm.ReduceFunction):
        return windowed.reduce(function, window_function, SCHEMA)
    return windowed.aggregate(function or HighestBid(), Describe(), SCHEMA)


class _Run:
    """One ``availableNow`` run of the stream on ``root``'s input and checkpoint."""

    def __init__(self, root: Path):
        self.root = root
        self.main: list[tuple] = []
        self.dropped = 0
        self.figures: list[dict] = []

    def run(self, spark, function=None, window_function=None) -> _Run:
        return self.write(
            _stream(spark, self.root / "in", function, window_function=window_function)
        )

    def write(self, result) -> _Run:
        """Run ``result`` to the end of its input, collecting its outputs and figures."""
        query = result.write_outputs(
            {
                "main": lambda df, b: self.main.extend(tuple(r) for r in df.collect()),
                DROPPED_OUTPUT: self._count_dropped,
            },
            checkpoint=str(self.root / "checkpoint"),
            trigger={"availableNow": True},
        )
        query.awaitTermination(300)
        progress = sorted(query.recentProgress, key=lambda p: p["batchId"])
        self.figures.extend(metrics_of(p) for p in progress)
        return self

    def _count_dropped(self, df, batch_id):
        self.dropped += sum(r[0] for r in df.collect())


def _engine_reference(batches: list, function=None, window_function=None) -> tuple[Counter, int]:
    """The engine fed each micro-batch's elements, then the watermark Spark moves to."""
    logic = window_logic(function or HighestBid(), window_function or Describe())
    op = window_operator(tm.TumblingEventTimeWindows.of(SIZE_MS), logic)
    high, ended = None, False
    for files in batches:
        for rows in files:
            for v, t in rows:
                if (v, t) == END:
                    ended = True
                    continue
                op.process_element(None, Row(v=v, ts=BASE + t), BASE + t)
                high = t if high is None else max(high, t)
        watermark = LONG_MAX if ended else BASE + high - OUT_OF_ORDERNESS_MS - 1
        if watermark > op.current_watermark:
            op.process_watermark(watermark)
    return Counter(tuple(result) for result, _ in op.output), op.num_late_records_dropped


@pytest.fixture
def combining(spark):
    """Set the switch for a test (None: the default; ``keyed``: keyed windows fold too),
    and put both back after."""

    def switch(on: bool | None, keyed: bool = False) -> None:
        if on is None:
            spark.conf.unset(CONF)
        else:
            spark.conf.set(CONF, str(on).lower())
        if keyed:
            spark.conf.set(KEYED_CONF, "true")
        else:
            spark.conf.unset(KEYED_CONF)

    yield switch
    spark.conf.unset(CONF)
    spark.conf.unset(KEYED_CONF)


def _merges(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_combined_stream_equals_the_engine_and_the_one_task_run(spark, tmp_path, combining):
    expected, dropped = _engine_reference(BATCHES)
    assert dropped == 3 and len(expected) == 4
    runs = {}
    for on in (True, False):
        combining(on)
        root = tmp_path / str(on)
        _write(root / "in", BATCHES)
        log = root / "merges.log"
        runs[on] = _Run(root).run(spark, HighestBid(str(log)))
        assert Counter(runs[on].main) == expected
        assert runs[on].dropped == dropped
        # two partitions' partials of one window met in its key group: combined
        assert (_merges(log) > 0) is on
    # the figures of each micro-batch: elements in counted one by one, the same state
    assert runs[True].figures == runs[False].figures
    assert [f["num_records_in"] for f in runs[True].figures] == [5, 4, 3, 2, 1, 0]
    assert [f["num_late_records_dropped"] for f in runs[True].figures] == [0, 2, 1, 0, 0, 0]


def test_a_declared_reduce_function_is_combined_too(spark, tmp_path, combining):
    combining(None)
    expected, dropped = _engine_reference(BATCHES, LargestBid(), DescribeLargest())
    _write(tmp_path / "in", BATCHES)
    got = _Run(tmp_path).run(spark, LargestBid(), DescribeLargest())
    assert "MapInPandas" in _plan(
        _stream(spark, tmp_path / "in", LargestBid(), None, DescribeLargest())
    )
    assert Counter(got.main) == expected
    assert got.dropped == dropped == 3


@pytest.mark.parametrize("first,then", [(True, False), (False, True)])
def test_a_restart_switching_the_conf_reads_the_same_state(spark, tmp_path, combining, first, then):
    """Windows stored by one path are fed and fired by the other after a restart."""
    expected, dropped = _engine_reference(BATCHES)
    run = _Run(tmp_path)
    _write(tmp_path / "in", BATCHES[:2])
    combining(first)
    run.run(spark)
    _write(tmp_path / "in", BATCHES[2:], first=2)
    combining(then)
    run.run(spark)
    assert Counter(run.main) == expected
    assert run.dropped == dropped


def _failing_add(result, tmp_path: Path) -> str:
    """The message of the ``tidemark.UserFunctionError`` the query of ``result`` raises
    when its user's ``add`` fails on 7@3s."""
    query = result.write_outputs({"main": lambda df, b: df.collect()}, str(tmp_path / "cp"))
    try:
        with pytest.raises(tm.UserFunctionError) as info:
            query.processAllAvailable()
    finally:
        query.stop()
    message = str(info.value)
    assert message.startswith("the reduce/aggregate function raised ValueError: no bid of 7")
    return message


def test_a_user_add_failing_before_the_shuffle_raises_tidemarks_error(spark, tmp_path, combining):
    combining(None)  # on by default
    _write(tmp_path / "in", BATCHES[:1])
    message = _failing_add(_stream(spark, tmp_path / "in", HighestBid(fail_on=7)), tmp_path)
    assert f"window=TimeWindow[{BASE}, {BASE + SIZE_MS})" in message


def _plan(result) -> str:
    return result.to_dataframe()._jdf.queryExecution().analyzed().toString()


def test_the_switches_turn_it_off(spark, tmp_path, combining):
    (tmp_path / "in").mkdir()
    combining(None)
    assert "MapInPandas" in _plan(_stream(spark, tmp_path / "in"))
    combining(False)
    assert "MapInPandas" not in _plan(_stream(spark, tmp_path / "in"))
    combining(None)
    spark.conf.set("spark.tidemark.fastPaths", "false")
    try:
        assert "MapInPandas" not in _plan(_stream(spark, tmp_path / "in"))
    finally:
        spark.conf.unset("spark.tidemark.fastPaths")


class _Early(tm.Trigger):
    """Fires at the window end, as the default trigger, but is not it."""

    def on_element(self, element, timestamp, window, ctx):
        ctx.register_event_time_timer(window.max_timestamp())
        return tm.TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        return (
            tm.TriggerResult.FIRE if time == window.max_timestamp() else tm.TriggerResult.CONTINUE
        )

    def on_processing_time(self, time, window, ctx):
        return tm.TriggerResult.CONTINUE

    def clear(self, window, ctx):
        ctx.delete_event_time_timer(window.max_timestamp())


@pytest.mark.parametrize(
    "configure,function",
    [
        pytest.param(lambda w: w.allowed_lateness(1000), None, id="allowed_lateness"),
        pytest.param(lambda w: w.side_output_late_data(tm.OutputTag("late")), None, id="late_tag"),
        pytest.param(lambda w: w.trigger(_Early()), None, id="custom_trigger"),
        pytest.param(None, Unordered(), id="undeclared_function"),
    ],
)
def test_windows_it_cannot_serve_run_in_one_task(spark, tmp_path, combining, configure, function):
    (tmp_path / "in").mkdir()
    combining(None)
    assert "MapInPandas" not in _plan(_stream(spark, tmp_path / "in", function, configure))


# ---------------------------------------------------------------- keyed windows, chains

KEYED_SCHEMA = "k long, " + SCHEMA
WINDOWS = {
    "tumbling": tm.TumblingEventTimeWindows.of(SIZE_MS),
    "sliding": tm.SlidingEventTimeWindows.of(SIZE_MS, 4_000),  # slices of 2 s
}


class DescribeKeyed(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        n, total, high = next(iter(elements))
        window = context.window()
        start, end = window.start - BASE, window.end - BASE
        yield (key, start, end, n, total, high, context.current_watermark())


class TotalPerEnd(tm.ProcessAllWindowFunction):
    """A chain's second window: per 4 s, the sum of the first window's counts."""

    def process(self, context, elements):
        window = context.window()
        yield (window.start - BASE, sum(e.n for e in elements))


def _keyed_stream(spark, directory: Path, windows: str, function=None, chain=False):
    source = spark.readStream.schema("k long, v long, ts long").option("maxFilesPerTrigger", 2)
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(OUT_OF_ORDERNESS_MS)
    keyed = tm.from_dataframe(
        source.json(str(directory)), timestamp="ts", watermark_strategy=strategy
    ).key_by("k")
    result = keyed.window(WINDOWS[windows]).aggregate(
        function or HighestBid(), DescribeKeyed(), KEYED_SCHEMA
    )
    if chain:
        later = result.window_all(tm.TumblingEventTimeWindows.of(4_000))
        result = later.process(TotalPerEnd(), "start long, total long")
    return result


def _keyed_reference(batches: list, windows: str) -> tuple[Counter, int]:
    """The engine fed each micro-batch's elements per key, then Spark's watermark."""
    logic = window_logic(HighestBid(), DescribeKeyed())
    op = create_window_operator(OperatorSpec(WINDOWS[windows], logic))
    high, ended = None, False
    for files in batches:
        elements = [(v, t) for rows in files for v, t in rows if (v, t) != END]
        ended = ended or len(elements) < sum(len(rows) for rows in files)
        for key in (0, 1):
            for v, t in elements:
                if v % 2 == key:
                    op.process_element(key, Row(k=key, v=v, ts=BASE + t), BASE + t)
        high = max([high or 0, *(t for _, t in elements)])
        watermark = LONG_MAX if ended else BASE + high - OUT_OF_ORDERNESS_MS - 1
        if watermark > op.current_watermark:
            op.process_watermark(watermark)
    return Counter(tuple(result) for result, _ in op.output), op.num_late_records_dropped


class _KeyedRun(_Run):
    def run(self, spark, windows: str, function=None, chain=False) -> _Run:  # type: ignore[override]
        return self.write(_keyed_stream(spark, self.root / "in", windows, function, chain))


@pytest.mark.parametrize("windows", sorted(WINDOWS))
def test_keyed_windows_combined_equal_the_engine_and_the_one_task_run(
    spark, tmp_path, combining, windows
):
    expected, dropped = _keyed_reference(BATCHES, windows)
    assert dropped > 0 and len(expected) > 4
    runs = {}
    for on in (True, False):
        combining(on, keyed=True)
        root = tmp_path / str(on)
        _write(root / "in", BATCHES)
        log = root / "merges.log"
        runs[on] = _KeyedRun(root).run(spark, windows, HighestBid(str(log)))
        assert ("MapInPandas" in _plan(_keyed_stream(spark, root / "in", windows))) is on
        assert Counter(runs[on].main) == expected
        assert runs[on].dropped == dropped
        assert (_merges(log) > 0) is on
    assert runs[True].figures == runs[False].figures
    assert [f["num_records_in"] for f in runs[True].figures] == [5, 4, 3, 2, 1, 0]


def test_a_keyed_sliding_restart_switching_the_conf_reads_the_same_state(
    spark, tmp_path, combining
):
    expected, dropped = _keyed_reference(BATCHES, "sliding")
    run = _KeyedRun(tmp_path)
    _write(tmp_path / "in", BATCHES[:2])
    combining(True, keyed=True)
    run.run(spark, "sliding")
    _write(tmp_path / "in", BATCHES[2:], first=2)
    combining(False, keyed=True)
    run.run(spark, "sliding")
    assert Counter(run.main) == expected
    assert run.dropped == dropped


def test_a_chains_first_window_is_combined(spark, tmp_path, combining):
    """The first window of a chain reads the stream: folded before its key groups; the
    second reads the first's results, as before. The same rows either way."""
    runs = {}
    for on in (True, False):
        combining(on, keyed=True)
        root = tmp_path / str(on)
        _write(root / "in", BATCHES)
        runs[on] = _KeyedRun(root).run(spark, "sliding", chain=True)
        plan = _plan(_keyed_stream(spark, root / "in", "sliding", chain=True))
        assert plan.count("MapInPandas") == (1 if on else 0)
    assert Counter(runs[True].main) == Counter(runs[False].main)
    assert len(runs[True].main) >= 5
    assert runs[True].dropped == runs[False].dropped
    assert runs[True].figures == runs[False].figures


class CountOf(tm.AggregateFunction):
    order_insensitive = True

    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


class KeyAndCount(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (repr(key), context.window().start - BASE, next(iter(elements)))


KEYS = {  # a key column's type, and its values as JSON writes them (never a null key:
    # a stream refuses one as BATCH does, tests/spark/streaming/test_streaming_null_keys.py)
    "double": ("double", [1.0, "NaN", -0.0, 0.0, 2.5]),
    "timestamp": ("timestamp", ["2020-03-08T06:30:00Z", "2020-03-08T07:30:00Z"]),
    "struct": ("struct<a: bigint, b: string>", [{"a": 1, "b": "x"}, {"a": 1, "b": None}]),
}


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_keys_reach_their_key_group_as_they_came(spark, tmp_path, combining, kind):
    """A partial's row carries its key as the rows did: a NaN, -0.0 one key with 0.0, a
    timestamp exact in another session time zone, a struct with a null field."""
    type_name, keys = KEYS[kind]
    for b in range(3):
        lines = [
            json.dumps({"k": keys[(i + b) % len(keys)], "ts": BASE + b * 7_000 + i * 300})
            for i in range(20)
        ]
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"b{b}.json").write_text("\n".join(lines) + "\n")
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1_000)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        results = {}
        for on in (True, False):
            combining(on, keyed=True)
            source = (
                spark.readStream.schema(f"k {type_name}, ts long")
                .option("allowNonNumericNumbers", True)
                .option("maxFilesPerTrigger", 1)
                .json(str(tmp_path / "in"))
            )
            windowed = (
                tm.from_dataframe(source, timestamp="ts", watermark_strategy=strategy)
                .key_by("k")
                .window(tm.SlidingEventTimeWindows.of(4_000, 2_000))
            )
            result = windowed.aggregate(CountOf(), KeyAndCount(), "k string, start long, n long")
            rows: list = []
            query = result.write_outputs(
                {"main": lambda df, b, rows=rows: rows.extend(tuple(r) for r in df.collect())},
                checkpoint=str(tmp_path / f"cp-{on}"),
                trigger={"availableNow": True},
            )
            query.awaitTermination(300)
            results[on] = Counter(rows)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert results[True] == results[False]
    distinct = {key for key, _, _ in results[True]}
    assert len(distinct) == len({repr(k) for k in keys}) - (kind == "double")  # -0.0 is 0.0


def test_processing_time_windows_are_combined(spark, tmp_path, combining):
    """Processing-time windows: a key's elements of a micro-batch all meet one processing
    time, so a partial per key and partition goes where its elements would. Which window
    a row reaches depends on the clock: every element is counted once, per key, on both
    paths (the windows fire as processing time passes their end)."""
    keys = [(i * 7) % 3 for i in range(60)]
    for b in range(3):
        lines = [json.dumps({"k": keys[b * 20 + i], "ts": BASE + i}) for i in range(20)]
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"b{b}.json").write_text("\n".join(lines) + "\n")
    expected = Counter(repr(k) for k in keys)
    for on in (True, False):
        combining(on, keyed=True)
        source = spark.readStream.schema("k long, ts long").option("maxFilesPerTrigger", 1)
        result = (
            tm.from_dataframe(source.json(str(tmp_path / "in")), timestamp="ts")
            .key_by("k")
            .window(tm.TumblingProcessingTimeWindows.of(500))
            .aggregate(CountOf(), KeyAndCount(), "k string, start long, n long")
        )
        assert ("MapInPandas" in _plan(result)) is on
        rows: list = []
        query = result.write_outputs(
            {"main": lambda df, b, rows=rows: rows.extend(tuple(r) for r in df.collect())},
            checkpoint=str(tmp_path / f"cp-{on}"),
            trigger={"processingTime": "200 milliseconds"},
        )
        try:
            deadline = time.monotonic() + 120
            while sum(n for _, _, n in rows) < len(keys) and time.monotonic() < deadline:
                assert query.exception() is None
                time.sleep(0.5)
        finally:
            query.stop()
        totals: Counter = Counter()
        for key, _, n in rows:
            totals[key] += n
        assert totals == expected


def test_a_keyed_window_folds_only_when_asked(spark, tmp_path, combining):
    """Its key groups already run on every core: by default a keyed window folds each
    element there; ``preAggregateKeyed`` asks for the fold before the shuffle."""
    (tmp_path / "in").mkdir()
    combining(None)
    assert "MapInPandas" not in _plan(_keyed_stream(spark, tmp_path / "in", "tumbling"))
    assert "MapInPandas" in _plan(_stream(spark, tmp_path / "in"))  # a window_all does
    combining(None, keyed=True)
    assert "MapInPandas" in _plan(_keyed_stream(spark, tmp_path / "in", "tumbling"))


def test_a_keyed_add_failing_before_the_shuffle_names_its_key_and_window(
    spark, tmp_path, combining
):
    """7@3s (key 1) fails in its 2 s slice [2s, 4s): the slice's first window is the
    10 s window starting at -4 s."""
    combining(None, keyed=True)
    _write(tmp_path / "in", BATCHES[:1])
    result = _keyed_stream(spark, tmp_path / "in", "sliding", HighestBid(fail_on=7))
    message = _failing_add(result, tmp_path)
    assert "key=1" in message
    assert f"window=TimeWindow[{BASE - 4_000}, {BASE + 6_000})" in message
