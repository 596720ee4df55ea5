"""Definition mistakes a careless user makes (issue 28's closing check): each is a
``WindowSpecError`` or a ``TidemarkWarning`` when the window is defined, naming the fix,
before any data; the same in BATCH, a replay and on a stream.

- ``GlobalWindows.create()`` without a trigger (Flink's NeverTrigger: nothing ever fires);
- a class where an instance is needed (``process(CountSum)``: a TypeError from the
  worker in BATCH and a complaint about the result's fields in a replay before);
- ``window`` on a stream without ``key_by`` (a raw AttributeError before);
"""

from __future__ import annotations

import re
import warnings

import pytest

import tidemark as tm
from tidemark.errors import TidemarkWarning

pytestmark = pytest.mark.spark

ROWS = [("a", 1, 1, 1), ("a", 5, 2, 2), ("b", 25, 8, 4)]
SCHEMA = "k string, ts long, v long, o long"


@pytest.fixture(scope="module")
def df(spark):
    return spark.createDataFrame(ROWS, SCHEMA)


@pytest.fixture(scope="module")
def stream(spark, tmp_path_factory):
    """A streaming DataFrame (a file source: defining on it starts nothing)."""
    return spark.readStream.schema(SCHEMA).json(str(tmp_path_factory.mktemp("stream")))


def _tidemark_warnings(define):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = define()
    ours = [w for w in caught if issubclass(w.category, TidemarkWarning)]
    assert all(w.filename == __file__ for w in ours), "a warning points at the user's line"
    return result, [str(w.message) for w in ours]


# ------------------------------------------------------------- global windows, no trigger

NEVER_FIRES = (
    "GlobalWindows.create() without .trigger(...) never fires (Flink's NeverTrigger): "
    "every element is kept and no window result comes, none counted as dropped; "
    "add a trigger, e.g. .trigger(tm.CountTrigger.of(n)), or use key_by(...)."
    "count_window(n), GlobalWindows.create_with_end_of_stream_trigger() (one result "
    "at the end of a bounded input) or a custom Trigger"
)


@pytest.mark.parametrize("order_by", [None, "o"], ids=["batch", "replay"])
def test_global_windows_without_a_trigger_warn_and_keep_flinks_empty_result(df, order_by):
    def define():
        source = tm.from_dataframe(
            df,
            "ts",
            order_by=order_by,
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        return source.key_by("k").window(tm.GlobalWindows.create()).sum("v")

    result, caught = _tidemark_warnings(define)
    assert caught == [NEVER_FIRES]
    with tm.raising_tidemark_errors():
        assert result.to_dataframe().collect() == []  # Flink's NeverTrigger: no result
    assert result.num_late_records_dropped() == 0


def test_global_windows_without_a_trigger_warn_on_a_stream(stream):
    def define():
        windowed = tm.from_dataframe(stream, "ts").key_by("k").window(tm.GlobalWindows.create())
        return windowed.process(_Count(), "k string, n long")

    _, caught = _tidemark_warnings(define)
    assert caught == [NEVER_FIRES]


@pytest.mark.parametrize(
    "finish",
    [
        pytest.param(lambda w: w.trigger(tm.CountTrigger.of(2)).sum("v"), id="trigger"),
        pytest.param(
            lambda w: w.evictor(tm.CountEvictor.of(1)).trigger(tm.CountTrigger.of(1)).sum("v"),
            id="trigger-after-evictor",
        ),
    ],
)
def test_global_windows_with_a_trigger_do_not_warn(df, finish):
    windowed = tm.from_dataframe(df, "ts").key_by("k").window(tm.GlobalWindows.create())
    _, caught = _tidemark_warnings(lambda: finish(windowed))
    assert caught == []


@pytest.mark.parametrize(
    "define",
    [
        pytest.param(lambda s: s.key_by("k").count_window(2).sum("v"), id="count-window"),
        pytest.param(
            lambda s: (
                s.key_by("k").window(tm.GlobalWindows.create_with_end_of_stream_trigger()).sum("v")
            ),
            id="end-of-stream",
        ),
    ],
)
def test_global_windows_that_fire_do_not_warn(df, define):
    _, caught = _tidemark_warnings(lambda: define(tm.from_dataframe(df, "ts")))
    assert caught == []


class _Count(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, len(list(elements)))


# ------------------------------------------------------- a class instead of an instance


class CountSum(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, context.window().start, len(list(elements)))


class Sum(tm.ReduceFunction):
    def reduce(self, value1, value2):
        return value1


class Average(tm.AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value.v

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class Apply(tm.WindowFunction):
    def apply(self, key, window, inputs):
        yield (key, window.start, 0)


TEN = tm.TumblingEventTimeWindows.of(10)
OUT = "k string, start long, n long"


def _class_message(parameter, name, instance):
    return re.escape(
        f"`{parameter}` must be an instance, not the class {name}: pass {instance}; got <class"
    )


@pytest.mark.parametrize(
    ("finish", "parameter", "name", "instance"),
    [
        pytest.param(
            lambda w: w.process(CountSum, OUT), "function", "CountSum", "CountSum()", id="process"
        ),
        pytest.param(lambda w: w.reduce(Sum), "function", "Sum", "Sum()", id="reduce"),
        pytest.param(
            lambda w: w.aggregate(Average, output_schema=OUT),
            "function",
            "Average",
            "Average()",
            id="aggregate",
        ),
        pytest.param(lambda w: w.apply(Apply, OUT), "function", "Apply", "Apply()", id="apply"),
        pytest.param(
            lambda w: w.reduce(Sum(), CountSum, OUT),
            "window_function",
            "CountSum",
            "CountSum()",
            id="reduce-window-function",
        ),
        pytest.param(
            lambda w: w.trigger(tm.CountTrigger),
            "trigger",
            "CountTrigger",
            "CountTrigger.of(...)",
            id="trigger",
        ),
        pytest.param(
            lambda w: w.evictor(tm.CountEvictor),
            "evictor",
            "CountEvictor",
            "CountEvictor.of(...)",
            id="evictor",
        ),
    ],
)
@pytest.mark.parametrize("mode", ["batch", "replay", "stream"])
def test_a_class_for_an_instance_is_refused_when_defined(
    df, stream, mode, finish, parameter, name, instance
):
    source = tm.from_dataframe(
        stream if mode == "stream" else df,
        "ts",
        order_by="o" if mode == "replay" else None,
        watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
    )
    windowed = source.key_by("k").window(TEN)
    with pytest.raises(tm.WindowSpecError, match=_class_message(parameter, name, instance)):
        finish(windowed)


@pytest.mark.parametrize("mode", ["keyed", "all"])
def test_an_assigner_class_is_refused_when_defined(df, mode):
    source = tm.from_dataframe(df, "ts")
    window = source.key_by("k").window if mode == "keyed" else source.window_all
    message = _class_message(
        "assigner", "TumblingEventTimeWindows", "TumblingEventTimeWindows.of(...)"
    )
    with pytest.raises(tm.WindowSpecError, match=message):
        window(tm.TumblingEventTimeWindows)


def test_an_instance_still_runs(df):
    result = tm.from_dataframe(df, "ts").key_by("k").window(TEN).process(CountSum(), OUT)
    with tm.raising_tidemark_errors():
        rows = sorted(tuple(r) for r in result.to_dataframe().collect())
    assert rows == [("a", 0, 2), ("b", 20, 1)]


# ------------------------------------------------------------------ window without key_by

UNKEYED = re.escape(
    "`window` needs a key, as in Flink: use key_by(...).window(TumblingEventTimeWindows"
    ".of(10ms, offset=0ms)) for windows per key, or window_all(TumblingEventTimeWindows"
    ".of(10ms, offset=0ms)) for one window over all elements"
)


@pytest.mark.parametrize("mode", ["batch", "replay", "stream", "window-results"])
def test_window_without_key_by_names_key_by_and_window_all(df, stream, mode):
    source = tm.from_dataframe(
        stream if mode == "stream" else df,
        "ts",
        order_by="o" if mode == "replay" else None,
        watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
    )
    if mode == "window-results":
        source = source.key_by("k").window(TEN).sum("v")
    with pytest.raises(tm.WindowSpecError, match=UNKEYED):
        source.window(TEN)
