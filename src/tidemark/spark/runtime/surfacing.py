"""tidemark's errors raised in Spark's Python workers, raised again as themselves.

An error a tidemark task raises (an :class:`~tidemark.errors.InputDataError` for a null
key, a :class:`~tidemark.errors.UserFunctionError` for a window function that raised)
reaches the driver wrapped by Spark: a ``PythonException`` ("An exception was thrown
from the Python worker", the worker's traceback in its message), a ``Py4JJavaError``, a
``StreamingQueryException`` or, on Spark Connect, a ``SparkConnectGrpcException``. None
can be caught as tidemark's type, and tidemark's line is buried in Java frames.

:func:`tidemark_error_of` reads the tidemark error back from such an exception's text;
:func:`raising_tidemark_errors` raises it, message first, with the Spark exception as
its ``__cause__``. tidemark's own actions (``num_late_records_dropped()``, a replay's
watermark scan) run inside it, and so does :class:`TidemarkStreamingQuery`. A plain
Spark action on a tidemark DataFrame does not; read its errors the same way::

    import tidemark as tm

    with tm.raising_tidemark_errors():
        result.to_dataframe().collect()  # raises tm.InputDataError, tm.UserFunctionError...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tidemark import errors
from tidemark.errors import TidemarkError

__all__ = [
    "tidemark_error_of",
    "raising_tidemark_errors",
    "raise_error_column",
    "TidemarkStreamingQuery",
    "WORKER_NOTE",
    "known_spark_failure",
]

WORKER_NOTE = (
    "(raised in a Spark task and read back from Spark's error, chained as __cause__; "
    "the task's Python traceback is in it)"
)

# The last line of the worker's traceback: "tidemark.errors.InputDataError: message".
# Spark SQL's raise_error (the SQL fast path) carries the same prefix in its message.
_RAISED = re.compile(r"tidemark\.errors\.([A-Za-z]+): ")
# What follows a message in Spark's text: a Java frame, a blank line, Spark's trailers.
# (A streaming query's foreachBatch failure adds Spark's SQLSTATEs on a line of their own.)
_TRAILER = re.compile(
    r"^\s*(at |Caused by|\.\.\. \d+ more|=== |JVM stacktrace)|^(\s*SQLSTATE: \w+)*\s*$"
)
_SQLSTATE = re.compile(r"(\s*SQLSTATE: \w+)+\s*$")


def tidemark_error_of(exc: BaseException) -> TidemarkError | None:
    """The tidemark error a Spark exception reports (the last one in its text), built
    from its message, with ``exc`` as its ``__cause__``; None when it reports none.

    Parameters
    ----------
    exc : BaseException
        What a Spark action raised: a ``PythonException``, ``Py4JJavaError``,
        ``StreamingQueryException``, ``SparkConnectGrpcException`` or any other.

    Examples
    --------
    >>> error = tidemark_error_of(RuntimeError(
    ...     "Traceback (most recent call last):\\n  ...\\n"
    ...     "tidemark.errors.InputDataError: null key in column 'k'\\n\\tat org.apache"))
    >>> type(error).__name__, str(error)
    ('InputDataError', "null key in column 'k'")
    """
    if isinstance(exc, TidemarkError):
        return exc
    text = _text_of(exc)
    found = list(_RAISED.finditer(text))
    error_class = getattr(errors, found[-1].group(1), None) if found else None
    if not (isinstance(error_class, type) and issubclass(error_class, TidemarkError)):
        return None
    error = error_class(_message_at(text, found[-1].end()))
    error.__cause__ = exc
    error.__notes__ = [WORKER_NOTE]  # type: ignore[attr-defined]  # add_note(): 3.11+
    return error


# Failures of Spark's own that a streaming query can meet, each with what to do. The
# first: spark-sql-kafka-0-10 4.1.1 (SPARK-55271, SPARK-57438) reports a micro-batch's
# progress before its source knows the latest offsets when a restart runs the batch the
# offsets log names again, and fails there, after the batch has been committed.
_KAFKA_METRICS = re.compile(r"NullPointerException.*?KafkaMicroBatchStream\$?\.metrics", re.DOTALL)
KAFKA_RESTART_MESSAGE = (
    "Spark's Kafka source failed while reporting the progress of the first micro-batch "
    "after a restart (a NullPointerException in KafkaMicroBatchStream.metrics: Spark's "
    "bug SPARK-55271 in spark-sql-kafka-0-10 4.1.x). The micro-batch itself ran and was "
    "committed, so nothing is lost or written twice: start the query again on the same "
    "checkpoint and it goes on from the next micro-batch (a connector with the fix, or "
    "Spark 4.0 or 4.2, does not fail there)"
)


def known_spark_failure(exc: BaseException) -> TidemarkError | None:
    """A failure of Spark's own that tidemark recognises, as a
    :class:`~tidemark.errors.SessionSetupError` saying what happened and what to do;
    None for any other failure.

    >>> error = known_spark_failure(RuntimeError(
    ...     "java.lang.NullPointerException: Cannot invoke ...\\n"
    ...     "\\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics(...)"))
    >>> type(error).__name__, "SPARK-55271" in str(error)
    ('SessionSetupError', True)
    """
    # The frames are in PySpark's captured exception's JVM stack trace (printed only with
    # spark.sql.pyspark.jvmStacktrace.enabled), not in its text.
    frames = getattr(exc, "_stackTrace", None) or ""
    if not _KAFKA_METRICS.search(_text_of(exc) + "\n" + str(frames)):
        return None
    error = errors.SessionSetupError(KAFKA_RESTART_MESSAGE)
    error.__cause__ = exc
    return error


def _text_of(exc: BaseException) -> str:
    """Everything the exception says: its text and its message (PySpark's captured
    exceptions keep the worker's traceback in one or the other, by version)."""
    parts = [str(exc)]
    get_message = getattr(exc, "getMessage", None)
    if callable(get_message):
        try:
            parts.append(str(get_message()))
        except Exception:  # a Py4J object whose JVM is gone: its text is enough
            pass
    return "\n".join(parts)


def _message_at(text: str, start: int) -> str:
    """The message that begins at ``start``: to the end of its line, and the lines after
    it up to the first that is Spark's (a Java frame, a blank line)."""
    lines = text[start:].splitlines()
    message = lines[:1]
    for line in lines[1:]:
        if _TRAILER.match(line):
            break
        message.append(line)
    return _SQLSTATE.sub("", "\n".join(message)).strip()


def raise_error_column(error: type[TidemarkError], message: Any) -> Any:
    """Spark's ``raise_error`` with ``message`` (a string Column), which tidemark reads
    back as ``error``.

    The prefix ``tidemark.errors.<Name>: `` is two literals: a streaming query's failure
    prints its whole plan, whatever the cause, and one literal would make any failure
    of a plan holding this check read as ``error``.
    """
    from pyspark.sql import functions as F

    return F.raise_error(F.concat(F.lit("tidemark.errors."), F.lit(f"{error.__name__}: "), message))


@contextmanager
def raising_tidemark_errors() -> Iterator[None]:
    """Raise the tidemark error a Spark action inside reports as that error.

    A tidemark task's error reaches the driver wrapped in Spark's exception; inside this
    context it is raised as tidemark's own type (``InputDataError``,
    ``UserFunctionError``, ...), its message first, the Spark exception chained as
    ``__cause__``. An exception that reports no tidemark error is raised unchanged.

    Examples
    --------
    How to read a tidemark error from a plain Spark action::

        with tm.raising_tidemark_errors():
            result.to_dataframe().collect()
    """
    try:
        yield
    except TidemarkError:
        raise
    except Exception as exc:
        error = tidemark_error_of(exc)
        if error is None:
            raise
        raise error from exc


class TidemarkStreamingQuery:
    """A ``StreamingQuery`` whose failures are raised as tidemark's errors.

    Everything is the query's own (``id``, ``stop()``, ``lastProgress``, ...), except
    that :meth:`awaitTermination` and :meth:`processAllAvailable` raise the tidemark
    error a failed query reports (see :func:`raising_tidemark_errors`), and
    :meth:`exception` returns it.

    ``batch_failure`` (optional) returns what the query's ``foreachBatch`` function last
    raised on the driver: Spark's report of a failed ``foreachBatch`` sometimes carries
    no text at all ("Return Message: null"), and the error is then read from there.
    """

    def __init__(self, query: Any, batch_failure: Callable[[], BaseException | None] | None = None):
        self.query = query
        self._batch_failure = batch_failure

    def __getattr__(self, name: str) -> Any:
        return getattr(self.query, name)

    def __repr__(self) -> str:
        return f"TidemarkStreamingQuery({self.query!r})"

    def awaitTermination(self, timeout: int | None = None) -> bool | None:  # noqa: N802
        """``StreamingQuery.awaitTermination``; a failure as tidemark's error."""
        with self._raising():
            return self.query.awaitTermination(timeout)  # type: ignore[no-any-return]

    def processAllAvailable(self) -> None:  # noqa: N802
        """``StreamingQuery.processAllAvailable``; a failure as tidemark's error."""
        with self._raising():
            self.query.processAllAvailable()

    @contextmanager
    def _raising(self) -> Iterator[None]:
        try:
            yield
        except TidemarkError:
            raise
        except Exception as exc:
            error = self._tidemark_error(exc)
            if error is None:
                raise
            raise error from exc

    def _tidemark_error(self, failure: BaseException) -> TidemarkError | None:
        """The tidemark error ``failure`` reports, else the one the query's
        ``foreachBatch`` function last raised."""
        error = tidemark_error_of(failure)
        if error is None and self._batch_failure is not None:
            raised = self._batch_failure()
            error = None if raised is None else tidemark_error_of(raised)
        return error or known_spark_failure(failure)

    def exception(self) -> BaseException | None:
        """The query's failure (None while it has none), as tidemark's error when it
        reports one."""
        failure = self.query.exception()
        if failure is None:
            return None
        return self._tidemark_error(failure) or failure
