"""A streaming window's frame, built once its number of key groups is decided: the
input prepared for the key groups (the columns the workers read, the timestamp in ms,
Spark's watermark and each row's key group slot, :mod:`.keygroups`), then run through
Spark's stateful operator, whose workers run the key groups
(:mod:`tidemark.spark.streaming.worker`).

The watermark follows the event-time mapping of :mod:`~tidemark.spark.streaming.worker.clock`:
a column ``timestamp + COLUMN_SHIFT_MS`` carries it, then is projected away, so Spark
tracks the watermark and filters no row on it (tidemark decides what is late).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidemark.spark.columns import KEY_GROUP, TS, WATERMARK_MARK, WATERMARK_TIME, combined_schema
from tidemark.spark.streaming.driver.checks import WATERMARK_DELAY
from tidemark.spark.streaming.driver.keygroups import slot_column
from tidemark.spark.streaming.worker.bindings import WindowGroupFunction, WindowStatefulProcessor
from tidemark.spark.streaming.worker.clock import (
    COLUMN_SHIFT_MS,
    END_OF_INPUT_COLUMN_MICROS,
    END_OF_INPUT_MS,
    watermark_delay_ms,
)
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.spark.streaming.worker.state import STATE_SCHEMA
from tidemark.spark.timestamps import timestamp_ms

__all__ = ["input_names", "source_input", "key_group_operator"]


def input_names(key_columns: list[str], value_columns: list[str]) -> list[str]:
    """The processor's input columns, before the timestamp: keys, then values, once each."""
    return list(dict.fromkeys([*key_columns, *value_columns]))


def source_input(
    df: DataFrame,
    key_columns: list[str],
    value_columns: list[str],
    timestamp_column: str | None,
    out_of_orderness_ms: int | None,
    groups: int,
) -> DataFrame:
    """A stream's rows as the processor reads them: :func:`input_names`, the timestamp
    (long ms) as ``__tm_ts``, the key group's slot (of ``groups``); with event time
    (``out_of_orderness_ms`` given) Spark's watermark on it."""
    names = input_names(key_columns, value_columns)
    timestamp = timestamp_ms(df.schema, timestamp_column, "timestamp_column")
    columns = [_input_column(df, c, c in key_columns, timestamp) for c in names]
    prepared = df.select(*columns, timestamp.alias(TS))
    if out_of_orderness_ms is not None:
        prepared = _watermarked(prepared, out_of_orderness_ms)
    return prepared.withColumn(KEY_GROUP, slot_column(key_columns, groups))


def _input_column(df: DataFrame, name: str, is_key: bool, timestamp_ms: Any) -> Any:
    col = F.col(f"`{name}`")
    kind = type(df.schema[name].dataType).__name__
    if is_key or kind not in ("TimestampType", "TimestampNTZType"):
        return col
    # An end-of-input marker's timestamp (year 9999) is beyond pandas' nanosecond range,
    # which PySpark converts timestamps to; the marker's values are never used.
    is_marker = timestamp_ms.isNotNull() & (timestamp_ms >= F.lit(END_OF_INPUT_MS))
    return F.when(~is_marker, col).alias(name)


def _watermarked(prepared: DataFrame, out_of_orderness_ms: int) -> DataFrame:
    ts = F.col(TS)
    end_of_input = F.timestamp_micros(F.lit(END_OF_INPUT_COLUMN_MICROS))
    shifted = F.timestamp_millis(ts + F.lit(COLUMN_SHIFT_MS))
    event_time = F.when(ts >= F.lit(END_OF_INPUT_MS), end_of_input).otherwise(shifted)
    delay = f"{watermark_delay_ms(out_of_orderness_ms)} milliseconds"
    # The watermark column is dropped right away: Spark still tracks the watermark, and
    # with nothing to filter on it drops no late row before the processor.
    return (
        prepared.withColumn(WATERMARK_TIME, event_time)
        .withWatermark(WATERMARK_TIME, delay)
        .drop(WATERMARK_TIME)
    )


def key_group_operator(
    prepared: DataFrame,
    config: ProcessorConfig,
    result_schema: StructType,
    out_of_orderness_ms: int | None,
) -> DataFrame:
    """``prepared`` (rows with their key group) through the window's key groups: in
    ``applyInPandasWithState``, or in ``transformWithStateInPandas`` for a window of a
    chain; the combined frame (:func:`~tidemark.spark.columns.combined_schema`).

    Spark only accepts an event-time timeout, and only shows the function its watermark,
    when a column of the operator's input carries the watermark's metadata; and it drops
    input rows behind the watermark on that column. The watermark's own column is
    projected away before (:func:`source_input`), so a null column carries the metadata
    (the watermark's delay, ms) instead: Spark's watermark is unchanged, and no row is
    behind a null, so Spark drops none."""
    output_schema = combined_schema(result_schema, phase=config.feeds_downstream)
    grouped = prepared.groupBy(F.col(KEY_GROUP))
    spark_time_mode: TimeMode = config.spark_time_mode()
    if config.upstream is not None or config.feeds_downstream:
        processor = WindowStatefulProcessor(config)
        return grouped.transformWithStateInPandas(
            processor, output_schema, "Append", spark_time_mode.value
        )
    function = WindowGroupFunction(config)
    if config.time_mode.event_time and out_of_orderness_ms is not None:
        metadata = {WATERMARK_DELAY: watermark_delay_ms(out_of_orderness_ms)}
        marker = F.lit(None).cast("timestamp").alias(WATERMARK_MARK, metadata=metadata)
        grouped = prepared.select("*", marker).groupBy(F.col(KEY_GROUP))
    return grouped.applyInPandasWithState(
        function, output_schema, STATE_SCHEMA, "append", function.timeout()
    )
