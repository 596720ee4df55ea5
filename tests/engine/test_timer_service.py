"""``TimerService`` alone: one time domain's timers for every key, and its clock.

The window operator has one per time domain (as Flink's ``InternalTimerServiceImpl``);
the operator-level behaviour is pinned by the transcripts and the property tests, the
held timers by ``transcripts/timer_registered_in_the_past.yaml``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tidemark._engine.keystate import KeyState
from tidemark._engine.timers import TimerService
from tidemark.time import LONG_MIN, TimeDomain
from tidemark.windows import TimeWindow, Window

W = TimeWindow(0, 10)


class Target:
    """Records what fired (domain, key, time, window, the clock then) and runs a
    per-call action, as a trigger registering timers in its callback does."""

    def __init__(self) -> None:
        self.fired: list[tuple[Any, ...]] = []
        self.service: TimerService | None = None
        self.action: Any = None

    def __call__(self, domain: TimeDomain, key: Any, time: int, window: Window) -> None:
        assert self.service is not None
        self.fired.append((domain, key, time, window, self.service.current_time))
        if self.action is not None:
            self.action(key, time, window)


def make(domain: TimeDomain = TimeDomain.EVENT_TIME, *keys: str) -> tuple[Any, ...]:
    states = {key: KeyState() for key in keys or ("a",)}
    target = Target()
    service = TimerService(domain, states, target, LONG_MIN)
    target.service = service
    return service, states, target


def fired_times(target: Target) -> list[tuple[Any, int]]:
    return [(key, time) for _, key, time, _, _ in target.fired]


@pytest.mark.parametrize(
    ("domain", "attribute", "other"),
    [
        pytest.param(TimeDomain.EVENT_TIME, "event_timers", "processing_timers", id="event"),
        pytest.param(
            TimeDomain.PROCESSING_TIME, "processing_timers", "event_timers", id="processing"
        ),
    ],
)
def test_a_service_keeps_its_domain_s_timers_in_the_key_state(
    domain: TimeDomain, attribute: str, other: str
) -> None:
    service, keys, target = make(domain)
    ks = keys["a"]
    service.register("a", ks, 9, W)
    service.register("a", ks, 9, W)
    assert getattr(ks, attribute) == {(9, W): 1} and getattr(ks, other) == {}
    assert service.count() == 1
    service.advance(9)
    assert target.fired == [(domain, "a", 9, W, 9)] and getattr(ks, attribute) == {}


def test_timers_fire_in_time_then_registration_order_across_keys() -> None:
    service, keys, target = make(TimeDomain.EVENT_TIME, "a", "b")
    service.register("b", keys["b"], 5, W)
    service.register("a", keys["a"], 9, W)
    service.register("a", keys["a"], 5, W)
    service.advance(4)
    assert target.fired == []
    service.advance(9)
    assert fired_times(target) == [("b", 5), ("a", 5), ("a", 9)]
    # the clock is the advance's time, whichever timer fires
    assert [clock for *_, clock in target.fired] == [9, 9, 9]


def test_a_deleted_timer_or_a_forgotten_key_fires_nothing() -> None:
    service, keys, target = make(TimeDomain.EVENT_TIME, "a", "b")
    service.register("a", keys["a"], 5, W)
    service.register("b", keys["b"], 6, W)
    service.delete(keys["a"], 5, W)
    service.delete(keys["a"], 7, W)  # never registered: ignored
    del keys["b"]
    service.advance(10)
    assert target.fired == [] and service.count() == 0


def test_a_timer_a_callback_registers_later_but_within_the_advance_fires_in_it() -> None:
    """Flink's catch-up: 5 registers 8, which the advance to 10 reaches."""
    service, keys, target = make()
    target.action = lambda key, time, window: (
        time == 5 and service.register(key, keys[key], 8, window)
    )
    service.register("a", keys["a"], 5, W)
    service.advance(10)
    assert fired_times(target) == [("a", 5), ("a", 8)]


def test_a_timer_a_callback_registers_at_or_before_the_firing_time_is_held() -> None:
    """It waits for the next advance that moves the clock forward, once per advance."""
    service, keys, target = make()
    target.action = lambda key, time, window: service.register(key, keys[key], 5, window)
    service.register("a", keys["a"], 5, W)
    service.advance(10)
    assert fired_times(target) == [("a", 5)] and service.queue.has_held()
    service.advance(10)  # the clock does not move: still held
    assert fired_times(target) == [("a", 5)]
    service.advance(11)
    service.advance(12)
    assert fired_times(target) == [("a", 5)] * 3 and service.count() == 1


def test_fire_due_sets_the_clock_and_leaves_held_timers_held() -> None:
    service, keys, target = make()
    target.action = lambda key, time, window: service.register(key, keys[key], 5, window)
    service.register("a", keys["a"], 5, W)
    service.fire_due(6)
    service.fire_due(7)
    assert fired_times(target) == [("a", 5)] and service.current_time == 7
    service.begin_advance(7)  # not forward: still held
    assert service.queue.has_held()
    service.begin_advance(8)
    assert not service.queue.has_held() and service.current_time == 7


def test_reset_sets_the_clock_without_firing_and_releases_held_timers() -> None:
    service, keys, target = make()
    target.action = lambda key, time, window: service.register(key, keys[key], 5, window)
    service.register("a", keys["a"], 5, W)
    service.advance(10)
    service.reset(3)
    assert service.current_time == 3 and not service.queue.has_held()
    assert fired_times(target) == [("a", 5)]


def test_restored_timers_keep_their_order_among_equal_times() -> None:
    """A key's timers are queued with their registration numbers, so equal-time timers
    of several restored keys fire in the order they were first registered."""
    service, keys, _ = make(TimeDomain.EVENT_TIME, "a", "b")
    service.register("b", keys["b"], 5, W)
    service.register("a", keys["a"], 5, W)
    restored, restored_keys, target = make(TimeDomain.EVENT_TIME)
    del restored_keys["a"]
    for key in ("a", "b"):  # restored in another order
        restored_keys[key] = keys[key]
        restored.restore(key, keys[key])
    restored.advance(5)
    assert fired_times(target) == [("b", 5), ("a", 5)]
    service.clear()
    assert service.queue.peek_time() is None
