"""Reading a DataFrame as a stream: :func:`from_dataframe`, what a pipeline starts from.

It checks what a source is given (the DataFrame, the columns it names for event time,
arrival order, processing time and recorded watermarks, the unit of the event time)
when the pipeline is defined, so that a mistake is refused before anything runs, and
returns the :class:`~tidemark.spark.api.streams.DataStream` of the rows.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from tidemark.errors import WindowSpecError
from tidemark.spark.api.streams import DataStream
from tidemark.spark.plan import Source
from tidemark.spark.protocol.schemas import check_column_names
from tidemark.spark.protocol.source_partitions import source_partitions
from tidemark.spark.protocol.timestamps import (
    ScaledTimestamp,
    check_timestamp_unit,
    timestamp_ms,
    warn_if_assigned_unit_looks_wrong,
    warn_if_unit_looks_wrong,
)
from tidemark.spark.runtime.session import get_spark
from tidemark.spark.runtime.surfacing import surface_tidemark_errors
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
    partition_column: str | None = None,
    partitions: int | list[Any] | None = None,
    shift_spark_clock: bool | None = None,
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
        (:data:`~tidemark.spark.protocol.timestamps.ACCEPTED_TIMESTAMP_STRINGS`), in every mode.
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
        a strategy give a :class:`~tidemark.errors.TidemarkWarning`. A timestamp
        assigner (used when ``timestamp`` is not given) returns ms; on a bounded
        DataFrame it is tried on the first rows, with a warning when its values look
        like another unit.
    processing_time : str, optional
        Replay only: the arrival time (long ms or timestamp) that drives processing time.
    watermark : str, optional
        Replay only: the watermark in force when each element arrived (long ms or a
        timestamp, read as ``timestamp`` is), as recorded with the stream; replaces the
        watermarks of ``watermark_strategy``.
    timestamp_unit : {"ms", "s", "us", "ns"}, optional
        The unit of an integral ``timestamp`` column; the default is ms. Without it, a
        bounded DataFrame's first values are read (one small Spark job) and a
        :class:`~tidemark.errors.TidemarkWarning` names the unit they look like (epoch
        seconds read as ms make one-minute windows span 16.7 hours); give the unit, even
        "ms", to skip that check. ``processing_time`` and ``watermark`` stay ms.
    partition_column : str, optional
        The column holding each row's source partition (Kafka's ``partition``): the
        watermark is then Flink's per-partition one, the minimum over the partitions of
        each one's own ``max_ts(p) - out_of_orderness - 1``, an idle partition left out
        under ``with_idleness`` in a replay (``docs/kafka.md``; a stream refuses
        ``with_idleness`` with ``partition_column``). Streaming and replay; BATCH has no
        watermarks.
    partitions : int or list, optional
        The partitions there are: a number ``n`` (values ``0 .. n-1``, Kafka's) or the
        list of values. Required on a stream; a replay takes the values its rows hold. A
        row of another partition is an :class:`~tidemark.errors.InputDataError`.
    shift_spark_clock : bool, optional
        Streaming only. A query runs Spark's event-time clock as the engine's, so that
        Spark's progress (``lastProgress["eventTime"]["watermark"]``) and UI show the
        real watermark; Spark's watermark starts at 0, though, so an element that would
        make a watermark at or before the epoch (at or before 1970-01-01 plus the
        out-of-orderness bound) before the query has a watermark is refused, naming
        this option. True runs Spark's clock 2**50 ms (~35,700 years) ahead instead:
        timestamps from about 15,800 BC on, with Spark showing the watermark that far
        ahead. Chosen when the query first starts and kept with its checkpoint; None
        (the default) takes the checkpoint's (a checkpoint written before this option
        existed runs shifted), unshifted at a first start.

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
        without ``order_by``, a ``watermark_strategy`` that is not one (or has a timestamp
        assigner beside a ``timestamp`` column), or a ``timestamp_unit`` that is not one
        of the four (or given for a column that is not integral, or with integral
        ``processing_time`` / ``watermark`` columns), or a ``shift_spark_clock`` that is
        not a bool; ``partitions`` without ``partition_column``, or missing on a stream;
        ``with_idleness`` with ``partition_column`` on a stream.
    """
    _check_dataframe(df)
    spark = get_spark(spark if spark is not None else df.sparkSession)
    surface_tidemark_errors()  # now that a Spark Connect session's client is loaded
    check_column_names(df.columns, "`df`", spark)
    strategy = watermark_strategy or WatermarkStrategy.for_monotonous_timestamps()
    if not isinstance(strategy, WatermarkStrategy):
        raise WindowSpecError(f"`watermark_strategy` must be a WatermarkStrategy; got {strategy!r}")
    if timestamp is not None and strategy.timestamp_assigner is not None:
        raise WindowSpecError(
            f"event time must come one way: `timestamp` names the column {timestamp!r}, and "
            f"`watermark_strategy` has a timestamp assigner "
            f"({strategy.timestamp_assigner!r}); drop one of them"
        )
    order = _order_columns(order_by)
    columns = {"timestamp": timestamp, "processing_time": processing_time, "watermark": watermark}
    _check_columns(df, columns, order)
    timestamp_ms(df.schema, timestamp)  # the type is checked now, the same in every mode
    timestamp_ms(df.schema, processing_time, "processing_time")
    timestamp_ms(df.schema, watermark, "watermark")
    check_timestamp_unit(df.schema, timestamp, timestamp_unit)
    _check_other_units(df, timestamp_unit, processing_time=processing_time, watermark=watermark)
    if timestamp is None and strategy.timestamp_assigner is not None:
        warn_if_assigned_unit_looks_wrong(df, strategy.timestamp_assigner)
    by_partition = source_partitions(df, partition_column, partitions, streaming=df.isStreaming)
    if by_partition is not None and watermark is not None:
        raise WindowSpecError(
            "`watermark` replays recorded watermarks and `partition_column` computes "
            "per-partition ones: give one of them"
        )
    if by_partition and df.isStreaming and strategy.idleness_ms is not None:
        raise WindowSpecError(
            "`with_idleness` on a stream read by partition (`partition_column`) is not "
            "supported: Flink leaves an idle partition out of the minimum watermark, and a "
            "Spark query cannot leave one of its inputs out of its minimum (tidemark "
            "advanced the watermark with processing time instead, which made rows late that "
            "Flink keeps); got idle_timeout="
            f"{strategy.idleness_ms}ms, partitions={list(by_partition.values or ())}. Drop "
            "with_idleness (an idle partition then holds the watermark, as in Flink without "
            "idleness; end a bounded input with an end-of-input row), or replay the "
            "recorded topic (read_kafka(..., streaming=False) with order_by and "
            "processing_time) for Flink's idleness"
        )
    if by_partition and order and strategy.idleness_ms is not None and processing_time is None:
        raise WindowSpecError(
            "a replay's per-partition idleness needs each row's arrival time: give "
            "`processing_time` (e.g. Kafka's record timestamp), or drop with_idleness"
        )
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
        partitions=by_partition,
        shift_spark_clock=_shift(shift_spark_clock),
    )
    return DataStream(source, spark)


def _shift(shift_spark_clock: Any) -> bool | None:
    if shift_spark_clock is None or isinstance(shift_spark_clock, bool):
        return shift_spark_clock
    raise WindowSpecError(
        f"`shift_spark_clock` must be True, False or None; got {shift_spark_clock!r}"
    )


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
