"""What :func:`~.query.window_stream` refuses, before anything is built: arguments that
name no column or no streaming DataFrame, a stream with a watermark of its own, and a
time mode the stream or the assigner cannot serve. Each message names the parameter,
the rule, the value and the fix."""

from __future__ import annotations

from pyspark.sql import DataFrame

from tidemark.assigners import WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.spark.streaming.worker.modes import TimeMode

__all__ = ["check_arguments", "check_time_mode", "WATERMARK_DELAY"]

WATERMARK_DELAY = "spark.watermarkDelayMs"  # Spark's metadata key on a watermark column


def check_arguments(
    df: DataFrame,
    key_columns: list[str],
    timestamp_column: str | None,
    value_columns: list[str],
    time_mode: TimeMode | str,
) -> TimeMode:
    """The time mode named, once the arguments are checked."""
    if not df.isStreaming:
        raise WindowSpecError(
            "`df` must be a streaming DataFrame (spark.readStream...); run bounded "
            "DataFrames with the batch runner"
        )
    mode = TimeMode.of(time_mode)
    names = df.columns
    wanted = [*key_columns, *value_columns] + ([timestamp_column] if timestamp_column else [])
    missing = [c for c in wanted if c not in names]
    if missing or not key_columns:
        raise WindowSpecError(
            f"`key_columns`, `value_columns` and `timestamp_column` must name columns of "
            f"`df` (at least one key column); missing {missing} in {names}"
        )
    marked = [f.name for f in df.schema.fields if WATERMARK_DELAY in f.metadata]
    if marked:
        raise WindowSpecError(
            f"`df` already has a watermark on {marked}: tidemark sets the watermark from the "
            "WatermarkStrategy; remove withWatermark (Spark would take the minimum of both)"
        )
    return mode


def check_time_mode(
    assigner: WindowAssigner,
    time_mode: TimeMode,
    out_of_orderness_ms: int | None,
    idleness_ms: int | None,
) -> None:
    """Refuse a time mode the stream or the assigner cannot serve, naming the fix."""
    if time_mode.event_time and out_of_orderness_ms is None:
        raise WindowSpecError(
            f"time_mode={time_mode.value!r} needs a watermark: give a WatermarkStrategy with "
            "bounded out-of-orderness (out_of_orderness_ms); got none. Without a watermark "
            "Spark never fires event-time timers, so no event-time window would ever close"
        )
    if out_of_orderness_ms is not None and out_of_orderness_ms < 0:
        raise WindowSpecError(
            f"`out_of_orderness_ms` must be >= 0; got out_of_orderness={out_of_orderness_ms}ms"
        )
    if idleness_ms is not None and idleness_ms <= 0:
        raise WindowSpecError(f"`idleness` must be > 0; got idleness={idleness_ms}ms")
    if idleness_ms is not None and not time_mode.event_time:
        raise WindowSpecError(
            f"`idleness` advances the event-time watermark and needs time_mode='EventTime' "
            f"or 'EventTimeAndProcessingTime' (event-time windows or triggers); got "
            f"idleness={idleness_ms}ms, "
            f"time_mode={time_mode.value!r}: remove with_idleness from the WatermarkStrategy"
        )
    if not assigner.timer_domains() <= time_mode.domains:
        wanted = TimeMode.EVENT_TIME if assigner.is_event_time() else TimeMode.PROCESSING_TIME
        raise WindowSpecError(
            f"the assigner {assigner!r} needs time_mode={wanted.value!r} (or "
            f"'EventTimeAndProcessingTime'); got time_mode={time_mode.value!r}"
        )
