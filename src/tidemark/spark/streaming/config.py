"""What a streaming query's processor is configured with: the time modes it serves and
:class:`ProcessorConfig` (shipped to Spark's workers with the processor)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidemark._engine.operator import WindowOperator
from tidemark.assigners import WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.spark.columns import DROPPED, FORWARDED, OUTPUT, PHASE, SIDE, TS
from tidemark.spark.streaming.chain import UpstreamInput
from tidemark.time import TimeDomain

__all__ = [
    "ProcessorConfig",
    "EVENT_TIME",
    "PROCESSING_TIME",
    "NONE",
    "EVENT_AND_PROCESSING_TIME",
    "TIME_MODES",
    "time_mode_for",
    "DEFAULT_MAX_PARALLELISM",
    "DEFAULT_STATE_PARTITIONS",
    "GROUPS_PER_PARTITION",
    "MAX_PARALLELISM_CONF",
    "session_max_parallelism",
    "state_partitions_cap",
    "check_time_mode",
    "check_max_parallelism",
]

_MAX_KEY_GROUPS = 32_768  # Flink's upper bound for maxParallelism

EVENT_TIME, PROCESSING_TIME, NONE = "EventTime", "ProcessingTime", "None"
EVENT_AND_PROCESSING_TIME = "EventTimeAndProcessingTime"

TIME_MODES: dict[str, frozenset[TimeDomain]] = {
    EVENT_TIME: frozenset((TimeDomain.EVENT_TIME,)),
    PROCESSING_TIME: frozenset((TimeDomain.PROCESSING_TIME,)),
    EVENT_AND_PROCESSING_TIME: frozenset((TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME)),
    NONE: frozenset(),
}
"""Each ``time_mode`` and the engine clocks it moves: the time domains of the timers it serves."""

DEFAULT_MAX_PARALLELISM = 32
"""The key groups of a :class:`ProcessorConfig` built without a number."""

DEFAULT_STATE_PARTITIONS = 32
"""The most state partitions a streaming query gets by default (see :func:`state_partitions_cap`)."""

GROUPS_PER_PARTITION = 4
"""Key groups per state partition by default (see :func:`session_max_parallelism`)."""

MAX_PARALLELISM_CONF = "spark.tidemark.streaming.maxParallelism"
"""The number of key groups of a streaming query (see :mod:`tidemark.spark.streaming.state`):
read when the query is built, fixed at its first start."""

_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def session_max_parallelism(spark: Any) -> int:
    """The key groups of a new streaming query on ``spark``: :data:`MAX_PARALLELISM_CONF`,
    else :data:`GROUPS_PER_PARTITION` per state partition, ``4 x min(spark.sql.shuffle.
    partitions, 32)``.

    A call per group and micro-batch costs little (the group's row comes with its rows),
    but Spark copies a group's whole row between the JVM and Python at every call, byte
    by byte: at 200,000 keys per micro-batch 2 groups ran at 0.32-0.37x of Spark's
    rows/s, 8 at 0.52x; at 1,000 keys 2 and 8 ran alike (see benchmarks/README.md).
    """
    value = spark.conf.get(MAX_PARALLELISM_CONF, None)
    if value is None:
        partitions = int(spark.conf.get(_SHUFFLE_PARTITIONS, "200"))
        return GROUPS_PER_PARTITION * max(1, min(partitions, DEFAULT_STATE_PARTITIONS))
    try:
        return int(value)
    except ValueError:
        raise WindowSpecError(
            f"`{MAX_PARALLELISM_CONF}` must be an int in [1, {_MAX_KEY_GROUPS}]; got {value!r}"
        ) from None


def state_partitions_cap(spark: Any, max_parallelism: int | None) -> int:
    """The most state partitions a query with ``max_parallelism`` key groups (None: the
    session's) starts with: one per group when the number was given (more could hold no
    group), else :data:`DEFAULT_STATE_PARTITIONS`, so that Spark's default 200 shuffle
    partitions do not each run a task and open a state store in every micro-batch."""
    if max_parallelism is None and spark.conf.get(MAX_PARALLELISM_CONF, None) is None:
        return DEFAULT_STATE_PARTITIONS
    return max_parallelism if max_parallelism is not None else session_max_parallelism(spark)


@dataclass(frozen=True)
class ProcessorConfig:
    """Everything a worker needs to run the window operator for one query.

    Attributes
    ----------
    make_operator : callable
        ``() -> WindowOperator``; called once per key group and micro-batch.
    time_mode : {"EventTime", "ProcessingTime", "EventTimeAndProcessingTime", "None"}
        Which engine clocks the query moves (:data:`TIME_MODES`): event time follows
        Spark's watermark, processing time the batch's. Spark's own ``timeMode`` is
        :meth:`spark_time_mode`.
    key_positions, key_types : tuple
        Where the key columns are in the processor's input, and their Spark type names.
    value_names, value_types : tuple of str
        The columns of the Rows handed to the user's functions, and their Spark type names.
    value_positions : tuple of int
        Where those columns are in the processor's input; the timestamp (long ms) is at
        ``timestamp_position``. Positions, because PySpark rebuilds the pandas frames from
        ``itertuples`` (4.3), which renames columns that are not identifiers.
    timestamp_position : int
        Where the timestamp (long ms) is in the processor's input.
    result_names : tuple of str
        The result columns, in the order ``result_to_row`` returns them.
    result_to_row : callable
        ``(result, timestamp_ms) -> tuple`` for one main result.
    engine_key : callable, optional
        The tuple of a row's key columns to the engine's key; default: the value of a
        single key column, else the tuple.
    idleness_ms : int, optional
        Event time only: after this much processing time without a watermark advance,
        the watermark advances with the processing-time clock (Spark runs the query in
        ProcessingTime mode, see :meth:`spark_time_mode`).
    max_parallelism : int
        The number of key groups; kept with the state (a restart must use the same).
    upstream : UpstreamInput, optional
        The input is an earlier window's combined frame (a chain): its results are the
        elements, stamped with their ``__tm_ts``; no row is an end-of-input marker.
    feeds_downstream : bool
        A later window reads the output: each row carries ``__tm_phase``.
    """

    make_operator: Callable[[], WindowOperator]
    time_mode: str
    value_names: tuple[str, ...]
    value_types: tuple[str, ...]
    value_positions: tuple[int, ...]
    result_names: tuple[str, ...]
    result_to_row: Callable[[Any, int], tuple]
    key_positions: tuple[int, ...] = (0,)
    key_types: tuple[str, ...] = ("StringType",)
    timestamp_position: int = -1
    engine_key: Callable[[tuple], Any] | None = None
    idleness_ms: int | None = None
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    upstream: UpstreamInput | None = None
    feeds_downstream: bool = False

    def output_columns(self) -> list[str]:
        phase = [PHASE, FORWARDED] if self.feeds_downstream else []
        return [OUTPUT, TS, *self.result_names, SIDE, DROPPED, *phase]

    @property
    def event_time(self) -> bool:
        """Whether the engine's watermark follows Spark's."""
        return TimeDomain.EVENT_TIME in TIME_MODES[self.time_mode]

    @property
    def processing_time(self) -> bool:
        """Whether the engine's processing time follows the batches'."""
        return TimeDomain.PROCESSING_TIME in TIME_MODES[self.time_mode]

    def spark_time_mode(self) -> str:
        """The ``timeMode`` Spark runs: ProcessingTime whenever a micro-batch must run
        without data (processing-time timers, or idleness), else ``time_mode``."""
        if self.processing_time or self.idleness_ms is not None:
            return PROCESSING_TIME
        return self.time_mode


def time_mode_for(domains: frozenset[TimeDomain]) -> str:
    """The ``time_mode`` that serves timers in ``domains``.

    >>> time_mode_for(frozenset((TimeDomain.PROCESSING_TIME, TimeDomain.EVENT_TIME)))
    'EventTimeAndProcessingTime'
    """
    return next(mode for mode, served in TIME_MODES.items() if served == domains)


def check_max_parallelism(max_parallelism: int) -> None:
    """Refuse a number of key groups outside Flink's range."""
    if (
        not isinstance(max_parallelism, int)
        or isinstance(max_parallelism, bool)
        or not 1 <= max_parallelism <= _MAX_KEY_GROUPS
    ):
        raise WindowSpecError(
            f"`max_parallelism` must be an int in [1, {_MAX_KEY_GROUPS}]; got "
            f"max_parallelism={max_parallelism!r}"
        )


def check_time_mode(
    assigner: WindowAssigner,
    time_mode: str,
    out_of_orderness_ms: int | None,
    idleness_ms: int | None,
) -> None:
    """Refuse a time mode the stream or the assigner cannot serve, naming the fix."""
    event_time = TimeDomain.EVENT_TIME in TIME_MODES[time_mode]
    if event_time and out_of_orderness_ms is None:
        raise WindowSpecError(
            f"time_mode={time_mode!r} needs a watermark: give a WatermarkStrategy with "
            "bounded out-of-orderness (out_of_orderness_ms); got none. Without a watermark "
            "Spark never fires event-time timers, so no event-time window would ever close"
        )
    if out_of_orderness_ms is not None and out_of_orderness_ms < 0:
        raise WindowSpecError(
            f"`out_of_orderness_ms` must be >= 0; got out_of_orderness={out_of_orderness_ms}ms"
        )
    if idleness_ms is not None and idleness_ms <= 0:
        raise WindowSpecError(f"`idleness` must be > 0; got idleness={idleness_ms}ms")
    if idleness_ms is not None and not event_time:
        raise WindowSpecError(
            f"`idleness` advances the event-time watermark and needs time_mode='EventTime' "
            f"or 'EventTimeAndProcessingTime' (event-time windows or triggers); got "
            f"idleness={idleness_ms}ms, "
            f"time_mode={time_mode!r}: remove with_idleness from the WatermarkStrategy"
        )
    if not assigner.timer_domains() <= TIME_MODES[time_mode]:
        wanted = EVENT_TIME if assigner.is_event_time() else "ProcessingTime"
        raise WindowSpecError(
            f"the assigner {assigner!r} needs time_mode={wanted!r} (or "
            f"'EventTimeAndProcessingTime'); got time_mode={time_mode!r}"
        )
