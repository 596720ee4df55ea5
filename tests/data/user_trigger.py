"""A user's trigger, as the docs suggest writing one: type-checked by mypy --strict in
tests/test_declarations.py, with no ignore comment."""

from __future__ import annotations

from typing import Any

from tidemark import (
    OnMergeContext,
    ReducingStateDescriptor,
    TimeDomain,
    TimeWindow,
    Trigger,
    TriggerContext,
    TriggerResult,
)


def _add(a: int, b: int) -> int:
    return a + b


class EveryNthOrAtEnd(Trigger[TimeWindow]):
    """Fires every ``n`` elements, and once when the watermark passes the window end."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = ReducingStateDescriptor("count", _add)

    def on_element(
        self, element: Any, timestamp: int | None, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        count = ctx.get_partitioned_state(self.count)
        count.add(1)
        if (count.get() or 0) >= self.n:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: TimeWindow, ctx: TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.count)
        ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())
        ctx.get_partitioned_state(self.count).clear()

    def timer_domains(self) -> frozenset[TimeDomain]:
        return frozenset({TimeDomain.EVENT_TIME})
