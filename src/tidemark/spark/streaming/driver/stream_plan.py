"""What a window on a stream is built from: :class:`StreamPlan`, the window's record (its
:class:`~tidemark._engine.spec.OperatorSpec`) with the columns it reads and writes and
the clocks it runs on, and the checks :func:`~.query.window_stream` makes of it against
the stream before building anything (:func:`check_plan`).

A pipeline's window operation becomes one in :mod:`.from_plan`; tests and benchmarks
build one directly. The plan holds no DataFrame: the stream it runs on is given beside
it, as the checkpoint its query starts on is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from tidemark._engine.spec import OperatorSpec
from tidemark.assigners import WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.spark.plan import SourcePartitions
from tidemark.spark.streaming.driver.chain import check_chain_mode
from tidemark.spark.streaming.driver.preaggregate import PreAggregation
from tidemark.spark.streaming.worker.modes import TimeMode

__all__ = ["StreamPlan", "check_plan", "check_time_mode", "WATERMARK_DELAY"]

WATERMARK_DELAY = "spark.watermarkDelayMs"  # Spark's metadata key on a watermark column


@dataclass(frozen=True)
class StreamPlan:
    """A window to run per key (in key groups) on a stream.

    Attributes
    ----------
    spec : OperatorSpec
        The window's one record with its run's options, shipped to the workers (it must
        pickle), which build its operator; its late-data tag's rows decode to
        ``value_columns``.
    key_columns : tuple of str
        The grouping columns; the engine's key is the value of one column, or the tuple.
    value_columns : tuple of str
        The columns of the Rows handed to the user's functions (and of late rows). On a
        window of a chain: the earlier window's result columns.
    timestamp_column : str or None
        Event time: long milliseconds or a timestamp (a chain's: its ``__tm_ts``). None
        only for processing time.
    result_schema : StructType
        The columns of a main result.
    result_to_row : callable
        ``(result, timestamp_ms) -> tuple`` in the order of ``result_schema``.
    out_of_orderness_ms : int or None
        The bounded out-of-orderness of the watermark strategy; required for EventTime.
    time_mode : TimeMode or its name
        Which engine timers the query serves ("None": count windows without timers). With
        processing time among them Spark runs the query in ProcessingTime mode: give it
        a processing-time trigger (see the streaming guide).
    idleness_ms : int, optional
        Event time only: let the watermark advance with processing time once it stood
        still this long (:mod:`~..worker.clock`); the query then runs in Spark's
        ProcessingTime mode and needs a processing-time trigger. This goes beyond Flink,
        whose idleness never moves a watermark, so ``from_dataframe``'s pipelines no
        longer ask for it (issue 47, ``docs/streaming.md``).
    engine_key : callable, optional
        Spark's key tuple -> the engine's key (e.g. unpickle a function key's column).
    feeds_downstream : bool
        A later window of a chain reads the result: add ``__tm_phase``.
    partitions : SourcePartitions, optional
        Per-partition watermarks, their minimum (:mod:`tidemark.spark.protocol.source_partitions`).
    pre_aggregate : PreAggregation, optional
        Fold each input partition's elements per window before the key groups
        (:mod:`~.preaggregate`; :func:`~.preaggregate.pre_aggregation` says where it serves).
    """

    spec: OperatorSpec
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    timestamp_column: str | None
    result_schema: StructType
    result_to_row: Callable[[Any, int], tuple]
    out_of_orderness_ms: int | None
    time_mode: TimeMode | str = TimeMode.EVENT_TIME
    idleness_ms: int | None = None
    engine_key: Callable[[tuple], Any] | None = None
    feeds_downstream: bool = False
    partitions: SourcePartitions | None = None
    pre_aggregate: PreAggregation | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "key_columns", tuple(self.key_columns))
        object.__setattr__(self, "value_columns", tuple(self.value_columns))

    @property
    def input_names(self) -> list[str]:
        """The processor's input columns, before the timestamp: keys, then values, once
        each."""
        return list(dict.fromkeys([*self.key_columns, *self.value_columns]))


def check_plan(df: DataFrame, plan: StreamPlan, upstream: Any) -> TimeMode:
    """The time mode ``plan`` names, once it is checked against ``df`` (the stream, or
    the ``upstream`` window's combined frame): refused with the fix named."""
    time_mode = _check_arguments(df, plan)
    check_time_mode(plan.spec.assigner, time_mode, plan.out_of_orderness_ms, plan.idleness_ms)
    if upstream is not None or plan.feeds_downstream:
        check_chain_mode(plan.spec.assigner, time_mode, plan.idleness_ms, upstream)
    return time_mode


def _check_arguments(df: DataFrame, plan: StreamPlan) -> TimeMode:
    """The time mode named, once the columns and the stream are checked."""
    if not df.isStreaming:
        raise WindowSpecError(
            "`df` must be a streaming DataFrame (spark.readStream...); run bounded "
            "DataFrames with the batch runner"
        )
    mode = TimeMode.of(plan.time_mode)
    names = df.columns
    timestamp = [plan.timestamp_column] if plan.timestamp_column else []
    wanted = [*plan.key_columns, *plan.value_columns, *timestamp]
    missing = [c for c in wanted if c not in names]
    if missing or not plan.key_columns:
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
