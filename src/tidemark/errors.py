"""Errors raised by tidemark.

Every error subclasses a Python built-in so callers can catch what they already know
(``ValueError`` for bad specifications, ``RuntimeError`` for failures at run time).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "TidemarkError",
    "WindowSpecError",
    "InputDataError",
    "UserFunctionError",
    "UnsupportedMergeError",
    "SessionSetupError",
    "TidemarkWarning",
]


class TidemarkError(Exception):
    """Base class of every error tidemark raises on purpose."""


class WindowSpecError(TidemarkError, ValueError):
    """A window pipeline is specified wrongly; raised when it is defined, before any data."""


class InputDataError(TidemarkError, ValueError):
    """An input row or element cannot be processed (missing timestamp, null key, ...)."""


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
    happened: the key, the window and the current watermark.
    """

    def __init__(self, what: str, key: Any, window: Any, watermark: int, cause: BaseException):
        self.what = what
        self.key = key
        self.window = window
        self.watermark = watermark
        super().__init__(
            f"{what} raised {type(cause).__name__}: {cause} "
            f"(key={key!r}, window={window!r}, watermark={watermark})"
        )
