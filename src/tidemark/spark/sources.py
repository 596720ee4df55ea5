"""Reading a DataFrame as a stream: :func:`from_dataframe`, what a pipeline starts from.

It checks the columns a source names (event time, arrival order, processing time,
recorded watermarks) when the pipeline is defined, so that a mistake is refused before
anything runs, and returns the :class:`~tidemark.spark.api.DataStream` of the rows.
"""

from __future__ import annotations

from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.spark.api import DataStream
from tidemark.spark.plan import Source
from tidemark.spark.session import get_spark
from tidemark.spark.timestamps import timestamp_ms
from tidemark.watermarks import WatermarkStrategy

__all__ = ["from_dataframe"]


def from_dataframe(
    df: Any,
    timestamp: str | None = None,
    *,
    order_by: str | list[str] | tuple[str, ...] | None = None,
    watermark_strategy: WatermarkStrategy | None = None,
    processing_time: str | None = None,
    watermark: str | None = None,
    spark: Any = None,
) -> DataStream:
    """Read a DataFrame as a stream of Rows.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        Bounded (batch) or streaming.
    timestamp : str, optional
        The event-time column: long milliseconds, a Spark timestamp (with or without
        time zone) or a timestamp string, in every mode. Optional when
        ``watermark_strategy`` has a timestamp assigner, or for processing-time windows.
    order_by : str or list of str, optional
        Arrival order of a recorded stream: run as a faithful replay (watermark after
        every element, across all keys). Omit for Flink's BATCH semantics. Several
        columns order lexicographically (``["offset", "id"]``: by ``id`` where offsets
        are equal). The order must be total: two rows with equal ``order_by`` values, or
        a row with none, raise :class:`~tidemark.errors.InputDataError` when the replay
        runs, since Spark would otherwise break the tie however it partitioned the rows.
    watermark_strategy : WatermarkStrategy, optional
        Defaults to monotonous timestamps.
    processing_time : str, optional
        Replay only: the arrival time (long ms or timestamp) that drives processing time.
    watermark : str, optional
        Replay only: the watermark in force when each element arrived (long ms), as
        recorded with the stream; replaces the watermarks of ``watermark_strategy``.

    Returns
    -------
    DataStream
        Nothing runs yet: the pipeline runs when an output of a window is evaluated.

    Raises
    ------
    WindowSpecError
        A column that does not exist, a timestamp column of another type, replay options
        without ``order_by``, or a ``watermark_strategy`` that is not one.
    """
    spark = get_spark(spark if spark is not None else df.sparkSession)
    strategy = watermark_strategy or WatermarkStrategy.for_monotonous_timestamps()
    if not isinstance(strategy, WatermarkStrategy):
        raise WindowSpecError(f"`watermark_strategy` must be a WatermarkStrategy; got {strategy!r}")
    names = df.columns
    order = _order_columns(order_by)
    for param, column in (
        ("timestamp", timestamp),
        *[("order_by", c) for c in order or ()],
        ("processing_time", processing_time),
        ("watermark", watermark),
    ):
        if column is not None and column not in names:
            raise WindowSpecError(f"`{param}` names a missing column {column!r}; columns: {names}")
    for param, column in (("processing_time", processing_time), ("watermark", watermark)):
        if column is not None and order_by is None and not df.isStreaming:
            raise WindowSpecError(
                f"`{param}` belongs to a replay: give `order_by` (the arrival order) too"
            )
    timestamp_ms(df.schema, timestamp)  # the type is checked now, the same in every mode
    timestamp_ms(df.schema, processing_time, "processing_time")
    return DataStream(Source(df, timestamp, order, strategy, processing_time, watermark), spark)


def _order_columns(order_by: Any) -> tuple[str, ...] | None:
    """``order_by`` as a tuple of column names (None: no replay)."""
    if order_by is None:
        return None
    columns = (order_by,) if isinstance(order_by, str) else order_by
    if (
        not isinstance(columns, (list, tuple))
        or not columns
        or not all(isinstance(c, str) for c in columns)
    ):
        raise WindowSpecError(
            f"`order_by` must be a column name or a non-empty list of them; got {order_by!r}"
        )
    return tuple(columns)
