"""What a streaming query's key groups are configured with: :class:`ProcessorConfig`,
frozen, built once when the query is defined and shipped to Spark's workers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidemark._engine.operator import WindowOperator
from tidemark.spark.columns import DROPPED, FORWARDED, OUTPUT, PHASE, SIDE, TS
from tidemark.spark.lossless import PandasInput, PandasOutput
from tidemark.spark.streaming.chain import UpstreamInput
from tidemark.spark.streaming.modes import PROCESSING_TIME, TIME_MODES
from tidemark.time import TimeDomain

__all__ = ["ProcessorConfig", "DEFAULT_MAX_PARALLELISM"]

DEFAULT_MAX_PARALLELISM = 32
"""The key groups of a :class:`ProcessorConfig` built without a number."""


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
    result_schema : StructType, optional
        The results' schema: a result a field cannot hold fails naming the field
        (:class:`~tidemark.errors.WindowResultError`), not in Spark's Arrow conversion.
    metrics : bool
        Each call emits a ``"__tm_stats"`` row of its figures (:mod:`.metrics`).
    pandas_input, pandas_output : PandasInput, PandasOutput
        Where the input and the output carry what pandas would lose (a NaN apart from
        a null, nested values; :mod:`tidemark.spark.lossless`).
    key_normaliser : callable, optional
        A row's key column value (or tuple of them) -> its key, for float, struct and
        array key columns (:mod:`tidemark.spark.keys`).
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
    result_schema: Any = None
    metrics: bool = False
    pandas_input: PandasInput = PandasInput()
    pandas_output: PandasOutput = PandasOutput()
    key_normaliser: Callable[[Any], Any] | None = None

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
