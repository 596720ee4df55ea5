"""Reading a DataFrame as a stream: :func:`from_dataframe`, what a pipeline starts from.

It checks what a source is given (the DataFrame, the columns it names for event time,
arrival order, processing time and recorded watermarks, the unit of the event time)
when the pipeline is defined, so that a mistake is refused before anything runs, and
returns the :class:`~tidemark.spark.api.DataStream` of the rows.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from tidemark.errors import WindowSpecError
from tidemark.spark.api import DataStream
from tidemark.spark.codec import check_column_names
from tidemark.spark.plan import Source
from tidemark.spark.session import get_spark
from tidemark.spark.timestamps import (
    ScaledTimestamp,
    check_timestamp_unit,
    timestamp_ms,
    warn_if_unit_looks_wrong,
)
from tidemark.watermarks import WatermarkStrategy

__all__ = ["from_dataframe"]


def from_dataframe(
    df: Any,
    timestamp: str | None = None,
    *,
    order_by: str | list[str] | None = None,
    watermark_strategy: WatermarkStrategy | None = None,
    processing_time: str | None = None,
    watermark: str | None = None,
    timestamp_unit: str | None = None,
    spark: Any = None,
) -> DataStream:
    """Read a DataFrame as a stream of Rows.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        Bounded (batch) or streaming. (A pandas DataFrame: ``spark.createDataFrame(pdf)``.)
    timestamp : str, optional
        The event-time column: long milliseconds (or ``timestamp_unit``), a Spark
        timestamp (with or without time zone) or a timestamp string
        (:data:`~tidemark.spark.timestamps.ACCEPTED_TIMESTAMP_STRINGS`), in every mode.
        Optional when ``watermark_strategy`` has a timestamp assigner, or for
        processing-time windows.
    order_by : str or list of str, optional
        Arrival order of a recorded stream: run as a faithful replay (watermark after
        every element, across all keys). Omit for Flink's BATCH semantics. Several
        columns order lexicographically (``["offset", "id"]``: by ``id`` where offsets
        are equal). The order must be total: two rows with equal ``order_by`` values, or
        a row with none, raise :class:`~tidemark.errors.InputDataError` when the replay
        runs, since Spark would otherwise break the tie however it partitioned the rows.
    watermark_strategy : WatermarkStrategy, optional
        Defaults to monotonous timestamps: on a stream or a replay an element for a
        window that already ended is late. Event-time windows on such a source without
        a strategy give a :class:`~tidemark.errors.TidemarkWarning`.
    processing_time : str, optional
        Replay only: the arrival time (long ms or timestamp) that drives processing time.
    watermark : str, optional
        Replay only: the watermark in force when each element arrived (long ms), as
        recorded with the stream; replaces the watermarks of ``watermark_strategy``.
    timestamp_unit : {"ms", "s", "us", "ns"}, optional
        The unit of an integral ``timestamp`` column; the default is ms. Without it, a
        bounded DataFrame's first values are read (one small Spark job) and a
        :class:`~tidemark.errors.TidemarkWarning` names the unit they look like (epoch
        seconds read as ms make one-minute windows span 16.7 hours); give the unit, even
        "ms", to skip that check. ``processing_time`` and ``watermark`` stay ms.

    Returns
    -------
    DataStream
        Nothing runs yet: the pipeline runs when an output of a window is evaluated.

    Raises
    ------
    WindowSpecError
        ``df`` is not a Spark DataFrame or has two columns of one name (or names equal
        but for case, unless ``spark.sql.caseSensitive``), a column parameter is not a str or names a
        column that does not exist, a timestamp column of another type, replay options
        without ``order_by``, a ``watermark_strategy`` that is not one, or a
        ``timestamp_unit`` that is not one of the four (or given for a column that is
        not integral, or with integral ``processing_time`` / ``watermark`` columns).
    """
    _check_dataframe(df)
    spark = get_spark(spark if spark is not None else df.sparkSession)
    check_column_names(df.columns, "`df`", spark)
    strategy = watermark_strategy or WatermarkStrategy.for_monotonous_timestamps()
    if not isinstance(strategy, WatermarkStrategy):
        raise WindowSpecError(f"`watermark_strategy` must be a WatermarkStrategy; got {strategy!r}")
    order = _order_columns(order_by)
    columns = {"timestamp": timestamp, "processing_time": processing_time, "watermark": watermark}
    _check_columns(df, columns, order)
    timestamp_ms(df.schema, timestamp)  # the type is checked now, the same in every mode
    timestamp_ms(df.schema, processing_time, "processing_time")
    check_timestamp_unit(df.schema, timestamp, timestamp_unit)
    _check_other_units(df, timestamp_unit, processing_time=processing_time, watermark=watermark)
    if timestamp_unit is None:
        warn_if_unit_looks_wrong(df, timestamp)
    elif timestamp_unit != "ms":
        # every mode reads the column through this assigner (see Source)
        assert timestamp is not None
        strategy = strategy.with_timestamp_assigner(ScaledTimestamp(timestamp, timestamp_unit))
        timestamp = None
    source = Source(
        df,
        timestamp,
        order,
        strategy,
        processing_time,
        watermark,
        timestamp_unit=timestamp_unit or "ms",
        watermark_strategy_given=watermark_strategy is not None,
    )
    return DataStream(source, spark)


def _check_dataframe(df: Any) -> None:
    if isinstance(df, DataFrame):
        return
    kind = type(df)
    if kind.__module__.split(".")[0] == "pandas":
        raise WindowSpecError(
            f"`df` must be a pyspark.sql.DataFrame; got a pandas DataFrame "
            f"({kind.__module__}.{kind.__qualname__}): convert it with "
            "spark.createDataFrame(pdf)"
        )
    raise WindowSpecError(
        f"`df` must be a pyspark.sql.DataFrame; got {kind.__name__}: make one with "
        "spark.createDataFrame(...) or spark.read / spark.readStream"
    )


def _check_columns(df: Any, columns: dict[str, str | None], order: tuple[str, ...] | None) -> None:
    names = df.columns
    for param, column in columns.items():
        if column is not None and not isinstance(column, str):
            raise WindowSpecError(
                f"`{param}` must be a column name (str) or None; "
                f"got {column!r} ({type(column).__name__})"
            )
    for param, column in [*columns.items(), *[("order_by", c) for c in order or ()]]:
        if column is not None and column not in names:
            raise WindowSpecError(f"`{param}` names a missing column {column!r}; columns: {names}")
    for param in ("processing_time", "watermark"):
        if columns[param] is not None and order is None and not df.isStreaming:
            raise WindowSpecError(
                f"`{param}` belongs to a replay: give `order_by` (the arrival order) too"
            )


def _check_other_units(df: Any, unit: str | None, **columns: str | None) -> None:
    """Refuse integral ``processing_time`` / ``watermark`` columns next to a
    ``timestamp_unit`` other than ms: they are read as ms, and would silently differ."""
    if unit in (None, "ms"):
        return
    for param, column in columns.items():
        if column is None:
            continue
        if type(df.schema[column].dataType).__name__ in ("LongType", "IntegerType"):
            raise WindowSpecError(
                f"`{param}` column {column!r} is read as long milliseconds; got "
                f"timestamp_unit={unit!r}: record the {param} in ms"
            )


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
