"""``tidemark explain``: a streaming checkpoint's answers for the on-call engineer (the
command's arguments are parsed by :mod:`tidemark.cli`, which loads this module, and
Spark, only to run it).

``tidemark explain --checkpoint PATH`` prints the whole query's view
(:func:`~.query_view.explain_query`); with ``--key K`` (once per key column) the key's
answer (:func:`~.explain.explain_checkpoint`, from the state: the command has no
pipeline, so no firings or element fates before it), with ``--window START,END``,
``--timestamp T``, ``--batch N`` and ``--picture OUT.png`` as there. It starts a local
SparkSession itself (the checkpoint may belong to a running query: reading it is
harmless). Errors are one line of tidemark's (exit 2), never a Java trace. The guide:
``docs/why-no-result.md``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from tidemark.errors import TidemarkError
from tidemark.spark.runtime.session import get_spark
from tidemark.spark.streaming.driver.explain import explain_checkpoint
from tidemark.spark.streaming.driver.query_view import explain_query
from tidemark.spark.streaming.driver.recorded import RecordedQuery, key_columns

__all__ = ["run_explain", "key_value"]

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def run_explain(parsed: argparse.Namespace) -> int:
    """Run ``tidemark explain``; 0 on success, 2 on an error (one line on stderr)."""
    try:
        print(_answer(parsed), end="")
    except (TidemarkError, ValueError, KeyError) as exc:
        print(f"tidemark explain: error: {_message(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # Spark's own (a Java exception's text): its first line
        print(f"tidemark explain: error: {_first_line(exc)}", file=sys.stderr)
        return 2
    return 0


def _answer(parsed: argparse.Namespace) -> str:
    spark = get_spark(master="local[1]", app_name="tidemark-explain", conf=_QUIET)
    if not parsed.key:
        if parsed.window or parsed.timestamp is not None or parsed.picture:
            raise ValueError("--window, --timestamp and --picture ask about a key: give --key")
        view = explain_query(
            spark, parsed.checkpoint, batch_id=parsed.batch, time_zone=parsed.time_zone
        )
        return view.text()
    columns = key_columns(RecordedQuery.read(spark, parsed.checkpoint).window)
    x = explain_checkpoint(
        spark,
        parsed.checkpoint,
        key_value(parsed.key, columns),
        window=_window(parsed.window),
        timestamp=parsed.timestamp,
        batch_id=parsed.batch,
        time_zone=parsed.time_zone,
    )
    text = x.text()
    if parsed.picture:
        text += f"Picture: {x.picture(parsed.picture)}\n"
    return text


_QUIET = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}


def key_value(values: Sequence[str], columns: list[tuple[str, str]]) -> Any:
    """The key from ``--key`` texts, each read in its column's type (a tuple for
    several columns).

    >>> key_value(["7"], [("user", "bigint")]), key_value(["a", "2"], [("k", "string"), ("n", "int")])
    (7, ('a', 2))
    """
    names = [name for name, _ in columns]
    if len(values) != len(columns):
        raise ValueError(
            f"--key must be given once per key column {names}; got {len(values)}: {list(values)}"
        )
    typed: list[Any] = []
    for text, (name, kind) in zip(values, columns):
        if kind in _INTEGRAL:
            try:
                typed.append(int(text))
            except ValueError:
                raise ValueError(
                    f"--key of column {name!r} ({kind}) must be an integer; got {text!r}"
                ) from None
        else:
            typed.append(text)
    return typed[0] if len(typed) == 1 else tuple(typed)


def _window(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    parts = text.split(",")
    try:
        start, end = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"--window must be START,END in ms (e.g. 0,10000); got {text!r}") from None
    return start, end


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
