"""What an open window waits for, read from the key's state after the replay.

A window that holds elements no result saw waits for its trigger. Which clock or
count can fire it depends on the trigger (a tree for composites: ``PurgingTrigger``,
``Repeatedly``, ``AfterWatermark(early=..., late=...)``, ``AfterAny``...), classified
here by kind; when it will fire depends on the state: the window's registered
timers (``KeyState.event_timers`` / ``processing_timers``) and its trigger's count
(``CountTrigger``'s ``count`` state, a Dataflow ``AfterCount``'s in the pane record).
Each becomes a :class:`~tidemark.explain.facts.WaitFact`, the most telling first.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidemark._engine.keystate import KeyState
from tidemark.explain.events import PartitionState
from tidemark.explain.facts import WaitFact
from tidemark.explain.timefmt import TimeText
from tidemark.time import LONG_MAX
from tidemark.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
)
from tidemark.triggers.builtin import EndOfStreamTrigger
from tidemark.triggers.dataflow import DataflowTrigger
from tidemark.triggers.dataflow.leaves import AfterCount, AfterProcessingTime
from tidemark.windows import Window

__all__ = ["trigger_kinds", "count_of", "WaitContext", "window_waits", "holder_text"]

_EVENT = (EventTimeTrigger, ContinuousEventTimeTrigger, EndOfStreamTrigger)
_PROCESSING = (ProcessingTimeTrigger, ContinuousProcessingTimeTrigger, AfterProcessingTime)


def _children(trigger: Any) -> tuple[Any, ...]:
    if isinstance(trigger, PurgingTrigger):
        return (trigger.nested,)
    if isinstance(trigger, DataflowTrigger):
        return tuple(trigger.children())
    return ()


def trigger_kinds(trigger: Any) -> frozenset[str]:
    """What can fire a window under ``trigger``: ``event`` (the watermark), ``processing``
    (the clock), ``count``, ``element`` (a rule on elements), ``never``, ``custom`` (a
    user's trigger: any of its timers, or an element)."""
    children = _children(trigger)
    if children:
        kinds = frozenset().union(*(trigger_kinds(c) for c in children))
        if isinstance(trigger, DataflowTrigger) and type(trigger).__name__ == "AfterWatermark":
            kinds |= {"event"}
        return kinds
    if isinstance(trigger, _EVENT):
        return frozenset({"event"})
    if isinstance(trigger, _PROCESSING):
        return frozenset({"processing"})
    if isinstance(trigger, (CountTrigger, AfterCount)):
        return frozenset({"count"})
    if isinstance(trigger, DeltaTrigger):
        return frozenset({"element"})
    if isinstance(trigger, NeverTrigger):
        return frozenset({"never"})
    if isinstance(trigger, DataflowTrigger):  # AfterWatermark without early/late, Default
        return frozenset({"event"})
    return frozenset({"custom"})


def count_of(trigger: Any) -> int | None:
    """The count of the first count trigger in ``trigger``'s tree (None: none)."""
    if isinstance(trigger, (CountTrigger, AfterCount)):
        return trigger.count
    for child in _children(trigger):
        found = count_of(child)
        if found is not None:
            return found
    return None


def _count_so_far(ks: KeyState, window: Window, dataflow: bool) -> int:
    store = ks.trigger_state.get(window) or {}
    if not dataflow:
        return int(store.get("count") or 0)
    panes = store.get("panes")
    state = getattr(panes, "state", {}) or {}
    counts = [value for name, (_, value) in state.items() if name.endswith("count")]
    return int(counts[0]) if counts else 0


@dataclass(frozen=True)
class WaitContext:
    """What a wait is judged against: the clocks and input at the end of the events."""

    watermark: int
    processing_time: int
    ended: bool
    max_event_time: int | None
    holder: PartitionState | None
    idleness: bool | None
    times: TimeText


def window_waits(
    trigger: Any,
    ks: KeyState | None,
    window: Window,
    cleanup: int | None,
    ctx: WaitContext,
    timers: tuple[Sequence[int], Sequence[int]],
) -> tuple[WaitFact, ...]:
    """What an open ``window`` waits for, the most telling first; ``timers`` are its
    registered event-time and processing-time timers."""
    kinds = trigger_kinds(trigger)
    waits: list[WaitFact] = []
    event, processing = timers
    if event and kinds & {"event", "custom"}:
        waits.append(_event_wait(min(event), ctx))
    if processing and kinds & {"processing", "custom"}:
        waits.append(_processing_wait(min(processing), ctx))
    if "count" in kinds and ks is not None:
        waits.append(_count_wait(trigger, ks, window, cleanup, ctx))
    if kinds & {"element", "custom"} and not waits:
        waits.append(WaitFact("element", f"an element that makes {trigger!r} fire"))
    if kinds == {"never"}:
        waits.append(
            WaitFact(
                "no_trigger",
                f"nothing: its trigger {trigger!r} never fires (the default of GlobalWindows); "
                "give the window a trigger (CountTrigger.of(n), EndOfStreamTrigger(), ...)",
            )
        )
    return tuple(waits)


def _event_wait(timer: int, ctx: WaitContext) -> WaitFact:
    t = ctx.times
    common: dict[str, Any] = dict(
        timer=timer,
        watermark=ctx.watermark,
        max_event_time=ctx.max_event_time,
        holder=ctx.holder,
        idleness=ctx.idleness,
    )
    if timer == LONG_MAX:
        return WaitFact(
            "input_not_ended", "the end of input (only the final watermark reaches it)", **common
        )
    gap = timer - ctx.watermark
    beyond = ctx.max_event_time is not None and ctx.max_event_time > timer
    detail = (
        f"the watermark to reach {t.at(timer)} (it is at {t.at(ctx.watermark)}, "
        f"{t.span(gap)} short)"
    )
    if not ctx.ended and not beyond:
        seen = "none" if ctx.max_event_time is None else t.at(ctx.max_event_time)
        detail += (
            f"; no input has reached past it yet (latest event time: {seen}): later data "
            "or the end of input will fire it"
        )
        return WaitFact("input_not_ended", detail, gap=gap, **common)
    if ctx.holder is not None:
        detail += f"; partition {ctx.holder.partition!r} holds the watermark back"
    return WaitFact("event_time_timer", detail, gap=gap, **common)


def holder_text(
    holder: PartitionState,
    idleness: bool | None,
    t: TimeText,
    partitions: Sequence[PartitionState] = (),
) -> str:
    """Which partition sets the watermark (the lowest not idle), and why, in words."""
    seen = (
        "has seen no data"
        if holder.max_event_time is None
        else f"last saw event time {t.at(holder.max_event_time)}"
    )
    batch = "" if holder.last_batch is None else f" (in micro-batch {holder.last_batch})"
    idle = {
        None: "",
        True: "; idleness is on, yet it is not idle",
        False: "; idleness is off, so it holds the watermark however long it is silent",
    }[idleness]
    idle_ones = [repr(p.partition) for p in partitions if p.idle]
    left_out = (
        f"; partition(s) {', '.join(idle_ones)} idle, left out of the minimum" if idle_ones else ""
    )
    return (
        f"partition {holder.partition!r} sets the watermark at {t.at(holder.watermark)}, the "
        f"lowest of the partitions not idle: it {seen}{batch}{idle}{left_out}"
    )


def _processing_wait(timer: int, ctx: WaitContext) -> WaitFact:
    t = ctx.times
    return WaitFact(
        "processing_time_timer",
        f"the processing-time clock to reach {t.at(timer)} (it is at {t.at(ctx.processing_time)})",
        timer=timer,
        gap=timer - ctx.processing_time,
    )


def _count_wait(
    trigger: Any, ks: KeyState, window: Window, cleanup: int | None, ctx: WaitContext
) -> WaitFact:
    n = count_of(trigger)
    k = _count_so_far(ks, window, isinstance(trigger, DataflowTrigger))
    detail = f"{(n or 0) - k} more element(s): its count is {k} of {n}"
    if cleanup is not None and cleanup != LONG_MAX:
        detail += (
            f"; its state is cleared at {ctx.times.at(cleanup)} whether or not the count is reached"
        )
    return WaitFact("count", detail, count=k, count_of=n)
