"""What a window pipeline is, checked when it is defined.

:class:`OperatorSpec` is the one record of a window's settings, frozen and validated
once, when the window is defined (the harness's constructor, the Spark API's finishing
call): the assigner, trigger, evictor and window function, then the options of the run
(:meth:`OperatorSpec.with_run_options`). Spark's workers receive it as one picklable
value and build their operator from it. Per-key state and the clocks are not in it; the
operator keeps those.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tidemark._engine.functions import WindowLogic, refuse_class
from tidemark.assigners import GlobalWindows, MergingWindowAssigner, WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.evictors import CountEvictor, Evictor
from tidemark.functions import AggregateFunction
from tidemark.outputs import OutputTag
from tidemark.panes import AccumulationMode
from tidemark.time import exact_int
from tidemark.triggers import AnyTrigger, CountTrigger, PurgingTrigger, Trigger
from tidemark.triggers.dataflow import DataflowTrigger
from tidemark.windows import AlignedLayout

__all__ = [
    "OperatorSpec",
    "validate_window_spec",
    "validate_window_function",
    "validate_accumulation_mode",
    "count_window_spec",
]


def validate_window_spec(
    assigner: Any,
    trigger: Any = None,
    evictor: Any = None,
    allowed_lateness_ms: Any = 0,
    late_data_tag: Any = None,
) -> None:
    """Reject a window pipeline Flink would reject, naming the parameter and the rule."""
    given = {"assigner": assigner, "trigger": trigger, "evictor": evictor}
    for parameter, value in {**given, "late_data_tag": late_data_tag}.items():
        refuse_class(parameter, value)
    if not isinstance(assigner, WindowAssigner):
        raise WindowSpecError(f"`assigner` must be a WindowAssigner; got {assigner!r}")
    if trigger is not None and not isinstance(trigger, (Trigger, DataflowTrigger)):
        raise WindowSpecError(
            f"`trigger` must be a Trigger (Flink's, e.g. tm.CountTrigger.of(2)) or a "
            f"DataflowTrigger (e.g. tm.AfterWatermark()); got {trigger!r}"
        )
    if evictor is not None and not isinstance(evictor, Evictor):
        raise WindowSpecError(f"`evictor` must be an Evictor; got {evictor!r}")
    if isinstance(assigner, MergingWindowAssigner) and trigger is not None:
        if not trigger.can_merge():
            raise WindowSpecError(
                f"`trigger` must support merging (can_merge() is True) with the merging "
                f"assigner {assigner!r}; got {trigger!r}"
            )
    if not isinstance(allowed_lateness_ms, int) or allowed_lateness_ms < 0:
        raise WindowSpecError(
            f"`allowed_lateness` must be >= 0; got allowed_lateness={allowed_lateness_ms}ms"
        )
    if late_data_tag is not None and not isinstance(late_data_tag, OutputTag):
        raise WindowSpecError(f"`late_data_tag` must be an OutputTag; got {late_data_tag!r}")


def validate_accumulation_mode(assigner: Any, trigger: Any, mode: Any) -> None:
    """Reject an accumulation mode without a Dataflow trigger, and a Dataflow trigger on
    windows of processing time (the Dataflow model's windows are in event time)."""
    if mode is not None and not isinstance(mode, AccumulationMode):
        raise WindowSpecError(
            "`accumulation_mode` must be an AccumulationMode (DISCARDING, ACCUMULATING or "
            f"RETRACTING); got {mode!r}"
        )
    dataflow = isinstance(trigger, DataflowTrigger)
    if mode is not None and not dataflow:
        raise WindowSpecError(
            f"`accumulation_mode` goes with a Dataflow trigger (AfterWatermark, AfterCount, "
            f"Repeatedly, ...); got accumulation_mode={mode.name} with trigger={trigger!r}: "
            "Flink's triggers choose FIRE or FIRE_AND_PURGE themselves (PurgingTrigger)"
        )
    if dataflow and isinstance(assigner, WindowAssigner) and not _event_time_or_global(assigner):
        raise WindowSpecError(
            f"`trigger` {trigger!r} is a Dataflow trigger, which serves event-time and "
            f"global windows; got the processing-time assigner {assigner!r}: use its "
            "event-time counterpart, or a Flink trigger"
        )


def _event_time_or_global(assigner: WindowAssigner) -> bool:
    return assigner.is_event_time() or isinstance(assigner, GlobalWindows)


def validate_window_function(assigner: WindowAssigner, logic: WindowLogic) -> None:
    """Reject a window function the assigner cannot use, in every mode alike.

    Merging (session) windows merge their accumulators, so an aggregate function needs
    ``merge``. Without this check a run fails only when two windows that both hold an
    accumulator merge, which depends on arrival order: a replay fails where BATCH, which
    feeds each key in timestamp order, does not.
    """
    aggregate = logic.aggregate
    if aggregate is None or not isinstance(assigner, MergingWindowAssigner):
        return
    merge = getattr(type(aggregate), "merge", None)
    if merge is None or merge is AggregateFunction.merge:
        raise WindowSpecError(
            f"`aggregate_function` must implement merge() with the merging assigner "
            f"{assigner!r}: sessions merge their accumulators; got "
            f"{type(aggregate).__name__} without merge: define merge(acc_a, acc_b)"
        )


@dataclass(frozen=True)
class OperatorSpec:
    """A window operator's configuration, validated when built, never changed after.

    Parameters
    ----------
    assigner : WindowAssigner
    logic : WindowLogic
        The window function with its state strategy.
    trigger : Trigger or DataflowTrigger, optional
        Defaults to the assigner's default trigger (``window_trigger`` is the one in
        effect; ``trigger_is_dataflow`` says which kind it is).
    evictor : Evictor, optional
        When set, windows keep all elements and the evictor runs on each firing.
    allowed_lateness_ms : int
        How long after a window's end its state is kept for late firings (event time).
    late_data_tag : OutputTag, optional
        Where late elements go; without it they are counted as dropped.
    batch_mode : bool
        The caller's promise of Flink BATCH input: each key's elements come in timestamp
        order and complete, under no watermark, and then the watermark jumps to +inf.
        The aligned operator then fires tumbling windows a key's later elements cannot
        reach as soon as they are complete, with the results, order and watermark (+inf)
        of firing at the key's end, and without timers.
    record_output_watermarks : bool
        Record the watermark at emission of every result in the operator's
        ``output_watermarks`` (replays place results in a chained stream with it).
    accumulation_mode : AccumulationMode, optional
        How a Dataflow trigger's panes relate; only with a Dataflow trigger, whose spec
        holds DISCARDING when none is given.
    pane_results : bool
        Emit each result of a Dataflow-triggered window as a ``PanedResult`` (the
        Spark modes turn its pane into columns).
    slice_incremental : bool
        Let sliding windows of a reduce or aggregate function be stored once per slice
        (the sliced operator; fast paths on). Off by default: it calls the aggregate's
        ``merge`` (or the reduce on partial results) where Flink does not, which can
        change floating-point sums in their last bits. Windows over all elements (a
        process function) are sliced whenever fast paths are on: that is exact.
    fast_paths : bool
        False serves every pipeline with the general operator (the switch that proves
        the fast paths agree with it; Spark conf ``spark.tidemark.fastPaths=false``).
    """

    assigner: WindowAssigner
    logic: WindowLogic
    trigger: AnyTrigger | None = None
    evictor: Evictor | None = None
    allowed_lateness_ms: int = 0
    late_data_tag: OutputTag | None = None
    batch_mode: bool = False
    record_output_watermarks: bool = False
    fast_paths: bool = True
    accumulation_mode: AccumulationMode | None = None
    pane_results: bool = False
    slice_incremental: bool = False
    window_trigger: AnyTrigger = field(init=False)  # ``trigger`` or the default
    is_event_time: bool = field(init=False)
    is_merging: bool = field(init=False)
    trigger_is_dataflow: bool = field(init=False)  # the kind: a Dataflow trigger, panes

    def __post_init__(self) -> None:
        validate_window_spec(
            self.assigner,
            self.trigger,
            self.evictor,
            self.allowed_lateness_ms,
            self.late_data_tag,
        )
        validate_window_function(self.assigner, self.logic)
        validate_accumulation_mode(self.assigner, self.trigger, self.accumulation_mode)
        trigger = self.trigger if self.trigger is not None else self.assigner.get_default_trigger()
        object.__setattr__(self, "window_trigger", trigger)
        object.__setattr__(self, "is_event_time", self.assigner.is_event_time())
        object.__setattr__(self, "is_merging", isinstance(self.assigner, MergingWindowAssigner))
        object.__setattr__(self, "trigger_is_dataflow", isinstance(trigger, DataflowTrigger))
        if self.trigger_is_dataflow and self.accumulation_mode is None:
            object.__setattr__(self, "accumulation_mode", AccumulationMode.DISCARDING)

    def with_run_options(
        self,
        *,
        batch_mode: bool,
        record_output_watermarks: bool,
        fast_paths: bool,
        slice_incremental: bool,
    ) -> OperatorSpec:
        """This spec with the options of a run (see the parameters): a copy, not
        validated again (no option makes a valid spec invalid)."""
        run = copy.copy(self)
        object.__setattr__(run, "batch_mode", batch_mode)
        object.__setattr__(run, "record_output_watermarks", record_output_watermarks)
        object.__setattr__(run, "fast_paths", fast_paths)
        object.__setattr__(run, "slice_incremental", slice_incremental)
        return run

    def aligned_layout(self) -> AlignedLayout | None:
        """The window layout the aligned operator serves this pipeline with, or None.

        It serves event-time windows of a fixed layout (tumbling, sliding) whose trigger
        fires only at the window end, without an evictor, while fast paths are on.
        """
        if not self.fast_paths or self.evictor is not None or not self.is_event_time:
            return None
        if not self.window_trigger.fires_only_at_window_end():
            return None
        return self.assigner.aligned_layout()


def count_window_spec(size: int, slide: int | None) -> dict[str, Any]:
    """The window of Flink's ``countWindow(size[, slide])``, as :class:`OperatorSpec`
    keywords: GlobalWindows with PurgingTrigger(CountTrigger(size)), or with
    CountTrigger(slide) and CountEvictor(size).

    Raises
    ------
    WindowSpecError
        ``size`` or ``slide`` is not an int >= 1.
    """
    whole_size = exact_int(size)
    if whole_size is None or whole_size < 1:
        raise WindowSpecError(f"`size` must be an int >= 1; got size={size!r}")
    windows = GlobalWindows.create()
    if slide is None:
        return {"assigner": windows, "trigger": PurgingTrigger.of(CountTrigger.of(whole_size))}
    whole_slide = exact_int(slide)
    if whole_slide is None or whole_slide < 1:
        raise WindowSpecError(f"`slide` must be an int >= 1; got slide={slide!r}")
    return {
        "assigner": windows,
        "trigger": CountTrigger.of(whole_slide),
        "evictor": CountEvictor.of(whole_size),
    }
