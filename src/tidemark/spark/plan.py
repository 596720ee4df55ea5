"""The plan layer: immutable descriptions of a pipeline, apart from the API that builds them.

A pipeline is a chain of plan nodes: a :class:`Source` (a DataFrame read as a stream),
then :class:`WindowOp` nodes, each naming the node it reads (``upstream``) and holding
the one record of its window's settings (:class:`~tidemark._engine.spec.OperatorSpec`,
validated once, when the window is defined; Spark's workers build their operator from
it). The user's
objects (:mod:`tidemark.spark.api.streams`) hold a node; :mod:`tidemark.spark.execution` decides
how a node runs. Nodes compare and hash by identity: a node is one operation of one
pipeline, and the execution layer remembers what it computed for it.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from tidemark._engine.spec import OperatorSpec
from tidemark.assigners import GlobalWindows, WindowAssigner
from tidemark.errors import TidemarkWarning, WindowSpecError
from tidemark.evictors import Evictor
from tidemark.outputs import OutputTag
from tidemark.panes import AccumulationMode
from tidemark.spark.runtime.confs import FAST_PATHS, SLICE_INCREMENTAL
from tidemark.time import TimeDomain
from tidemark.triggers import AnyTrigger, NeverTrigger
from tidemark.watermarks import WatermarkStrategy

__all__ = [
    "key_spec",
    "warn_default_watermarks",
    "warn_never_firing",
    "warn_lost_session_elements",
    "check_replay_clock",
    "Source",
    "SourcePartitions",
    "WindowOp",
    "KeySpec",
    "PlanNode",
    "source_of",
    "fast_paths_enabled",
    "slice_incremental_enabled",
    "FAST_PATHS_CONF",
]


@dataclass(frozen=True)
class SourcePartitions:
    """Which column holds a row's source partition, and the partitions there are
    (None: a replay takes the values its rows hold)."""

    column: str
    values: tuple[Hashable, ...] | None = None

    def describe(self) -> str:
        listed = "its values" if self.values is None else list(self.values)
        return f"partition_column={self.column!r}, partitions={listed}"


@dataclass(frozen=True, eq=False)
class Source:
    """A DataFrame read as a stream of its rows.

    ``timestamp_unit`` is the unit of the user's integral event-time column ("ms", "s",
    "us" or "ns"). In a unit other than ms, ``timestamp`` is None and ``strategy``
    has a timestamp assigner that reads the column in its unit
    (:class:`~tidemark.spark.protocol.timestamps.ScaledTimestamp`), which every mode applies.
    ``watermark_strategy_given`` is False when ``strategy`` is the default (monotonous
    timestamps), not the user's choice. ``partitions`` says which column holds a row's
    source partition, for per-partition watermarks (:mod:`tidemark.spark.protocol.source_partitions`).
    ``shift_spark_clock`` is the user's choice of Spark's event-time clock for a stream
    (None: the checkpoint's, unshifted at a first start;
    :mod:`tidemark.spark.streaming.worker.clock`).
    """

    df: Any
    timestamp: str | None
    order_by: tuple[str, ...] | None  # the arrival order's columns, compared in turn
    strategy: WatermarkStrategy
    processing_time: str | None
    watermark: str | None = None
    timestamp_unit: str = "ms"
    watermark_strategy_given: bool = True
    partitions: SourcePartitions | None = None
    shift_spark_clock: bool | None = None

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
    """A window operation on an upstream node: where it reads (``upstream``, ``key``),
    what it computes (``spec``, the one record of the window's settings, validated
    once, when the window was finished) and the Spark schema of its results
    (``output_schema``; under a Dataflow trigger it ends with the pane columns,
    :mod:`tidemark.spark.protocol.pane_columns`).

    The window's settings read through it (``assigner``, ``trigger`` ...) are the
    spec's. A run ships :meth:`run_spec` to Spark's workers, which build the operator
    from it where its windows run (:func:`~tidemark._engine.create.create_window_operator`)."""

    upstream: PlanNode
    key: KeySpec | None
    spec: OperatorSpec
    output_schema: Any

    @property
    def schema(self) -> Any:
        """The Spark schema of the results."""
        return self.output_schema

    @property
    def source(self) -> Source:
        """The source at the start of the chain."""
        return source_of(self)

    @property
    def assigner(self) -> WindowAssigner:
        return self.spec.assigner

    @property
    def trigger(self) -> AnyTrigger | None:
        """The trigger as given (None: the assigner's default)."""
        return self.spec.trigger

    @property
    def evictor(self) -> Evictor | None:
        return self.spec.evictor

    @property
    def allowed_lateness_ms(self) -> int:
        return self.spec.allowed_lateness_ms

    @property
    def late_tag(self) -> OutputTag | None:
        return self.spec.late_data_tag

    @property
    def function(self) -> Any:
        """The user's reduce, aggregate or window function, as given."""
        return self.spec.logic.function

    @property
    def window_function(self) -> Any:
        """The window function given beside a reduce or aggregate function, or None."""
        logic = self.spec.logic
        return None if logic.keeps_elements else logic.window_function

    @property
    def accumulation_mode(self) -> AccumulationMode | None:
        """The mode of a Dataflow trigger's panes (DISCARDING unless given); None under
        Flink's triggers (no panes)."""
        return self.spec.accumulation_mode

    def run_spec(
        self, *, batch_mode: bool = False, record_output_watermarks: bool = False
    ) -> OperatorSpec:
        """The spec with the run's options: the session's switches
        (``spark.tidemark.fastPaths``, ``spark.tidemark.sliceIncremental``), read when
        the run is planned, and the mode's (``batch_mode`` for BATCH,
        ``record_output_watermarks`` for a replay). Picklable: no DataFrames in it."""
        spark = self.source.df.sparkSession
        return self.spec.with_run_options(
            batch_mode=batch_mode,
            record_output_watermarks=record_output_watermarks,
            fast_paths=fast_paths_enabled(spark),
            slice_incremental=slice_incremental_enabled(spark),
        )


PlanNode = Source | WindowOp


def source_of(node: PlanNode) -> Source:
    """The source a node reads, through any chain of window operations."""
    while isinstance(node, WindowOp):
        node = node.upstream
    return node


FAST_PATHS_CONF = FAST_PATHS.name


def fast_paths_enabled(spark: Any) -> bool:
    """False when the Spark conf ``spark.tidemark.fastPaths`` is ``false``: every
    pipeline then runs on the general engine operator, and no BATCH pipeline on the SQL
    fast path (which ``spark.tidemark.sqlFastPath=false`` alone turns off). A value
    other than true or false is refused (:mod:`tidemark.spark.runtime.confs`)."""
    return FAST_PATHS.enabled(spark)


SLICE_INCREMENTAL_CONF = SLICE_INCREMENTAL.name


def slice_incremental_enabled(spark: Any) -> bool:
    """True when the Spark conf ``spark.tidemark.sliceIncremental`` is ``true``: sliding
    windows of a reduce or aggregate function are then stored once per slice (see
    ``OperatorSpec.slice_incremental``). A value other than true or false is refused."""
    return SLICE_INCREMENTAL.enabled(spark)


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
        stacklevel=_outside_tidemark(),
    )


def warn_never_firing(assigner: WindowAssigner, trigger: AnyTrigger | None) -> None:
    """Warn that ``GlobalWindows.create()`` without a trigger never fires: as Flink's
    NeverTrigger, every element is kept and no result comes, in every mode."""
    if trigger is not None or not isinstance(assigner, GlobalWindows):
        return
    if not isinstance(assigner.get_default_trigger(), NeverTrigger):
        return  # create_with_end_of_stream_trigger() fires at the end of the input
    warnings.warn(
        "GlobalWindows.create() without .trigger(...) never fires (Flink's NeverTrigger): "
        "every element is kept and no window result comes, none counted as dropped; "
        "add a trigger, e.g. .trigger(tm.CountTrigger.of(n)), or use key_by(...)."
        "count_window(n), GlobalWindows.create_with_end_of_stream_trigger() (one result "
        "at the end of a bounded input) or a custom Trigger",
        TidemarkWarning,
        stacklevel=_outside_tidemark(),
    )


def warn_lost_session_elements(assigner: WindowAssigner) -> None:
    """Warn that dynamic-gap sessions lose elements as Flink's do, unless the assigner
    was told which behaviour to keep (``keep_all_elements=True`` or ``False``)."""
    if getattr(assigner, "keep_all_elements", False) is not None:
        return
    warnings.warn(
        f"{type(assigner).__name__}: as in Flink 1.20, a merged session loses the elements "
        "it holds when a later element's window [ts, ts + gap) equals it exactly (a dynamic "
        "gap can make one); pass keep_all_elements=True to with_dynamic_gap(...) to keep "
        "every element (results then differ from Flink's there), or keep_all_elements=False "
        "to keep Flink's results without this warning (docs: concepts/sessions)",
        TidemarkWarning,
        stacklevel=_outside_tidemark(),
    )


def _outside_tidemark() -> int:
    """The ``stacklevel`` (for a ``warnings.warn`` in the caller) of the first frame
    outside tidemark: the user's line, however deep the finishing call went."""
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tidemark."):
        frame, level = frame.f_back, level + 1
    return level


def check_replay_clock(
    plan: PlanNode, assigner: WindowAssigner | None, trigger: AnyTrigger | None
) -> None:
    """Refuse processing time on a replay that has no arrival times to drive it.

    A replay's processing time is its ``processing_time`` column; without one the clock
    never moves, so processing-time windows (or a trigger on processing time) would keep
    every element and fire nothing. A custom trigger that does not declare its domains
    (``Trigger.declares_timer_domains``) is taken to use the windows' clock.

    Raises
    ------
    WindowSpecError
        Naming the assigner or trigger and the two ways out.
    """
    source = source_of(plan)
    if not isinstance(source, Source) or not source.replay:
        return
    if source.processing_time is not None or not isinstance(assigner, WindowAssigner):
        return  # (validate_window_spec names what a non-assigner is)
    uses = None
    if TimeDomain.PROCESSING_TIME in assigner.timer_domains():
        uses = f"the windows of {assigner!r} are"
    elif trigger is not None and trigger.declares_timer_domains():
        if TimeDomain.PROCESSING_TIME in trigger.timer_domains():
            uses = f"the trigger {trigger!r} is"
    if uses is None:
        return
    raise WindowSpecError(
        f"{uses} on processing time, but this replay (`order_by`) has no `processing_time` "
        "column to drive it, so its clock would never move and no such window would fire: "
        "pass from_dataframe(..., processing_time=<the arrival-time column>) (long ms or a "
        "timestamp), or drop `order_by` to run in BATCH, where processing time is the wall "
        "clock"
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
