"""A micro-batch cut short by ``query.stop()``, reported to Spark in a form it can read.

When ``StreamingQuery.stop()`` interrupts a micro-batch, the Spark job that the query's
``foreachBatch`` function (:func:`~.sinks.write_outputs`) was waiting for fails with a
``java.lang.InterruptedException`` (or a job cancelled with the query's job group), and
the function raises a ``Py4JJavaError``. py4j hands Spark the Python traceback as text,
and Spark tells a stop from a failure by matching that text with a regular expression
(``StreamExecution.isInterruptionException``) whose matching recurses once per character.
On a traceback carrying the Java stack trace (some thousand characters) the check itself
overflows the stack: the query's thread dies printing a ``java.lang.StackOverflowError``
of a thousand lines, instead of stopping quietly.

:func:`stop_signal` gives, for such an error, the same ``Py4JJavaError`` whose text is
the interruption's line alone, which Spark's check reads as a stop. A job cancelled with
the query's job group (Spark 4 cancels a stopped query's jobs so, saying why: "Job N
cancelled Query [id = ..., runId = ...] was stopped") names no interruption: Spark's
check of a ``SparkException`` reads it as a stop, its check of the text does not (the
query would end with that error, or overflow), so its line is sent with the
interruption's name beside it. Any other error is raised as it was. Spark stops the
query either way and does not commit the micro-batch (a restart from the checkpoint runs
it again).
"""

from __future__ import annotations

from typing import Any

from py4j.protocol import Py4JJavaError

__all__ = ["stop_signal", "INTERRUPTIONS"]

INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""The Java exceptions Spark reads as a stopped query (with a job cancelled in its group)."""

_CAUSES = 8  # how deep the Java causes are searched


class _StopSignal(Py4JJavaError):
    """A ``Py4JJavaError`` whose text is one line of its Java exception. Python prints an
    exception's class by its module and qualified name, which is what Spark's check
    reads: they are ``py4j.protocol.Py4JJavaError``'s."""

    __module__ = "py4j.protocol"
    __qualname__ = "Py4JJavaError"

    def __init__(self, msg: str, java_exception: Any, line: str):
        super().__init__(msg, java_exception)
        self.line = line

    def __str__(self) -> str:
        return f"{self.errmsg}: {self.line}"


def stop_signal(error: BaseException, job_group: str | None = None) -> Py4JJavaError | None:
    """``error`` as a short ``Py4JJavaError`` naming the interruption, when it is a
    micro-batch's Spark job interrupted or cancelled (a query being stopped): one of its
    Java exception's first causes is an interruption, or a job cancelled with
    ``job_group`` (the query's, ``spark.jobGroup.id`` in its ``foreachBatch`` function;
    None: a job cancelled with a job group Spark names), or (as Spark's check reads the
    text) its trace names an interruption anywhere, deeper or suppressed. Else None."""
    if not isinstance(error, Py4JJavaError) or isinstance(error, _StopSignal):
        return None
    try:
        lines = _java_lines(error.java_exception)
        for line in lines:
            if line.startswith(INTERRUPTIONS):
                return _StopSignal(error.errmsg, error.java_exception, line)
            if _cancelled_job(line, job_group):
                line = f"{line} (a stop, as {INTERRUPTIONS[0]})"  # what Spark's check reads
                return _StopSignal(error.errmsg, error.java_exception, line)
        # Spark's check finds an interruption named anywhere in the text: deeper among
        # the causes, or suppressed
        trace = str(error)
    except Exception:  # the JVM is gone: nothing to read, raise the error as it was
        return None
    named = [name for name in INTERRUPTIONS if name in trace]
    return _StopSignal(error.errmsg, error.java_exception, named[0]) if named else None


def _java_lines(throwable: Any) -> list[str]:
    """The first line of ``throwable``'s ``toString()`` and of each of its causes."""
    lines = []
    for _ in range(_CAUSES):
        if throwable is None:
            break
        lines.append(str(throwable.toString()).splitlines()[0])
        throwable = throwable.getCause()
    return lines


def _cancelled_job(line: str, job_group: str | None) -> bool:
    """Whether ``line`` is a Spark job cancelled with ``job_group`` (as Spark's check of a
    ``SparkException`` reads it: "cancelled" and the group's id), or, the group unknown,
    with a job group it names ("Job 7 cancelled part of cancelled job group <id>")."""
    if not line.startswith("org.apache.spark.SparkException") or "cancelled" not in line:
        return False
    return job_group in line if job_group else "cancelled job group" in line
