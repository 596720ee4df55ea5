"""What a window pipeline may be, checked when it is defined; and which pipelines the
operator's inlined per-element path serves."""

from __future__ import annotations

from typing import Any

from tidemark.assigners import (
    MergingWindowAssigner,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowAssigner,
)
from tidemark.errors import WindowSpecError
from tidemark.evictors import Evictor
from tidemark.outputs import OutputTag
from tidemark.triggers import EventTimeTrigger, Trigger

__all__ = ["validate_window_spec", "aligned_event_time_windows"]


def validate_window_spec(
    assigner: Any, trigger: Any, evictor: Any, allowed_lateness_ms: Any, late_data_tag: Any
) -> None:
    """Reject a window pipeline Flink would reject, naming the parameter and the rule."""
    if not isinstance(assigner, WindowAssigner):
        raise WindowSpecError(f"`assigner` must be a WindowAssigner; got {assigner!r}")
    if trigger is not None and not isinstance(trigger, Trigger):
        raise WindowSpecError(f"`trigger` must be a Trigger; got {trigger!r}")
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


def aligned_event_time_windows(
    assigner: Any, trigger: Any, evictor: Any
) -> tuple[int, int, int] | None:
    """``(size, slide, offset)`` when the inlined per-element path applies, else None."""
    if evictor is not None or type(trigger) is not EventTimeTrigger:
        return None
    if type(assigner) is TumblingEventTimeWindows:
        return assigner.size_ms, assigner.size_ms, assigner.offset_ms
    if type(assigner) is SlidingEventTimeWindows:
        return assigner.size_ms, assigner.slide_ms, assigner.offset_ms
    return None


