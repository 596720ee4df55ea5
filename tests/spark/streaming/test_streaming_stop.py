"""``query.stop()`` during a micro-batch: Spark reads the error the interrupted
``foreachBatch`` function raised as a stop, where the text of the error as raised made
Spark's own check overflow the stack (:mod:`tidemark.spark.streaming.driver.stopping`)."""

from __future__ import annotations

import json
import threading
import time
import traceback

import pytest
from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JJavaError

import tidemark as tm
from tidemark.spark.streaming.driver.stopping import stop_signal

pytestmark = pytest.mark.spark


def _sent(error: BaseException) -> str:
    """The text py4j hands Spark for an error a ``foreachBatch`` function raised."""
    try:
        raise error
    except Exception:
        return traceback.format_exc()


def _spark_reads_as_stop(spark, text: str) -> bool:
    """Spark's own check of a ``foreachBatch`` function's error text."""
    jvm = spark._jvm
    for package in (  # Spark 4.1 moved it
        jvm.org.apache.spark.sql.execution.streaming.runtime,
        jvm.org.apache.spark.sql.execution.streaming,
    ):
        check = package.StreamExecution
        if isinstance(check, JavaClass):
            error = jvm.py4j.Py4JException(text)
            return bool(check.isInterruptionException(error, spark.sparkContext._jsc.sc()))
    raise AssertionError("Spark's StreamExecution not found")


def _java_error(spark, throwable) -> Py4JJavaError:
    return Py4JJavaError("An error occurred while calling o42.collect.\n", throwable)


def test_an_interruption_is_sent_as_one_line_spark_reads_as_a_stop(spark):
    jvm = spark._jvm
    interrupted = _java_error(spark, jvm.java.lang.InterruptedException())
    signal = stop_signal(interrupted)
    assert isinstance(signal, Py4JJavaError)
    assert (
        str(signal)
        == "An error occurred while calling o42.collect.\n: java.lang.InterruptedException"
    )
    assert "py4j.protocol.Py4JJavaError: An error occurred" in _sent(signal)
    assert _spark_reads_as_stop(spark, _sent(signal))
    # an interruption as the cause of the failure, and a job cancelled with its group
    wrapped = jvm.org.apache.spark.SparkException(
        "Job aborted.", jvm.java.lang.InterruptedException()
    )
    assert "InterruptedException" in str(stop_signal(_java_error(spark, wrapped)))
    cancelled = jvm.org.apache.spark.SparkException(
        "Job 7 cancelled part of cancelled job group q1"
    )
    signal = stop_signal(_java_error(spark, cancelled))
    assert "cancelled job group q1" in str(signal)
    assert _spark_reads_as_stop(spark, _sent(signal))
    assert stop_signal(signal) is None  # already one line


def test_a_job_cancelled_with_the_querys_job_group_is_a_stop_spark_reads(spark):
    """Spark 4 cancels a stopped query's jobs with its job group (the run id) and says
    why; the error of the foreachBatch function's job then names no interruption, and
    Spark's check of the text would read it as a failure (or overflow on its length)."""
    jvm = spark._jvm
    run_id = "cf3d0b60-e445-49b3-998f-60dbd3f2516f"
    cancelled = jvm.org.apache.spark.SparkException(
        "[SPARK_JOB_CANCELLED] Job 1988 cancelled Query [id = a24fdf8b-4a8f-4eb7-9d18-"
        f"79da0127d4bd, runId = {run_id}] was stopped SQLSTATE: XXKDA"
    )
    error = _java_error(spark, cancelled)
    assert not _spark_reads_as_stop(spark, _sent(error))
    signal = stop_signal(error, job_group=run_id)
    assert "[SPARK_JOB_CANCELLED] Job 1988 cancelled" in str(signal)
    assert _spark_reads_as_stop(spark, _sent(signal))
    # a job of another group cancelled (the user's own, say) is the sink's failure
    assert stop_signal(error, job_group="another-run") is None
    assert stop_signal(error) is None  # no group known: not read as this query's stop


def test_an_interruption_anywhere_in_the_java_trace_is_a_stop(spark):
    """Spark reads an interruption named anywhere in the error's text as a stop (its
    check searches the whole trace): one deep among the causes, or only suppressed, is
    a stop here too, else the long text goes to Spark and its check overflows."""
    jvm = spark._jvm
    deep = jvm.java.lang.InterruptedException("deep")
    for n in range(12):
        deep = jvm.org.apache.spark.SparkException(f"level {n}", deep)
    assert "InterruptedException" in str(stop_signal(_java_error(spark, deep)))
    suppressing = jvm.org.apache.spark.SparkException("Job aborted.")
    suppressing.addSuppressed(jvm.java.nio.channels.ClosedByInterruptException())
    signal = stop_signal(_java_error(spark, suppressing))
    assert "ClosedByInterruptException" in str(signal)
    assert _spark_reads_as_stop(spark, _sent(signal))
    failed = jvm.org.apache.spark.SparkException("level 0", jvm.java.lang.IllegalStateException())
    assert stop_signal(_java_error(spark, failed)) is None


def test_any_other_error_is_raised_as_it_was(spark):
    jvm = spark._jvm
    failed = _java_error(spark, jvm.java.lang.IllegalStateException("no such table"))
    assert stop_signal(failed) is None
    assert stop_signal(ValueError("a sink's own error")) is None
    shut = jvm.org.apache.spark.SparkException("Job 3 cancelled because SparkContext was shut down")
    assert stop_signal(_java_error(spark, shut)) is None


def test_a_stop_during_a_micro_batch_stops_the_query_as_spark_stops_any(spark, tmp_path):
    """The sink waits in a Spark job when the query is stopped: the job is interrupted,
    the query stops without an exception, and what went to Spark is what its check reads
    as a stop (the error as raised made the check overflow the stack)."""
    source = tmp_path / "in"
    source.mkdir()
    rows = [{"user": "a", "ts": t} for t in (1_000, 2_000, 61_000)]
    (source / "0.json").write_text("\n".join(json.dumps(row) for row in rows))
    stream = tm.from_dataframe(
        spark.readStream.schema("user string, ts long").json(str(source)),
        timestamp="ts",
        watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
    )
    result = stream.key_by("user").window(tm.TumblingEventTimeWindows.of(60_000)).sum("ts")
    waiting = threading.Event()

    def sink(df, batch_id):
        waiting.set()  # then a job that runs until the stop interrupts it
        df.sparkSession.range(0, 10**13, numPartitions=2).selectExpr("max(id)").collect()

    query = result.write_outputs({"main": sink}, checkpoint=str(tmp_path / "checkpoint"))
    try:
        assert waiting.wait(120), "the first micro-batch never reached the sink"
        time.sleep(1)
    finally:
        query.stop()
    assert query.exception() is None
    raised = query._batch_failure()  # what the query's foreachBatch function raised
    assert isinstance(raised, Py4JJavaError)
    # what the sink raised, whole where it was not read as a stop (met twice under load:
    # its job cancelled with the query's job group, a form stop_signal did not know)
    assert _spark_reads_as_stop(spark, _sent(raised)), str(raised)[:4000]
    with pytest.raises(Py4JJavaError, match="StackOverflowError"):
        _spark_reads_as_stop(spark, _sent(raised.__context__))  # the error as the sink raised it
