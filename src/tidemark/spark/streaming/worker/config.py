"""What a streaming query's key groups are configured with: :class:`ProcessorConfig`,
frozen, built once on the driver when the query is defined and shipped to Spark's
workers, with the values and callables it holds (:class:`UpstreamInput`,
:func:`result_row`, the engine keys of :func:`decoded_key` and :func:`no_key`): the
worker needs nothing of the driver's modules to read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidemark._engine.contract import OperatorHandle
from tidemark._engine.create import partials_operator
from tidemark.spark.protocol.codec import result_tuple
from tidemark.spark.protocol.columns import DROPPED, FORWARDED, OUTPUT, PHASE, SIDE, TS, decode_key
from tidemark.spark.protocol.lossless import PandasInput, PandasOutput
from tidemark.spark.protocol.worker_plan import WorkerPlan
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS
from tidemark.spark.streaming.worker.modes import TimeMode
from tidemark.spark.streaming.worker.packing import Unpacking
from tidemark.spark.streaming.worker.variables import StateLayout

__all__ = [
    "ProcessorConfig",
    "UpstreamInput",
    "DEFAULT_MAX_PARALLELISM",
    "result_row",
    "decoded_key",
    "no_key",
]

DEFAULT_MAX_PARALLELISM = 32
"""The key groups of a :class:`ProcessorConfig` built without a number."""


@dataclass(frozen=True)
class UpstreamInput:
    """How a chained processor reads an earlier window's combined frame (a chain,
    :mod:`tidemark.spark.streaming.driver.chain`).

    Attributes
    ----------
    depth : int
        The earlier window's place in the chain (1 = the first window); its outputs
        other than the results pass through under
        :func:`~tidemark.spark.protocol.columns.upstream_output_name`.
    timestamp_position : int
        Where ``__tm_ts`` is in the processor's input; ``__tm_output``, ``__tm_side``,
        ``__tm_dropped``, ``__tm_phase`` and ``__tm_forwarded`` follow it
        (:func:`~tidemark.spark.streaming.driver.chain.prepare_upstream`).
    result_count : int
        The number of this window's result columns (blank on a passed-through row).
    phased : bool
        Whether this window's output carries ``__tm_phase`` (it feeds a later window).
    """

    depth: int
    timestamp_position: int
    result_count: int
    phased: bool


@dataclass(frozen=True)
class ProcessorConfig(WorkerPlan):
    """Everything a worker needs to run the window operator for one query: the
    :class:`~tidemark.spark.protocol.worker_plan.WorkerPlan` both modes share (the spec, whose
    operator :meth:`make_operator` builds once per key group and micro-batch, the value
    columns and their types, the result schema), and what a stream adds.

    Attributes
    ----------
    time_mode : TimeMode
        Which engine clocks the query moves (its name is taken too): event time follows
        Spark's watermark, processing time the batch's. Spark's own ``timeMode`` is
        :meth:`spark_time_mode`.
    key_positions, key_types : tuple
        Where the key columns are in the processor's input, and their Spark type names.
    value_positions : tuple of int
        Where the value columns are in the processor's input; the timestamp (long ms) is at
        ``timestamp_position``. Positions, because PySpark rebuilds the pandas frames from
        ``itertuples`` (4.3), which renames columns that are not identifiers.
    timestamp_position : int
        Where the timestamp (long ms) is in the processor's input.
    result_to_row : callable
        ``(result, timestamp_ms) -> tuple`` for one main result, in the order of
        ``result_names``.
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
    metrics : bool
        Each call emits a ``"__tm_stats"`` row of its figures (:mod:`.metrics`).
    spark_offset_ms : int
        How far Spark's event-time clock runs ahead of the engine's (:mod:`.clock`): 0,
        or :data:`~.clock.SPARK_OFFSET_MS` (the default here, every query's before the
        offset was chosen per query); kept with the checkpoint.
    out_of_orderness_ms : int, optional
        The watermark's out-of-orderness bound (event time): on an unshifted clock an
        element that would make a watermark at or before the epoch is refused before the
        query has one.
    pandas_input, pandas_output : PandasInput, PandasOutput
        Where the input and the output carry what pandas would lose (a NaN apart from
        a null, nested values; :mod:`tidemark.spark.protocol.lossless`).
    key_normaliser : callable, optional
        A row's key column value (or tuple of them) -> its key, for float, struct and
        array key columns (:mod:`tidemark.spark.protocol.keys`).
    state_layout : StateLayout
        How the key groups' state is kept (:mod:`.deltas`): one row per group (the
        default here, every query's before layouts were recorded), or a base and deltas.
    partial_position : int, optional
        Where ``__tm_partial`` is in the processor's input, when the source's rows are
        pre-aggregated before the shuffle (:mod:`.preaggregate`): :meth:`make_operator`
        then makes the operator that merges the partials
        (:func:`~tidemark._engine.create.partials_operator`). None: rows are elements.
    unpacking : Unpacking, optional
        The input's rows come packed per key group (:mod:`.packing`): how a call turns
        them back into pandas. None: Spark hands the rows as they are.
    """

    time_mode: TimeMode
    value_positions: tuple[int, ...]
    result_to_row: Callable[[Any, int], tuple]
    key_positions: tuple[int, ...] = (0,)
    key_types: tuple[str, ...] = ("StringType",)
    timestamp_position: int = -1
    engine_key: Callable[[tuple], Any] | None = None
    idleness_ms: int | None = None
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    upstream: UpstreamInput | None = None
    feeds_downstream: bool = False
    metrics: bool = False
    spark_offset_ms: int = SPARK_OFFSET_MS
    out_of_orderness_ms: int | None = None
    pandas_input: PandasInput = PandasInput()
    pandas_output: PandasOutput = PandasOutput()
    key_normaliser: Callable[[Any], Any] | None = None
    state_layout: StateLayout = StateLayout()
    partial_position: int | None = None
    unpacking: Unpacking | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_mode", TimeMode.of(self.time_mode))

    def make_operator(self) -> OperatorHandle:
        """The operator of :attr:`spec` (the one merging its partials when the input
        carries them, ``partial_position``)."""
        if self.partial_position is not None:
            return partials_operator(self.spec)
        return super().make_operator()

    def output_columns(self) -> list[str]:
        phase = [PHASE, FORWARDED] if self.feeds_downstream else []
        return [OUTPUT, TS, *self.result_names, SIDE, DROPPED, *phase]

    def spark_time_mode(self) -> TimeMode:
        """The ``timeMode`` Spark runs: ProcessingTime whenever a micro-batch must run
        without data (processing-time timers, or idleness), else ``time_mode``."""
        return self.time_mode.spark_time_mode(self.idleness_ms)


def result_row(names: list[str], value: Any, timestamp: int) -> tuple[Any, ...]:
    """``result_to_row`` of a pipeline: the result's values in the order of ``names``."""
    return result_tuple(value, names)


def decoded_key(key: tuple[Any, ...]) -> Any:
    """``engine_key`` of a function key: its pickled column, decoded."""
    return decode_key(key[0])


def no_key(key: tuple[Any, ...]) -> Any:
    """``engine_key`` of a window on the whole stream (``window_all``): one key, None."""
    return None
