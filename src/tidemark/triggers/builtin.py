"""Flink 1.20's built-in triggers, with Flink's behaviour (including Java's ``%`` in the
continuous triggers' alignment), and what each declares it needs.

The guide: ``docs/concepts/triggers.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.state import ReducingStateDescriptor, ValueStateDescriptor
from tidemark.time import LONG_MAX, TimeDomain, TimeLike, exact_int, java_mod, to_millis
from tidemark.triggers.base import (
    _EVENT_TIME,
    _NO_DOMAIN,
    _PROCESSING_TIME,
    OnMergeContext,
    Trigger,
    TriggerContext,
    TriggerResult,
)
from tidemark.triggers.dataflow import DataflowTrigger
from tidemark.windows import Window

__all__ = [
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "DeltaTrigger",
    "NeverTrigger",
    "EndOfStreamTrigger",
    "is_plain_processing_time_trigger",
]


def _overrides_any(obj: object, base: type, names: tuple[str, ...]) -> bool:
    """Whether ``type(obj)`` replaces any of ``base``'s methods ``names``."""
    return any(getattr(type(obj), name) is not getattr(base, name) for name in names)


_CALLBACKS = (
    "on_element",
    "on_event_time",
    "on_processing_time",
    "on_merge",
    "clear",
    "timer_domains",
)


class EventTimeTrigger(Trigger[Window]):
    """Fires once the watermark passes the window's end (``max_timestamp``).

    An element for a window whose end the watermark already passed (a late element within
    the allowed lateness) fires the window at once.

    A subclass keeps the fast paths (which never call the trigger) as long as it
    overrides none of the callbacks; one that overrides a callback is called as any
    trigger is (:meth:`fires_only_at_window_end` is then False).
    """

    @classmethod
    def create(cls) -> EventTimeTrigger:
        return cls()

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return fires_at_end(time, window)

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        # Only while the watermark is before the end: otherwise on_element fires at once,
        # and a timer as well would fire the window twice.
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _EVENT_TIME

    def fires_only_at_window_end(self) -> bool:
        return not _overrides_any(self, EventTimeTrigger, _CALLBACKS)


def fires_at_end(time: int, window: Window) -> TriggerResult:
    """:meth:`EventTimeTrigger.on_event_time`: FIRE when ``time`` is ``window``'s end.
    The one home of event-time firing, shared by the engine's aligned fast path."""
    return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE


class ProcessingTimeTrigger(Trigger[Window]):
    """Fires when processing time reaches the window's ``max_timestamp``."""

    @classmethod
    def create(cls) -> ProcessingTimeTrigger:
        return cls()

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _PROCESSING_TIME


def is_plain_processing_time_trigger(trigger: object) -> bool:
    """Whether ``trigger`` is a :class:`ProcessingTimeTrigger` that overrides none of its
    callbacks: the engine's processing-time runs operator serves it without calling it."""
    return isinstance(trigger, ProcessingTimeTrigger) and not _overrides_any(
        trigger, ProcessingTimeTrigger, _CALLBACKS
    )


def _sum(a: int, b: int) -> int:
    return a + b


class CountTrigger(Trigger[Window]):
    """Fires when a window has received ``count`` elements since it last fired.

    >>> CountTrigger.of(0)
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `count` must be an int >= 1; got count=0
    """

    def __init__(self, count: int):
        whole = exact_int(count)
        if whole is None or whole < 1:
            raise WindowSpecError(f"`count` must be an int >= 1; got count={count!r}")
        self.count = whole
        self._state = ReducingStateDescriptor("count", _sum)

    @classmethod
    def of(cls, count: int) -> CountTrigger:
        return cls(count)

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        count = ctx.get_partitioned_state(self._state)
        count.add(1)
        if count.get() >= self.count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self._state)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.get_partitioned_state(self._state).clear()

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _NO_DOMAIN

    def __repr__(self) -> str:
        return f"CountTrigger({self.count})"


def _purging(result: TriggerResult) -> TriggerResult:
    return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result


class PurgingTrigger(Trigger[Window]):
    """Wraps a trigger and turns each of its FIRE into FIRE_AND_PURGE."""

    def __init__(self, nested: Trigger[Any]):
        if isinstance(nested, DataflowTrigger):
            raise nested.not_nestable()
        if not isinstance(nested, Trigger):
            raise WindowSpecError(f"`nested` must be a Trigger; got {nested!r}")
        self.nested = nested

    @classmethod
    def of(cls, nested: Trigger[Any]) -> PurgingTrigger:
        return cls(nested)

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        return _purging(self.nested.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested.can_merge()

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        self.nested.on_merge(window, ctx)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        self.nested.clear(window, ctx)

    def timer_domains(self) -> frozenset[TimeDomain]:
        return self.nested.timer_domains()

    def declares_timer_domains(self) -> bool:
        return self.nested.declares_timer_domains()

    def fires_only_at_window_end(self) -> bool:
        # Not delegated: its firings purge, which the fast paths (whose firings keep the
        # contents for late firings) do not do.
        return False

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested!r})"


def _never_ending(window: Window, clock: int) -> bool:
    """A window without end (a GlobalWindow) at the end of time (``Long.MAX_VALUE``)."""
    return clock == LONG_MAX and window.max_timestamp() == LONG_MAX


def _min(a: int, b: int) -> int:
    return a if a <= b else b


def _positive_interval(interval: TimeLike) -> int:
    interval_ms = to_millis(interval, "interval")
    if interval_ms <= 0:
        raise WindowSpecError(f"`interval` must be > 0; got interval={interval_ms}ms")
    return interval_ms


class _Continuous(Trigger[Window]):
    """What the continuous triggers share: a ``fire-time`` state (the next periodic
    firing, min-merged), timers in one time domain, and Flink's clamp to the window end.

    Subclasses say which clock is theirs (:meth:`_register`, :meth:`_delete`).
    """

    def __init__(self, interval: TimeLike):
        self.interval_ms = _positive_interval(interval)
        self._state = ReducingStateDescriptor("fire-time", _min)

    @classmethod
    def of(cls, interval: TimeLike) -> Any:
        return cls(interval)

    def _register(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _delete(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _first(self, time: int, window: Window, ctx: TriggerContext) -> None:
        """Arm the first periodic firing, aligned with Java's ``%`` as Flink does."""
        fire_time: Any = ctx.get_partitioned_state(self._state)
        if fire_time.get() is None:
            self._register_next(time - java_mod(time, self.interval_ms), window, ctx, fire_time)

    def _register_next(self, time: int, window: Window, ctx: TriggerContext, state: Any) -> None:
        next_fire = min(time + self.interval_ms, window.max_timestamp())
        state.add(next_fire)
        self._register(ctx, next_fire)

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self._state)
        next_fire = ctx.get_partitioned_state(self._state).get()
        if next_fire is not None:
            self._register(ctx, next_fire)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        fire_time = ctx.get_partitioned_state(self._state)
        if fire_time.get() is not None:
            self._delete(ctx, fire_time.get())
            fire_time.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.interval_ms}ms)"


class ContinuousEventTimeTrigger(_Continuous):
    """Fires every ``interval`` of event time (aligned to the interval) and at the window end."""

    def _register(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_event_time_timer(time)

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _EVENT_TIME

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        if timestamp is None:
            raise TypeError(f"{self!r} needs element timestamps; got an element without one")
        self._first(timestamp, window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        fire_time = ctx.get_partitioned_state(self._state)
        if fire_time.get() == time:
            fire_time.clear()
            if _never_ending(window, ctx.get_current_watermark()):
                # Beyond Flink, which never returns here: at the end of input a window
                # that never ends would fire every interval up to Long.MAX_VALUE, all
                # with the same contents. Its end-of-window timer fires it once instead.
                return TriggerResult.CONTINUE
            self._register_next(time, window, ctx, fire_time)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_Continuous):
    """Fires every ``interval`` of processing time, aligned to the interval."""

    def _register(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _PROCESSING_TIME

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        self._first(ctx.get_current_processing_time(), window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self._state)
        if fire_time.get() == time:
            fire_time.clear()
            if not _never_ending(window, ctx.get_current_processing_time()):
                self._register_next(time, window, ctx, fire_time)
            # else: the clock was moved to the end of time (a BATCH run's end): one last
            # firing instead of one every interval up to Long.MAX_VALUE.
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE


class DeltaTrigger(Trigger[Window]):
    """Fires when ``delta(last_fired_element, element) > threshold``.

    The first element of a window is remembered and does not fire; afterwards the
    remembered element is replaced only when the trigger fires, as in Flink.
    ``delta_function`` is a callable ``(old, new) -> float`` or has ``get_delta``.
    """

    def __init__(self, threshold: float, delta_function: Any):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise WindowSpecError(f"`threshold` must be a number; got threshold={threshold!r}")
        self.threshold = threshold
        self.delta: Callable[[Any, Any], float] = getattr(
            delta_function, "get_delta", delta_function
        )
        if not callable(self.delta):
            raise WindowSpecError(
                f"`delta_function` must be callable (old, new) -> float; got {delta_function!r}"
            )
        self._state = ValueStateDescriptor("last-element")

    @classmethod
    def of(cls, threshold: float, delta_function: Any) -> DeltaTrigger:
        return cls(threshold, delta_function)

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        last = ctx.get_partitioned_state(self._state)
        if last.value() is None:
            last.update(element)
            return TriggerResult.CONTINUE
        if self.delta(last.value(), element) > self.threshold:
            last.update(element)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.get_partitioned_state(self._state).clear()

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _NO_DOMAIN

    def __repr__(self) -> str:
        return f"DeltaTrigger({self.threshold})"


class NeverTrigger(Trigger[Window]):
    """The default trigger of :class:`~tidemark.assigners.GlobalWindows`: never fires."""

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        pass

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        pass

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _NO_DOMAIN


class EndOfStreamTrigger(Trigger[Window]):
    """Fires a global window once, when the input ends (the final watermark arrives)."""

    def on_element(
        self, element: Any, timestamp: int | None, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        pass

    def timer_domains(self) -> frozenset[TimeDomain]:
        return _EVENT_TIME
