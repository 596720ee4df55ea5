"""The plan layer: immutable descriptions of a pipeline, apart from the API that builds them.

A pipeline is a chain of plan nodes: a :class:`Source` (a DataFrame read as a stream),
then :class:`WindowOp` nodes, each naming the node it reads (``upstream``). The user's
objects (:mod:`tidemark.spark.api`) hold a node; :mod:`tidemark.spark.execution` decides
how a node runs. Nodes compare and hash by identity: a node is one operation of one
pipeline, and the execution layer remembers what it computed for it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tidemark._engine.create import create_window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.operator import WindowOperator
from tidemark._engine.spec import OperatorSpec
from tidemark.assigners import WindowAssigner
from tidemark.errors import TidemarkWarning, WindowSpecError
from tidemark.evictors import Evictor
from tidemark.outputs import OutputTag
from tidemark.panes import AccumulationMode
from tidemark.triggers import Trigger
from tidemark.watermarks import WatermarkStrategy

__all__ = [
    "key_spec",
    "warn_default_watermarks",
    "Source",
    "WindowOp",
    "KeySpec",
    "OperatorFactory",
    "PlanNode",
    "source_of",
    "fast_paths_enabled",
    "slice_incremental_enabled",
    "FAST_PATHS_CONF",
]


@dataclass(frozen=True, eq=False)
class Source:
    """A DataFrame read as a stream of its rows.

    ``timestamp_unit`` is the unit of the user's integral event-time column ("ms", "s",
    "us" or "ns"). In a unit other than ms, ``timestamp`` is None and ``strategy``
    has a timestamp assigner that reads the column in its unit
    (:class:`~tidemark.spark.timestamps.ScaledTimestamp`), which every mode applies.
    ``watermark_strategy_given`` is False when ``strategy`` is the default (monotonous
    timestamps), not the user's choice.
    """

    df: Any
    timestamp: str | None
    order_by: tuple[str, ...] | None  # the arrival order's columns, compared in turn
    strategy: WatermarkStrategy
    processing_time: str | None
    watermark: str | None = None
    timestamp_unit: str = "ms"
    watermark_strategy_given: bool = True

    @property
    def schema(self) -> Any:
        """The Spark schema of the elements."""
        return self.df.schema

    @property
    def replay(self) -> bool:
        """Whether the source is a recorded stream replayed in its arrival order."""
        return self.order_by is not None

    @property
    def streaming(self) -> bool:
        return bool(self.df.isStreaming)


@dataclass(frozen=True)
class KeySpec:
    """How elements are keyed: by columns (the key is the value, or a tuple of values)
    or by a function of the Row."""

    columns: tuple[str, ...] = ()
    function: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        return ", ".join(self.columns) if self.columns else repr(self.function)


@dataclass(frozen=True, eq=False)
class WindowOp:
    """A window operation on an upstream node. ``function`` and ``output_schema`` are
    None until the windowed stream is finished with a window function.

    ``accumulation_mode`` is what ``accumulation_mode(...)`` was given until the window
    is finished; then the mode it runs with: DISCARDING by default under a Dataflow
    trigger, whose results carry their panes (``output_schema`` then ends with the pane
    columns, :mod:`tidemark.spark.pane_columns`), None under any other trigger."""

    upstream: PlanNode
    key: KeySpec | None
    assigner: WindowAssigner
    trigger: Trigger | None = None
    evictor: Evictor | None = None
    allowed_lateness_ms: int = 0
    late_tag: OutputTag | None = None
    function: Any = None
    window_function: Any = None
    output_schema: Any = None
    accumulation_mode: AccumulationMode | None = None

    @property
    def schema(self) -> Any:
        """The Spark schema of the results."""
        return self.output_schema

    @property
    def source(self) -> Source:
        """The source at the start of the chain."""
        return source_of(self)

    def operator_factory(self) -> OperatorFactory:
        """A picklable ``() -> WindowOperator`` for Spark's workers (no DataFrames in it)."""
        return OperatorFactory(
            self.assigner,
            self.trigger,
            self.evictor,
            self.allowed_lateness_ms,
            self.late_tag,
            self.function,
            self.window_function,
            fast_paths_enabled(self.source.df.sparkSession),
            self.accumulation_mode,
            slice_incremental_enabled(self.source.df.sparkSession),
        )


PlanNode = Source | WindowOp


def source_of(node: PlanNode) -> Source:
    """The source a node reads, through any chain of window operations."""
    while isinstance(node, WindowOp):
        node = node.upstream
    return node


@dataclass(frozen=True)
class OperatorFactory:
    """Builds the engine's window operator of a window operation, on a Spark worker."""

    assigner: WindowAssigner
    trigger: Trigger | None
    evictor: Evictor | None
    allowed_lateness_ms: int
    late_tag: OutputTag | None
    function: Any
    window_function: Any
    fast_paths: bool = True
    accumulation_mode: AccumulationMode | None = None  # set: results are PanedResults
    slice_incremental: bool = False
    # The spec of each (batch_mode, record_output_watermarks), built once per process:
    # a streaming query makes an operator per key group and micro-batch.
    _specs: dict[tuple[bool, bool], OperatorSpec] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __call__(
        self, *, batch_mode: bool = False, record_output_watermarks: bool = False
    ) -> WindowOperator:
        options = (batch_mode, record_output_watermarks)
        spec = self._specs.get(options)
        if spec is None:
            spec = self._specs[options] = OperatorSpec(
                self.assigner,
                window_logic(self.function, self.window_function),
                self.trigger,
                self.evictor,
                self.allowed_lateness_ms,
                self.late_tag,
                batch_mode=batch_mode,
                record_output_watermarks=record_output_watermarks,
                fast_paths=self.fast_paths,
                accumulation_mode=self.accumulation_mode,
                pane_results=self.accumulation_mode is not None,
                slice_incremental=self.slice_incremental,
            )
        return create_window_operator(spec)


FAST_PATHS_CONF = "spark.tidemark.fastPaths"


def fast_paths_enabled(spark: Any) -> bool:
    """False when the Spark conf ``spark.tidemark.fastPaths`` is ``false``: every
    pipeline then runs on the general engine operator, and no BATCH pipeline on the SQL
    fast path (which ``spark.tidemark.sqlFastPath=false`` alone turns off)."""
    return str(spark.conf.get(FAST_PATHS_CONF, "true")).lower() != "false"


SLICE_INCREMENTAL_CONF = "spark.tidemark.sliceIncremental"


def slice_incremental_enabled(spark: Any) -> bool:
    """True when the Spark conf ``spark.tidemark.sliceIncremental`` is ``true``: sliding
    windows of a reduce or aggregate function are then stored once per slice (see
    ``OperatorSpec.slice_incremental``)."""
    return str(spark.conf.get(SLICE_INCREMENTAL_CONF, "false")).lower() == "true"


def warn_default_watermarks(plan: PlanNode, assigner: WindowAssigner) -> None:
    """Warn that the default watermarks drop out-of-order elements, when an event-time
    window is defined right on a stream or replay that was given no strategy (BATCH
    drops nothing, and a replay of recorded watermarks does not use the strategy)."""
    if not isinstance(plan, Source) or plan.watermark_strategy_given:
        return
    if not assigner.is_event_time() or plan.watermark is not None:
        return
    if not (plan.streaming or plan.replay):
        return
    kind = "stream" if plan.streaming else "replay"
    warnings.warn(
        f"no `watermark_strategy` given for a {kind} with event-time windows: using "
        "WatermarkStrategy.for_monotonous_timestamps(); an element for a window that ends "
        "at or before the largest timestamp seen is late: dropped unless allowed_lateness "
        "or side_output_late_data keeps it; pass watermark_strategy=tm.WatermarkStrategy."
        "for_bounded_out_of_orderness(...) (or for_monotonous_timestamps() to keep this)",
        TidemarkWarning,
        stacklevel=3,
    )


def key_spec(key: Any, schema: Any) -> KeySpec:
    """The key of ``key_by(key)`` on a stream of ``schema``, checked now."""
    if callable(key) and not isinstance(key, str):
        return KeySpec(function=key)
    columns = (key,) if isinstance(key, str) else tuple(key)
    if not columns or not all(isinstance(c, str) for c in columns):
        raise WindowSpecError(
            f"`key` must be a column name, a list of them, or a function of Row; got {key!r}"
        )
    missing = [c for c in columns if c not in schema.fieldNames()]
    if missing:
        raise WindowSpecError(
            f"`key` names columns that do not exist: {missing}; columns: {schema.fieldNames()}"
        )
    return KeySpec(columns=columns)
