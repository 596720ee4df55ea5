"""Errors raised by tidemark.

Every error subclasses a Python built-in so callers can catch what they already know
(``ValueError`` for bad specifications, ``RuntimeError`` for failures at run time).
Every error can be built from its message alone, which is how an error raised in a Spark
worker is raised again as itself on the driver (:mod:`tidemark.spark.runtime.surfacing`).

What is refused, and the errors to catch: ``docs/errors.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "TidemarkError",
    "WindowSpecError",
    "InputDataError",
    "UserFunctionError",
    "WindowResultError",
    "UnsupportedMergeError",
    "SessionSetupError",
    "ExplainError",
    "TidemarkWarning",
]


class TidemarkError(Exception):
    """Base class of every error tidemark raises on purpose."""


class WindowSpecError(TidemarkError, ValueError):
    """A window pipeline is specified wrongly; raised when it is defined, before any data."""


class InputDataError(TidemarkError, ValueError):
    """An input row or element cannot be processed (missing timestamp, null key, ...)."""


class ExplainError(TidemarkError, ValueError):
    """A question to :func:`tidemark.explain.explain_events` cannot be answered as asked
    (a key without events, a window not of the key's, an unknown mode, ...)."""


class TidemarkWarning(UserWarning):
    """A pipeline is accepted but may not mean what it says: a default was chosen for the
    user (event-time windows on a stream with no ``watermark_strategy``) or the data
    looks like another unit than the one it is read in. The message says how to be
    explicit, which also silences it. Filter it as any warning
    (``warnings.filterwarnings("error", category=TidemarkWarning)`` makes it fatal)."""


class UnsupportedMergeError(TidemarkError, RuntimeError):
    """A merge would move a window's end behind the watermark (Flink refuses this too)."""


class SessionSetupError(TidemarkError, RuntimeError):
    """The SparkSession cannot run tidemark as it is set up (a setting a streaming query
    needs cannot be set, or the Python workers cannot import tidemark)."""


class UserFunctionError(TidemarkError, RuntimeError):
    """A user function (assigner, trigger, evictor or window function) raised.

    The original exception is chained as ``__cause__``; the message carries where it
    happened: the key, the window and the current watermark. Built from a message alone
    (``UserFunctionError(message)``), as when it is read back from a Spark worker's
    error, ``key``, ``window`` and ``watermark`` are None.
    """

    def __init__(
        self,
        what: str,
        key: Any = None,
        window: Any = None,
        watermark: int | None = None,
        cause: BaseException | None = None,
    ):
        self.what = what
        self.key = key
        self.window = window
        self.watermark = watermark
        if cause is None:  # the message alone
            super().__init__(what)
            return
        super().__init__(
            f"{what} raised {type(cause).__name__}: {cause} "
            f"(key={key!r}, window={window!r}, watermark={watermark})"
        )


class WindowResultError(UserFunctionError, ValueError):
    """A window function's result does not fit the ``output_schema``: a wrong number of
    fields, or a value Spark cannot hold in its field's type. Also a ``ValueError``, as
    a result that does not fit has always been."""
