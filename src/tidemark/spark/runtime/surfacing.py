"""tidemark's errors raised in Spark's Python workers, raised again as themselves.

An error a tidemark task raises (an :class:`~tidemark.errors.InputDataError` for a null
key, a :class:`~tidemark.errors.UserFunctionError` for a window function that raised)
reaches the driver wrapped by Spark: a ``PythonException`` ("An exception was thrown
from the Python worker", the worker's traceback in its message), a ``Py4JJavaError``, a
``StreamingQueryException`` or, on Spark Connect, a ``SparkConnectGrpcException``. None
can be caught as tidemark's type, and tidemark's line is buried in Java frames.

:func:`tidemark_error_of` reads the tidemark error back from such an exception's text.
:func:`surface_tidemark_errors` (installed by ``from_dataframe`` and ``read_kafka``) makes every
Spark action raise it: the exception PySpark converts a failure into becomes, when the
failure reports a tidemark error, an instance of both types (``tm.InputDataError`` and
PySpark's ``PythonException``, say), whose message is tidemark's and whose note holds
the task's Python traceback, so that ``result.to_dataframe().collect()`` raises
``tm.InputDataError`` and code that catches PySpark's exceptions still catches it.
tidemark's own actions (``num_late_records_dropped()``, a replay's watermark scan, the
query ``write_outputs`` returns) raise the tidemark type itself, with Spark's exception
as its ``__cause__`` (:func:`raising_tidemark_errors`, :class:`TidemarkStreamingQuery`).
User-facing: ``docs/errors.md``, "Errors from the workers".
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from tidemark import errors
from tidemark.errors import TidemarkError

__all__ = [
    "tidemark_error_of",
    "surface_tidemark_errors",
    "as_tidemark_error",
    "raising_tidemark_errors",
    "raise_error_column",
    "TidemarkStreamingQuery",
    "WORKER_NOTE",
    "known_spark_failure",
]

_NOTE_START = "(raised in a Spark task"
"""How both notes begin (:data:`WORKER_NOTE`, :func:`as_tidemark_error`'s): a message read
back from a text that holds one ends before it."""

WORKER_NOTE = (
    f"{_NOTE_START} and read back from Spark's error, chained as __cause__; "
    "the task's Python traceback is in it)"
)

# The last line of the worker's traceback: "tidemark.errors.InputDataError: message".
# Spark SQL's raise_error (the SQL fast path) carries the same prefix in its message.
_RAISED = re.compile(r"tidemark\.errors\.([A-Za-z]+): ")
# What follows a message in Spark's text: a Java frame, a blank line, Spark's trailers,
# the note of an error read back before (a foreachBatch function's action raised it).
# (A streaming query's foreachBatch failure adds Spark's SQLSTATEs on a line of their own.)
_TRAILER = re.compile(
    rf"^\s*(at |Caused by|\.\.\. \d+ more|=== |JVM stacktrace|{re.escape(_NOTE_START)})"
    r"|^(\s*SQLSTATE: \w+)*\s*$"
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
    surfaced = getattr(exc, "_tidemark_type", None)  # a Spark exception made tidemark's
    if surfaced is not None:
        error = surfaced(*exc.args)
    elif isinstance(exc, TidemarkError):
        return exc
    else:
        reported = _reported(_text_of(exc))
        if reported is None:
            return None
        error_class, message, _ = reported
        error = error_class(message)
    error.__cause__ = exc
    error.__notes__ = [WORKER_NOTE]  # type: ignore[attr-defined]  # add_note(): 3.11+
    return error


def _reported(text: str) -> tuple[type[TidemarkError], str, int] | None:
    """The tidemark error class a Spark exception's ``text`` reports (the last one in
    it), its message, and where its line starts; None when it reports none."""
    found = list(_RAISED.finditer(text))
    error_class = getattr(errors, found[-1].group(1), None) if found else None
    if not (isinstance(error_class, type) and issubclass(error_class, TidemarkError)):
        return None
    return error_class, _message_at(text, found[-1].end()), found[-1].start()


# ------------------------------------------------------------------ plain Spark actions

_BOTH: dict[tuple[type, type], type | None] = {}


def surface_tidemark_errors() -> None:
    """Make every Spark action of this process raise the tidemark error its failure
    reports as that error (:func:`as_tidemark_error`), on a classic session and on
    Spark Connect. Idempotent; ``from_dataframe`` and ``read_kafka`` call it.

    PySpark converts a failed action's Java (or Spark Connect) error into its own
    exception with ``convert_exception`` and raises that; the function is wrapped where
    PySpark looks it up (a Spark Connect client's module only once it is loaded: a
    Connect session has loaded it).
    """
    from pyspark.errors.exceptions import captured

    _wrap_converter(captured)
    for name in ("pyspark.errors.exceptions.connect", "pyspark.sql.connect.client.core"):
        module = sys.modules.get(name)
        if module is not None:
            _wrap_converter(module)


def _wrap_converter(module: Any) -> None:
    convert = getattr(module, "convert_exception", None)
    if convert is None or getattr(convert, "_tidemark_surfacing", False):
        return

    @functools.wraps(convert)
    def converted(*args: Any, **kwargs: Any) -> Any:
        exc = convert(*args, **kwargs)
        try:
            return as_tidemark_error(exc)
        except Exception:  # reading its text failed (a JVM gone): PySpark's, as it was
            return exc

    converted._tidemark_surfacing = True  # type: ignore[attr-defined]
    module.convert_exception = converted


def as_tidemark_error(exc: Any) -> Any:
    """``exc`` (an exception PySpark made of a failure) as one that is also the tidemark
    error it reports: an instance of both classes, tidemark's message as its text, the
    task's Python traceback in its note, PySpark's attributes and methods kept
    (``getMessage()``, ``getCondition()``); pickled, it is the tidemark error alone.
    Anything else is returned as it is.
    """
    if not isinstance(exc, Exception) or isinstance(exc, TidemarkError):
        return exc
    for text in _texts_of(exc):  # the first that reports it (its traceback with it)
        reported = _reported(text)
        if reported is not None:
            break
    else:
        return exc
    error_class, message, start = reported
    both = _both(error_class, type(exc))
    if both is None:
        return exc
    surfaced = cast(Exception, both.__new__(both, message))
    vars(surfaced).update(vars(exc))
    surfaced.__notes__ = [_surfaced_note(exc, text[:start])]  # type: ignore[attr-defined]
    return surfaced


def _both(error_class: type[TidemarkError], spark_class: type) -> type | None:
    """The class that is ``error_class`` and ``spark_class`` (made once a pair; None
    where Python cannot combine them)."""
    key = (error_class, spark_class)
    if key not in _BOTH:
        try:
            _BOTH[key] = type(
                error_class.__name__,
                (error_class, spark_class),
                {
                    "__module__": error_class.__module__,
                    "__qualname__": error_class.__qualname__,
                    "__doc__": f"{error_class.__name__} raised in a Spark task, as the "
                    f"{spark_class.__name__} PySpark raised for it.",
                    "_tidemark_type": error_class,
                    "__str__": BaseException.__str__,
                    "__reduce__": _reduce_to_tidemark_type,
                },
            )
        except TypeError:  # an exception class of a layout of its own
            _BOTH[key] = None
    return _BOTH[key]


def _reduce_to_tidemark_type(self: Any) -> tuple[type, tuple[Any, ...]]:
    return self._tidemark_type, self.args


def _surfaced_note(exc: BaseException, before: str) -> str:
    """Where the error was raised and, when Spark's text has it, the task's Python
    traceback (what a user's function raised, for a UserFunctionError)."""
    note = (
        f"{_NOTE_START}; this exception is also the {type(exc).__name__} "
        "PySpark raised for it, whose getMessage() has Spark's whole text"
    )
    start = before.find("Traceback (most recent call last):")
    if start == -1:
        return note + ")"
    return f"{note}; the task's Python traceback:)\n{before[start:].rstrip()}"


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
    return "\n".join(_texts_of(exc))


def _texts_of(exc: BaseException) -> list[str]:
    """The exception's text and, where it has one, its message."""
    parts = [str(exc)]
    get_message = getattr(exc, "getMessage", None)
    if callable(get_message):
        try:
            parts.append(str(get_message()))
        except Exception:  # a Py4J object whose JVM is gone: its text is enough
            pass
    return parts


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

    A tidemark task's error reaches the driver wrapped in Spark's exception (on a
    tidemark DataFrame, one that is also the tidemark error: :func:`as_tidemark_error`);
    inside this context it is raised as tidemark's own type alone (``InputDataError``,
    ``UserFunctionError``, ...), its message first, the Spark exception chained as
    ``__cause__``. An exception that reports no tidemark error is raised unchanged.

    Examples
    --------
    A tidemark error from a Spark action, as its own type::

        with tm.raising_tidemark_errors():
            result.to_dataframe().collect()
    """
    try:
        yield
    except Exception as exc:
        error = tidemark_error_of(exc)
        if error is None or error is exc:
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
        except Exception as exc:
            error = self._tidemark_error(exc)
            if error is None or error is exc:
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
