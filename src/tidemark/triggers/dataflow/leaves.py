"""The Dataflow triggers made of no other: :class:`DefaultTrigger`, :class:`AfterCount`,
:class:`AfterProcessingTime`. The package's guide: :mod:`tidemark.triggers.dataflow`.
"""

from __future__ import annotations

from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.time import TimeDomain, TimeLike, exact_int, to_millis
from tidemark.triggers.dataflow.base import (
    EVENT_TIME,
    EVENT_TIME_ONLY,
    PROCESSING_TIME,
    DataflowTrigger,
    PaneTriggerContext,
    StateTag,
    window_end,
)
from tidemark.windows import Window

__all__ = ["DefaultTrigger", "AfterCount", "AfterProcessingTime"]


class DefaultTrigger(DataflowTrigger):
    """Fires when the watermark passes the window's end, and again for every late
    element; never finishes (Beam's default; ``Repeatedly(AfterWatermark())``)."""

    def _timer(self, window: Window) -> str:
        return repr(window)

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.set_timer(self._timer(window), EVENT_TIME, window_end(window))

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        for window in to_be_merged:
            ctx.clear_timer(self._timer(window), EVENT_TIME)

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        passed = watermark >= window_end(window)
        if passed:
            ctx.clear_timer(self._timer(window), EVENT_TIME)
        return passed

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        return False

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.clear_timer(self._timer(window), EVENT_TIME)

    def has_on_time_pane(self) -> bool:
        return True

    def own_timer_domains(self) -> frozenset[TimeDomain]:
        return EVENT_TIME_ONLY


class AfterCount(DataflowTrigger):
    """Fires once the window's pane holds ``count`` elements, and finishes.

    >>> AfterCount(0)
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `count` must be an int >= 1; got count=0
    """

    COUNT = StateTag("count", "sum")

    def __init__(self, count: int):
        whole = exact_int(count)
        if whole is None or whole < 1:
            raise WindowSpecError(f"`count` must be an int >= 1; got count={count!r}")
        self.count = whole

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.add_state(self.COUNT, 1)

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        pass  # the merged windows' counts add up

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        return bool(ctx.get_state(self.COUNT) >= self.count)

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        return True

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.clear_state(self.COUNT)

    def __repr__(self) -> str:
        return f"AfterCount({self.count})"


class AfterProcessingTime(DataflowTrigger):
    """Fires ``delay`` after the pane's first element, on the processing-time clock,
    and finishes.

    ``delay`` is a duration (int ms, ``Duration`` or ``timedelta``; Beam Python counts
    seconds). As Beam Java: the trigger fires once the clock reaches the time, whether
    its own timer or another asks (Beam's Python driver fires it on any
    processing-time timer), and merged windows keep the earliest time.
    """

    FIRE_AT = StateTag("fire_at", "min")

    def __init__(self, delay: TimeLike = 0):
        self.delay_ms = to_millis(delay, "delay")
        if self.delay_ms < 0:
            raise WindowSpecError(f"`delay` must be >= 0; got delay={self.delay_ms}ms")

    def on_element_added(self, element: Any, window: Window, ctx: PaneTriggerContext) -> None:
        if ctx.get_state(self.FIRE_AT) is None:
            fire_at = ctx.get_current_processing_time() + self.delay_ms
            ctx.add_state(self.FIRE_AT, fire_at)
            ctx.set_timer("", PROCESSING_TIME, fire_at)

    def on_windows_merged(
        self, to_be_merged: list[Window], merge_result: Window, ctx: PaneTriggerContext
    ) -> None:
        fire_at = ctx.get_state(self.FIRE_AT)
        if fire_at is not None:
            ctx.set_timer("", PROCESSING_TIME, fire_at)

    def should_fire(
        self, domain: TimeDomain, watermark: int, window: Window, ctx: PaneTriggerContext
    ) -> bool:
        fire_at = ctx.get_state(self.FIRE_AT)
        return fire_at is not None and ctx.get_current_processing_time() >= fire_at

    def on_fire(self, watermark: int, window: Window, ctx: PaneTriggerContext) -> bool:
        return True

    def reset(self, window: Window, ctx: PaneTriggerContext) -> None:
        ctx.clear_state(self.FIRE_AT)
        ctx.clear_timer("", PROCESSING_TIME)

    def own_timer_domains(self) -> frozenset[TimeDomain]:
        return frozenset((PROCESSING_TIME,))

    def __repr__(self) -> str:
        return f"AfterProcessingTime({self.delay_ms})"
