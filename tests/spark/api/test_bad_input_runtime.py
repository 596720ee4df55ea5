"""Bad input and failing user code found at run time surface as tidemark's own errors.

An error raised in a Spark worker reaches the driver wrapped by Spark; tidemark's own
actions (``num_late_records_dropped()``, a replay's scan, :class:`TidemarkStreamingQuery`)
and ``tm.raising_tidemark_errors()`` raise it as its tidemark type, message first; a plain
Spark action on a tidemark DataFrame raises an exception that is both the tidemark type
and PySpark's. Each case pins the type and what the message names: the parameter or
field, the rule, the value.
"""

from __future__ import annotations

import json
import os
import pickle
import traceback

import pytest
from pyspark.errors import PySparkException, PythonException

import tidemark as tm
from tidemark.errors import SessionSetupError, TidemarkError, WindowResultError
from tidemark.spark.runtime.surfacing import WORKER_NOTE, TidemarkStreamingQuery, tidemark_error_of

WINDOW = tm.TumblingEventTimeWindows.of(10)


class CountPerKey(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, len(list(elements)))


class CountAsWord(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, "many")


class HugeCount(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, 2**70)


class ThreeFields(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, 1, 2)


class FailsOnBoom(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        if key == "boom":
            raise KeyError("no boom allowed")
        yield (key, len(list(elements)))


class RaisingTrigger(tm.EventTimeTrigger):
    def on_element(self, element, timestamp, window, ctx):
        raise ArithmeticError("trigger broke")


class SilentTrigger(tm.EventTimeTrigger):
    def on_element(self, element, timestamp, window, ctx):
        return None


def failing_reduce(a, b):
    raise ZeroDivisionError("cannot reduce")


def _counts(df, function=None, **source):
    stream = tm.from_dataframe(df, "ts", **source).key_by("k").window(WINDOW)
    return stream.process(function or CountPerKey(), "k string, n long")


def _raised(action):
    """The exception a tidemark action raises."""
    with pytest.raises(TidemarkError) as info:
        action()
    return info.value


# ------------------------------------------------------------------ reading Spark's text


def test_a_worker_traceback_reads_back_as_the_tidemark_error_it_ends_with():
    spark_error = RuntimeError(
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "worker.py", line 1, in <module>\n'
        "tidemark.errors.InputDataError: null key in column 'k': every element needs a key\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(x.scala:1)\n"
    )
    error = tidemark_error_of(spark_error)
    assert type(error) is tm.InputDataError
    assert str(error) == "null key in column 'k': every element needs a key"
    assert error.__cause__ is spark_error
    assert WORKER_NOTE in error.__notes__


def test_a_foreach_batch_failure_reads_back_without_the_sqlstates_spark_adds():
    # a streaming query's raise_error, as a foreachBatch failure reports it
    spark_error = RuntimeError(
        "[USER_RAISED_EXCEPTION] tidemark.errors.InputDataError: null key in column 'user'"
        ". Fill in. SQLSTATE: P0001\n SQLSTATE: 39000 SQLSTATE: XXKST\n\tat org.apache"
    )
    error = tidemark_error_of(spark_error)
    assert type(error) is tm.InputDataError
    assert str(error) == "null key in column 'user'. Fill in."


def test_spark_sql_raise_error_text_reads_back_without_its_sqlstate():
    spark_error = RuntimeError(
        "[USER_RAISED_EXCEPTION] tidemark.errors.InputDataError: null timestamp in column "
        '\'ts\'; example row: {"k":"a"} SQLSTATE: P0001'
    )
    error = tidemark_error_of(spark_error)
    assert type(error) is tm.InputDataError
    assert str(error) == 'null timestamp in column \'ts\'; example row: {"k":"a"}'


def test_a_message_read_back_again_ends_before_the_note_it_was_given():
    # a foreachBatch function's action raised the error once read back: Spark's report
    # of the query's failure carries it with its note
    spark_error = RuntimeError(
        "tidemark.errors.InputDataError: null key in column 'k'. Fill in.\n"
        "(raised in a Spark task; this exception is also the PythonException PySpark "
        "raised for it, whose getMessage() has Spark's whole text)\n\tat org.apache"
    )
    assert str(tidemark_error_of(spark_error)) == "null key in column 'k'. Fill in."


def test_an_error_that_is_not_tidemarks_is_left_alone():
    assert tidemark_error_of(ValueError("tidemark.errors.NoSuchError: x")) is None
    assert tidemark_error_of(ValueError("plain")) is None
    with pytest.raises(ValueError, match="plain"), tm.raising_tidemark_errors():
        raise ValueError("plain")


@pytest.mark.parametrize(
    "error_class",
    [
        tm.WindowSpecError,
        tm.InputDataError,
        tm.UserFunctionError,
        tm.WindowResultError,
        tm.UnsupportedMergeError,
    ],
)
def test_every_tidemark_error_is_built_from_its_message_alone(error_class):
    assert str(error_class("what went wrong")) == "what went wrong"


# ------------------------------------------------------------------ input data


@pytest.mark.spark
def test_null_timestamp_is_an_input_data_error(spark):
    df = spark.createDataFrame([("a", 1), ("a", None)], "k string, ts long")
    error = _raised(_counts(df).num_late_records_dropped)
    assert type(error) is tm.InputDataError
    assert str(error).startswith("null timestamp in column 'ts'")
    assert "ts=None" in str(error)
    assert str(error).endswith("fill in or filter out those rows.")


@pytest.mark.spark
def test_unparseable_timestamp_is_an_input_data_error(spark):
    df = spark.createDataFrame(
        [("a", "2024-01-01 00:00:00"), ("a", "yesterday")], "k string, ts string"
    )
    error = _raised(_counts(df).num_late_records_dropped)
    assert type(error) is tm.InputDataError
    assert str(error).startswith("unparseable ('yesterday') timestamp in column 'ts'")
    assert "to_timestamp(column, format)" in str(error)


@pytest.mark.spark
def test_null_key_is_an_input_data_error(spark):
    df = spark.createDataFrame([("a", 1), (None, 2)], "k string, ts long")
    error = _raised(_counts(df).num_late_records_dropped)
    assert type(error) is tm.InputDataError
    assert str(error).startswith("null key in column 'k': every element needs a key")
    assert str(error).endswith("Fill in or filter out the rows without one.")


@pytest.mark.spark
def test_a_plain_spark_action_raises_the_tidemark_error_that_is_also_sparks(spark):
    # the SQL fast path (sum) refuses the null key in Spark SQL, not in a Python worker
    df = spark.createDataFrame([("a", 1, 1), (None, 2, 1)], "k string, ts long, v long")
    result = tm.from_dataframe(df, "ts").key_by("k").window(WINDOW).sum("v").to_dataframe()
    with pytest.raises(tm.InputDataError, match=r"^null key in column 'k'") as plain:
        result.collect()
    assert isinstance(plain.value, PySparkException)
    assert str(plain.value).endswith("Fill in or filter out the rows without one.")
    assert "USER_RAISED_EXCEPTION" in plain.value.getMessage()
    shown = "".join(traceback.format_exception(plain.value))
    assert "tidemark.errors.InputDataError: null key in column 'k'" in shown
    with pytest.raises(tm.InputDataError, match=r"^null key in column 'k'") as info:
        with tm.raising_tidemark_errors():
            result.collect()
    assert type(info.value) is tm.InputDataError
    assert str(info.value).endswith("Fill in or filter out the rows without one.")
    assert type(info.value.__cause__) is type(plain.value)


@pytest.mark.spark
def test_a_plain_action_raises_a_workers_error_with_the_tasks_traceback(spark):
    df = spark.createDataFrame([("a", 1), ("boom", 2)], "k string, ts long")
    result = _counts(df, FailsOnBoom()).to_dataframe()
    with pytest.raises(tm.UserFunctionError) as info:
        result.collect()
    assert isinstance(info.value, PythonException)
    assert str(info.value).startswith("the window function raised KeyError")
    (note,) = info.value.__notes__
    assert "the task's Python traceback:)\nTraceback (most recent call last):" in note
    assert "UserFunctionError" not in note  # the message is said once, as the error's
    # pickled (a worker's exception sent on, a multiprocessing pool), the tidemark error
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is tm.UserFunctionError and str(copy) == str(info.value)


@pytest.mark.spark
def test_a_plain_actions_null_key_in_a_worker_is_the_input_data_error(spark):
    df = spark.createDataFrame([("a", 1), (None, 2)], "k string, ts long")
    result = _counts(df).to_dataframe()
    with pytest.raises(tm.InputDataError, match=r"^null key in column 'k'") as info:
        result.toPandas()
    assert isinstance(info.value, PySparkException)


@pytest.mark.spark
def test_a_failure_that_is_not_tidemarks_stays_sparks(spark):
    df = spark.createDataFrame([("a", 1, 1)], "k string, ts long, v long")
    tm.from_dataframe(df, "ts").key_by("k").window(WINDOW).sum("v").to_dataframe()
    with pytest.raises(PySparkException) as info:
        spark.sql("SELECT raise_error('not tidemark')").collect()
    assert not isinstance(info.value, TidemarkError)
    assert "not tidemark" in str(info.value)


# ------------------------------------------------------------------ user functions


@pytest.mark.spark
def test_a_raising_reduce_function_is_a_user_function_error(spark):
    df = spark.createDataFrame([("a", 1, 1), ("a", 2, 2)], "k string, ts long, v long")
    result = tm.from_dataframe(df, "ts").key_by("k").window(WINDOW).reduce(failing_reduce)
    error = _raised(result.num_late_records_dropped)
    assert type(error) is tm.UserFunctionError
    assert str(error).startswith("the reduce/aggregate function raised ZeroDivisionError")
    assert "cannot reduce" in str(error) and "key='a'" in str(error)
    assert "TimeWindow[0, 10)" in str(error)


@pytest.mark.spark
def test_a_raising_trigger_is_a_user_function_error(spark):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    stream = tm.from_dataframe(df, "ts").key_by("k").window(WINDOW).trigger(RaisingTrigger())
    error = _raised(stream.process(CountPerKey(), "k string, n long").num_late_records_dropped)
    assert type(error) is tm.UserFunctionError
    assert "ArithmeticError: trigger broke" in str(error) and "key='a'" in str(error)


@pytest.mark.spark
def test_a_trigger_returning_none_is_a_user_function_error(spark):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    stream = tm.from_dataframe(df, "ts").key_by("k").window(WINDOW).trigger(SilentTrigger())
    error = _raised(stream.process(CountPerKey(), "k string, n long").num_late_records_dropped)
    assert isinstance(error, tm.UserFunctionError)
    assert "None" in str(error) and "TriggerResult" in str(error)


@pytest.mark.spark
def test_a_result_with_too_many_fields_is_a_window_result_error(spark):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    error = _raised(_counts(df, ThreeFields()).num_late_records_dropped)
    assert type(error) is WindowResultError and isinstance(error, tm.UserFunctionError)
    assert str(error).startswith("result ('a', 1, 2) has 3 fields; the `output_schema` has 2")
    assert "Return one value per field" in str(error) and "key='a'" in str(error)


@pytest.mark.spark
@pytest.mark.parametrize("order_by", [None, "ts"], ids=["batch", "replay"])
def test_a_result_value_of_the_wrong_type_names_the_field(spark, order_by):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    error = _raised(_counts(df, CountAsWord(), order_by=order_by).num_late_records_dropped)
    assert type(error) is WindowResultError
    message = str(error)
    assert message.startswith("`output_schema` field 'n' is bigint, but a result holds 'many'")
    assert "key='a'" in message and "window max_timestamp=9" in message
    assert "Return a bigint value for 'n'" in message


@pytest.mark.spark
def test_a_result_value_too_large_for_its_field_names_the_field(spark):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    error = _raised(_counts(df, HugeCount()).num_late_records_dropped)
    assert type(error) is WindowResultError
    assert str(error).startswith(f"`output_schema` field 'n' is bigint, but a result holds {2**70}")
    assert "too large" in str(error)


# ------------------------------------------------------------------ arrival order


def _ordered(spark, rows):
    return spark.createDataFrame(rows, "k string, ts long, offset long, id long")


@pytest.mark.spark
def test_ties_in_order_by_are_refused_with_an_example_pair(spark):
    df = _ordered(spark, [("a", 5, 1, 1), ("a", 2, 2, 1), ("b", 7, 2, 2), ("a", 9, 3, 1)])
    with pytest.raises(tm.InputDataError) as info:
        _counts(df, order_by="offset").to_dataframe()
    message = str(info.value)
    assert message.startswith("`order_by`='offset' must give every row its own place")
    assert "offset=2, timestamp=2ms" in message and "offset=2, timestamp=7ms" in message
    assert "order_by=['offset', 'id'] to break ties by a rule you state" in message


@pytest.mark.spark
def test_a_null_order_by_value_is_refused(spark):
    df = _ordered(spark, [("a", 5, 1, 1), ("a", 6, None, 2)])
    with pytest.raises(tm.InputDataError, match=r"no `order_by` value \(null 'offset'\)"):
        _counts(df, order_by="offset").to_dataframe()


@pytest.mark.spark
def test_a_null_tie_breaker_names_the_column_to_fill_or_drop(spark):
    # 'offset' is unique already; the tie-breaker 'id' is null: the fix is not order_by itself
    df = _ordered(spark, [("a", 1, 1, None), ("a", 2, 2, None)])
    with pytest.raises(tm.InputDataError) as info:
        _counts(df, order_by=["offset", "id"]).to_dataframe().collect()
    assert str(info.value) == (
        "`order_by`=['offset', 'id'] must give every row its own place in the arrival order; "
        "a row has no `order_by` value (null 'id'): (offset=1, id=None, timestamp=1ms); fill "
        "'id' in with values that keep the rows apart, or filter those rows out; or, if "
        "'offset' alone gives every row its own place, drop 'id': order_by='offset'"
    )


@pytest.mark.spark
def test_a_null_first_order_by_column_names_the_column_to_fill(spark):
    df = _ordered(spark, [("a", 5, 1, 1), ("a", 6, None, 2)])
    with pytest.raises(tm.InputDataError) as info:
        _counts(df, order_by=["offset", "id"]).to_dataframe().collect()
    assert str(info.value).endswith(
        "(null 'offset'): (offset=None, id=2, timestamp=6ms); fill 'offset' in with values "
        "that keep the rows apart, or filter those rows out"
    )


@pytest.mark.spark
def test_ties_in_several_order_by_columns_ask_for_one_more(spark):
    df = _ordered(spark, [("a", 5, 1, 1), ("a", 6, 1, 1)])
    with pytest.raises(tm.InputDataError) as info:
        _counts(df, order_by=["offset", "id"]).to_dataframe().collect()
    assert str(info.value).endswith(
        "Give order_by one more column: order_by=['offset', 'id', '<another column>'] to "
        "break ties by a rule you state"
    )


@pytest.mark.spark
def test_a_second_order_by_column_breaks_ties_whatever_the_partitioning(spark):
    rows = [("a" if i % 3 else "b", (i * 7) % 23, i // 4, i % 4) for i in range(40)]
    df = _ordered(spark, rows)
    late = tm.OutputTag("late")

    def run(frame):
        stream = tm.from_dataframe(frame, "ts", order_by=["offset", "id"])
        windowed = stream.key_by("k").window(WINDOW).side_output_late_data(late)
        result = windowed.process(CountPerKey(), "k string, n long")
        main = sorted(tuple(r) for r in result.to_dataframe().collect())
        dropped = sorted(tuple(r) for r in result.get_side_output(late).to_dataframe().collect())
        return main, dropped

    expected = run(df)
    assert expected[1], "the case must have late rows for the order to matter"
    assert run(df.repartition(7)) == expected
    assert run(df.repartition(3, "id")) == expected


@pytest.mark.spark
def test_order_by_must_name_columns(spark):
    df = _ordered(spark, [("a", 5, 1, 1)])
    with pytest.raises(tm.WindowSpecError, match=r"`order_by` must be a column name or a"):
        tm.from_dataframe(df, "ts", order_by=[])
    with pytest.raises(tm.WindowSpecError, match=r"`order_by` names a missing column 'nope'"):
        tm.from_dataframe(df, "ts", order_by=["offset", "nope"])


# ------------------------------------------------------------------ streaming


@pytest.mark.spark
def test_a_failed_streaming_query_raises_the_tidemark_error(spark, tmp_path):
    source_dir = tmp_path / "in"
    source_dir.mkdir()
    rows = [{"k": "ok", "ts": 1}, {"k": "boom", "ts": 2}]
    (source_dir / "batch-0.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    os.utime(source_dir / "batch-0.json", (1_000_000, 1_000_000))
    source = spark.readStream.schema("k string, ts long").json(str(source_dir))
    windowed = tm.from_dataframe(source, "ts").key_by("k").window(WINDOW)
    result = windowed.trigger(tm.CountTrigger.of(1)).process(FailsOnBoom(), "k string, n long")
    query = TidemarkStreamingQuery(
        result.write_outputs({"main": lambda df, b: df.collect()}, str(tmp_path / "cp"))
    )
    try:
        with pytest.raises(tm.UserFunctionError) as info:
            query.processAllAvailable()
        assert str(info.value).startswith("the window function raised KeyError")
        assert "key='boom'" in str(info.value)
        assert isinstance(query.exception(), tm.UserFunctionError)
        assert query.id is not None  # everything else is the query's own
    finally:
        query.stop()


@pytest.mark.spark
def test_a_streaming_result_of_the_wrong_type_names_the_field(spark, tmp_path):
    """On a stream Spark converts the output frame itself: the check runs before, so the
    query fails with the field named, as in BATCH, not with Arrow's raw error."""
    source_dir = tmp_path / "in"
    source_dir.mkdir()
    (source_dir / "batch-0.json").write_text(json.dumps({"k": "a", "ts": 1}) + "\n")
    source = spark.readStream.schema("k string, ts long").json(str(source_dir))
    # an element at 1 ms makes a watermark at the epoch: only a shifted clock carries it
    windowed = tm.from_dataframe(source, "ts", shift_spark_clock=True).key_by("k").window(WINDOW)
    result = windowed.trigger(tm.CountTrigger.of(1)).process(CountAsWord(), "k string, n long")
    query = result.write_outputs({"main": lambda df, b: df.collect()}, str(tmp_path / "cp"))
    try:
        with pytest.raises(WindowResultError) as info:
            query.processAllAvailable()
        message = str(info.value)
        assert message.startswith("`output_schema` field 'n' is bigint, but a result holds 'many'")
        assert "window max_timestamp=9" in message
    finally:
        query.stop()


def test_a_foreach_batch_failure_without_text_is_read_from_the_sink_call():
    """Spark sometimes reports a failed foreachBatch as "Return Message: null": the
    error the splitter saw on the driver gives the tidemark type then."""

    class Failed:
        def processAllAvailable(self):  # noqa: N802
            raise RuntimeError("An exception was raised by the Python Proxy. Return Message: null")

    seen = RuntimeError("Traceback ...\ntidemark.errors.InputDataError: null key in column 'k'\n")
    query = TidemarkStreamingQuery(Failed(), batch_failure=lambda: seen)
    with pytest.raises(tm.InputDataError, match="null key in column 'k'"):
        query.processAllAvailable()
    with pytest.raises(RuntimeError, match="Return Message: null"):
        TidemarkStreamingQuery(Failed()).processAllAvailable()


class _CapturedKafkaFailure(Exception):
    """What PySpark 4.1.1 raises for SPARK-55271: the text without frames, the frames in
    the captured exception's JVM stack trace."""

    _stackTrace = (
        "java.lang.NullPointerException: Cannot invoke ...\n"
        "\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics("
        "KafkaMicroBatchStream.scala:520)\n"
    )


class _FailedQuery:
    def __init__(self, failure: BaseException):
        self.failure = failure

    def awaitTermination(self, timeout=None):  # noqa: N802
        raise self.failure

    def exception(self):
        return self.failure


def test_sparks_kafka_restart_bug_is_said_with_the_way_out():
    """A restart on Spark 4.1's Kafka connector that fails in its progress report
    (SPARK-55271) raises SessionSetupError: the bug, that nothing is lost, what to do."""
    failure = _CapturedKafkaFailure(
        '[STREAM_FAILED] Query terminated with exception: Cannot invoke "scala.collection.'
        'IterableOps.map(scala.Function1)" because the return value of "scala.Option.get()" '
        "is null"
    )
    query = TidemarkStreamingQuery(_FailedQuery(failure))
    with pytest.raises(SessionSetupError, match="SPARK-55271") as info:
        query.awaitTermination()
    assert "start the query again" in str(info.value) and info.value.__cause__ is failure
    assert isinstance(query.exception(), SessionSetupError)
    other = TidemarkStreamingQuery(_FailedQuery(RuntimeError("java.lang.NullPointerException")))
    with pytest.raises(RuntimeError):  # any other failure is Spark's own, unchanged
        other.awaitTermination()
