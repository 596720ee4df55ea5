"""Advancing an operator's clocks as a recorded stream's clocks advanced: a replay's own
stepping, outside the general operator (which holds only Flink's semantics: each
:meth:`~tidemark._engine.contract.OperatorHandle.process_watermark` or
:meth:`~tidemark._engine.contract.OperatorHandle.advance_processing_time` is one advance).

A replay runs each key alone, so an operator does not see every watermark and arrival
time of the stream, only the last one before each of its key's elements. These helpers
advance it through the ones its timers need, given ``resolve(t)``: the first watermark
(or arrival time) of the stream that is ``>= t``. Every due timer then fires at the
watermark that first reached it in the stream, and a held timer (registered by a timer
callback at or before the time being fired, see :mod:`tidemark._engine.timers`) at each
later watermark or arrival time the stream had, as the operator fed all of them fires it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from tidemark._engine.timers import TimerService

__all__ = ["advance_watermark_stepwise", "advance_processing_time_stepwise"]


def advance_watermark_stepwise(op: Any, watermark: int, resolve: Callable[[int], int]) -> None:
    """Advance ``op``'s event time to ``watermark`` through the watermarks a recorded
    stream really had (each step one :meth:`process_watermark`)."""
    _stepwise(op.event_time_timers, watermark, resolve, op.process_watermark)


def advance_processing_time_stepwise(
    op: Any, time: int, resolve: Callable[[int], int] | None = None
) -> None:
    """Advance ``op``'s clock to ``time``, firing each due timer at its own time.

    ``resolve(t)`` is the first time ``>= t`` at which a recorded stream's clock advanced
    (a replay's arrival times): each is an advance. Without ``resolve`` the call is one
    advance; it fires the timers :meth:`advance_processing_time` fires, but with the
    clock stopped at each due timer's time.
    """
    timers = op.processing_time_timers
    advance = partial(_advance_stopping_at_timers, timers)
    if resolve is None:
        advance(max(time, timers.current_time))
    else:
        _stepwise(timers, time, resolve, advance)


def _stepwise(
    timers: TimerService,
    target: int,
    resolve: Callable[[int], int],
    advance: Callable[[int], None],
) -> None:
    """``advance`` to the stream's time of each next due timer up to ``target``, then to
    ``target``."""
    while True:
        due = _next_due(timers)
        if due is None or due > target:
            break
        step = min(max(resolve(due), due), target)
        advance(max(step, timers.current_time))
    advance(max(target, timers.current_time))


def _next_due(timers: TimerService) -> int | None:
    """The earliest time a timer may be due: the queue's first (perhaps a deleted one),
    or, while a timer is held, the clock's next instant (its next advance)."""
    due = timers.queue.peek_time()
    if timers.queue.has_held():
        step_up = timers.current_time + 1
        if due is None or due > step_up:
            due = step_up
    return due


def _advance_stopping_at_timers(timers: TimerService, time: int) -> None:
    """One advance to ``time``, the clock stopping at each due timer's time: the same
    timers fire as one :meth:`TimerService.advance` fires; one held during it waits for
    the next advance."""
    timers.begin_advance(time)
    while True:
        due = timers.queue.peek_time()
        if due is None or due > time:
            break
        timers.fire_due(max(due, timers.current_time))
    timers.fire_due(time)
