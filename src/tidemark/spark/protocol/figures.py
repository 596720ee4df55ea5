"""tidemark's figures: what a Flink user watches a window operation by, on Spark.

A window operation's combined frame (:mod:`tidemark.spark.protocol.columns`) carries ``"__tm_stats"``
rows: one per key-group call and micro-batch in streaming, one per task in a BATCH or
replay run. Each holds a :class:`Figures`, encoded as UTF-8 JSON in ``__tm_side``, so a
row needs no column of its own and passes through a streaming chain as any other output
does. The figures:

=============================== ====================================================
``num_records_in``              elements fed to the window operator (an end-of-input
                                row is no element)
``num_records_out``             results emitted by the windows that fired
``num_late_records_side_output`` late elements sent to the late-data side output
``num_late_records_dropped``    late elements dropped (Flink's ``numLateRecordsDropped``),
                                and elements in a gap of sampling windows
``keys_in_state_change``        keys holding state after, less before (streaming)
``windows_in_state_change``     windows holding contents after, less before (streaming)
``watermark_ms``                the event-time watermark the calls ran under (streaming;
                                null before the first), the engine's, not Spark's
=============================== ====================================================

:func:`figure_columns` sums them (the watermark: its maximum, also as ISO 8601 text in UTC) as
aggregate columns, which a streaming query observes in every micro-batch
(``DataFrame.observe``: ``lastProgress["observedMetrics"]["tidemark"]``, see
:func:`observed`), and :func:`bounded_metrics` reads from a bounded run. Watching a
query is the guide ``docs/watching.md``.

A streaming call only sees the key groups Spark runs in its micro-batch, so the state
figures are changes; summed over the micro-batches since the state was empty they give
the keys and windows in state (:class:`StateTotals`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F

from tidemark.spark.protocol.columns import MAIN, OUTPUT, SIDE, STATS_OUTPUT
from tidemark.time import LONG_MIN

__all__ = [
    "OBSERVATION",
    "COUNTS",
    "END_OF_INPUT_TIMESTAMP_MS",
    "Figures",
    "figure_columns",
    "observed",
    "metrics_of",
    "bounded_metrics",
    "StateTotals",
]

OBSERVATION = "tidemark"
"""The name of the observation a streaming query reports tidemark's figures under."""

COUNTS = (
    "num_records_in",
    "num_records_out",
    "num_late_records_side_output",
    "num_late_records_dropped",
    "keys_in_state_change",
    "windows_in_state_change",
)
"""The summed figures, in the order a metrics row gives them."""

END_OF_INPUT_TIMESTAMP_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the ``watermark`` timestamp once the final watermark passed
(``watermark_ms`` is then ``Long.MAX_VALUE``)."""

_ENCODER = json.JSONEncoder(separators=(",", ":"))  # built once: json.dumps builds one per call


@dataclass
class Figures:
    """The figures of one call (or task), as a ``"__tm_stats"`` row carries them.

    >>> Figures(num_records_in=3, watermark_ms=999).encode()[:20]
    b'{"num_records_in":3,'
    """

    num_records_in: int = 0
    num_records_out: int = 0
    num_late_records_side_output: int = 0
    num_late_records_dropped: int = 0
    keys_in_state_change: int = 0
    windows_in_state_change: int = 0
    watermark_ms: int | None = None

    def encode(self) -> bytes:
        """The ``__tm_side`` cell of the row (the engine's ``Long.MIN_VALUE``, no
        watermark yet, as null)."""
        figures = dict(vars(self))  # dataclasses.asdict copies deeply, 10x slower
        if figures["watermark_ms"] == LONG_MIN:
            figures["watermark_ms"] = None
        return _ENCODER.encode(figures).encode()


def _figure(name: str, output: str) -> str:
    """A figure of the ``output`` rows, null on every other row (SQL text: Spark parses
    it in one call, where building it from column functions takes hundreds)."""
    return (
        f"CAST(CASE WHEN `{OUTPUT}` = {_sql_string(output)} THEN "
        f"get_json_object(CAST(`{SIDE}` AS STRING), {_sql_string('$.' + name)}) END AS BIGINT)"
    )


def _sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def figure_columns(output: str = STATS_OUTPUT) -> list[Any]:
    """Aggregate columns of the figures of a combined frame's ``output`` rows (the
    ``"__tm_stats"`` rows, or a chain's earlier window's): each count summed (0 without
    rows), ``watermark_ms`` the largest and ``watermark`` the same as ISO 8601 text in UTC
    (at most :data:`END_OF_INPUT_TIMESTAMP_MS`; null without a watermark)."""
    counts = [f"coalesce(sum({_figure(n, output)}), 0) AS {n}" for n in COUNTS]
    watermark_ms = f"max({_figure('watermark_ms', output)})"
    texts = [*counts, f"{watermark_ms} AS watermark_ms", f"{_iso_utc(watermark_ms)} AS watermark"]
    return [F.expr(text) for text in texts]


def _iso_utc(ms: str) -> str:
    """``ms`` as Spark's progress writes its own times: ISO 8601 in UTC, to the
    millisecond (``2020-05-24T04:00:06.999Z``); at most the end of input; null stays
    null. Built from the day and the milliseconds into it, since Spark formats a
    timestamp in the session's time zone, where a UTC wall clock in a daylight-saving
    gap (New York's 2024-03-10 02:30) would move an hour."""
    capped = f"least({ms}, {END_OF_INPUT_TIMESTAMP_MS}L)"
    into_day = f"pmod({capped}, 86400000)"
    day = f"date_from_unix_date(cast(({capped} - {into_day}) div 86400000 AS INT))"
    clock = (
        f"format_string('%02d:%02d:%02d.%03d', {into_day} div 3600000, "
        f"{into_day} div 60000 % 60, {into_day} div 1000 % 60, {into_day} % 1000)"
    )
    return f"CASE WHEN {ms} IS NOT NULL THEN concat(cast({day} AS STRING), 'T', {clock}, 'Z') END"


def observed(frame: Any, name: str = OBSERVATION, output: str = STATS_OUTPUT) -> Any:
    """``frame`` (a streaming combined frame) observing the figures of its ``output``
    rows as ``name``: each micro-batch's progress reports them under
    ``observedMetrics[name]``."""
    return frame.observe(name, *figure_columns(output))


def metrics_of(progress: Any, name: str = OBSERVATION) -> dict[str, Any] | None:
    """tidemark's figures in a query progress, as a dict; None where it has none.

    Parameters
    ----------
    progress : dict or StreamingQueryProgress
        ``query.lastProgress`` (a dict), or ``event.progress`` in a
        ``StreamingQueryListener.onQueryProgress``.
    name : str
        The observation's name: ``"tidemark"``, or ``"tidemark_window1"``, ... for the
        earlier windows of a chain.

    Examples
    --------
    >>> from pyspark.sql import Row
    >>> metrics_of({"observedMetrics": {"tidemark": Row(num_records_in=5)}})
    {'num_records_in': 5}
    >>> metrics_of({"observedMetrics": {}}) is None
    True

    Over Spark Connect a progress holds the row as its values and schema; the same dict
    comes out:

    >>> schema = {"type": "struct", "fields": [{"name": "num_records_in", "type": "long"}]}
    >>> metrics_of({"observedMetrics": {"tidemark": Row(values=[5], schema=schema)}})
    {'num_records_in': 5}
    """
    if progress is None:
        return None
    if isinstance(progress, Mapping):
        metrics = progress.get("observedMetrics") or {}
    else:
        metrics = getattr(progress, "observedMetrics", None) or {}
    row = metrics.get(name)
    if row is None:
        return None
    figures = row.asDict() if hasattr(row, "asDict") else dict(row)
    if set(figures) == {"values", "schema"}:  # Spark Connect: the row as values + schema
        names = [field["name"] for field in figures["schema"]["fields"]]
        return dict(zip(names, figures["values"]))
    return figures


def bounded_metrics(combined: Any, engine_run: bool) -> dict[str, Any]:
    """The figures of a bounded run's combined frame, in one aggregation over it.

    ``engine_run``: the run is BATCH or replay, whose tasks each emit a ``"__tm_stats"``
    row. The SQL fast path (Spark's own aggregation, BATCH semantics) emits none: its
    results are counted, ``num_records_in`` is unknown (None), nothing is late.
    """
    if not engine_run:
        results = combined.where(F.col(OUTPUT) == F.lit(MAIN)).count()
        counts = dict.fromkeys(COUNTS[:4], 0)
        return {**counts, "num_records_in": None, "num_records_out": results}
    row = combined.agg(*figure_columns()[:4]).collect()[0]
    return {name: int(row[name]) for name in COUNTS[:4]}


class StateTotals:
    """Keys and windows in state, summed from the changes each micro-batch reports.

    The change is exact per micro-batch; the totals are exact when the first progress
    added was the query's first micro-batch (state empty before it). Feed it every
    progress, e.g. from a ``StreamingQueryListener``.

    >>> totals = StateTotals()
    >>> totals.add({"keys_in_state_change": 3, "windows_in_state_change": 5})
    (3, 5)
    >>> totals.add({"keys_in_state_change": -1, "windows_in_state_change": -4})
    (2, 1)
    """

    def __init__(self) -> None:
        self.keys_in_state = 0
        self.windows_in_state = 0

    def add(self, figures: Mapping[str, Any] | None) -> tuple[int, int]:
        """Add one micro-batch's figures (:func:`metrics_of`; None: no figures);
        returns ``(keys_in_state, windows_in_state)`` after it."""
        if figures is not None:
            self.keys_in_state += int(figures.get("keys_in_state_change") or 0)
            self.windows_in_state += int(figures.get("windows_in_state_change") or 0)
        return self.keys_in_state, self.windows_in_state
