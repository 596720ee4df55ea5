"""Run tidemark trigger scenarios through Apache Beam's own Python trigger driver.

Usage: tools/beamref/.venv/bin/python tools/beamref/run_beam.py SCENARIOS.json OUT.json

Each scenario (format: SCENARIO.md) runs through ``GeneralTriggerDriver`` with an
``InMemoryUnmergedState`` per key, fed as Beam's ``TriggerDriverTranscriptTest`` feeds
it: one element per bundle, ``process_elements(state, [wv], W_b, W_b)``, then every due
timer fired with ``get_and_clear_timers(W_b)`` until none is due, also after each
watermark step; at the end the final watermark. The shims that make the output state
tidemark's (Flink's) conventions are described in README.md: watermark ``W_b = W_f + 1``,
Flink's lateness rule checked here (Beam gets a lateness it never reaches), touching
sessions merge, expiry fires a final pane of unemitted elements, elements reaching only
closed or expired windows are counted or listed as late.

Output: ``{name: {"panes": [...], "dropped": n, "late": [...]}}`` or ``{name: {"error": ...}}``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from apache_beam.transforms import trigger as bt
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.trigger import (
    AccumulationMode,
    GeneralTriggerDriver,
    InMemoryUnmergedState,
    MergeableStateAdapter,
)
from apache_beam.transforms.window import (
    FixedWindows,
    GlobalWindow,
    GlobalWindows,
    IntervalWindow,
    Sessions,
    SlidingWindows,
    TimestampCombiner,
    WindowFn,
)
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP, Duration, Timestamp
from apache_beam.utils.windowed_value import PaneInfoTiming, WindowedValue

LONG_MAX = 2**63 - 1
# Beam's own drop check (`W_b > window.end + allowed_lateness`) must never fire: the shim
# applies Flink's rule itself. 10**13 s is beyond MAX_TIMESTAMP from any window end.
NEVER_LATE = Duration(seconds=10**13)
# A tidemark watermark at or beyond this is the end of input (Beam's MAX_TIMESTAMP).
END_OF_INPUT = 2**62

__all__ = ["run_scenario", "main"]


class TouchingSessions(Sessions):
    """Beam's Sessions, merging touching windows too (``[0, 6)`` + ``[6, 9)``), as Flink."""

    def __init__(self, gap: int):
        super().__init__(gap)
        self.merges: list[tuple[list[Any], Any]] = []

    def merge(self, merge_context: WindowFn.MergeContext) -> None:
        for group, result in touching_clusters(merge_context.windows):
            if len(group) > 1:
                self.merges.append((group, result))
                merge_context.merge(group, result)


def touching_clusters(windows: Any) -> list[tuple[list[Any], Any]]:
    """Groups of windows that overlap or touch, each with the window covering it."""
    clusters: list[tuple[list[Any], Any]] = []
    group: list[Any] = []
    end = MIN_TIMESTAMP
    for w in sorted(windows, key=lambda w: (w.start, w.end)):
        if group and end >= w.start:
            group.append(w)
            end = max(end, w.end)
            continue
        if group:
            clusters.append((group, IntervalWindow(group[0].start, end)))
        group, end = [w], w.end
    if group:
        clusters.append((group, IntervalWindow(group[0].start, end)))
    return clusters


class Observed(bt.TriggerFn):
    """The scenario's trigger, unchanged, telling the runner which windows took an element."""

    def __init__(self, inner: bt.TriggerFn):
        self.inner = inner
        self.added: list[Any] = []

    def on_element(self, element: Any, window: Any, context: Any) -> None:
        self.added.append(window)
        self.inner.on_element(element, window, context)

    def on_merge(self, to_be_merged: Any, merge_result: Any, context: Any) -> None:
        self.inner.on_merge(to_be_merged, merge_result, context)

    def should_fire(self, time_domain: Any, watermark: Any, window: Any, context: Any) -> Any:
        return self.inner.should_fire(time_domain, watermark, window, context)

    def on_fire(self, watermark: Any, window: Any, context: Any) -> Any:
        return self.inner.on_fire(watermark, window, context)

    def reset(self, window: Any, context: Any) -> None:
        self.inner.reset(window, context)

    def has_ontime_pane(self) -> Any:
        return self.inner.has_ontime_pane()

    def may_lose_data(self, windowing: Any) -> Any:
        return self.inner.may_lose_data(windowing)

    def get_continuation_trigger(self) -> Any:
        return self.inner.get_continuation_trigger()

    def to_runner_api(self, context: Any) -> Any:
        return self.inner.to_runner_api(context)


def build_trigger(spec: dict[str, Any]) -> bt.TriggerFn:
    """Beam's trigger for a SCENARIO.md trigger spec."""
    kind = spec["type"]
    if kind == "DefaultTrigger":
        return bt.DefaultTrigger()
    if kind == "AfterCount":
        return bt.AfterCount(spec["count"])
    if kind == "AfterWatermark":
        early, late = spec.get("early"), spec.get("late")
        return bt.AfterWatermark(
            early=build_trigger(early) if early else None,
            late=build_trigger(late) if late else None,
        )
    if kind == "Repeatedly":
        return bt.Repeatedly(build_trigger(spec["trigger"]))
    if kind in ("AfterAny", "AfterAll", "AfterEach"):
        return getattr(bt, kind)(*(build_trigger(t) for t in spec["triggers"]))
    if kind == "OrFinally":
        return bt.OrFinally(build_trigger(spec["trigger"]), build_trigger(spec["until"]))
    raise ValueError(f"trigger type {kind!r} is not supported by the Beam reference")


def build_window_fn(spec: dict[str, Any]) -> WindowFn:
    kind = spec["type"]
    if kind == "TumblingEventTimeWindows":
        return FixedWindows(spec["size"], spec.get("offset", 0))
    if kind == "SlidingEventTimeWindows":
        return SlidingWindows(spec["size"], spec["slide"], spec.get("offset", 0))
    if kind == "EventTimeSessionWindows":
        return TouchingSessions(spec["gap"])
    if kind == "GlobalWindows":
        return GlobalWindows()
    raise ValueError(f"assigner type {kind!r} is not supported by the Beam reference")


def max_timestamp(window: Any) -> int:
    """The window's max_timestamp in tidemark's ms (the global window: LONG_MAX)."""
    if isinstance(window, GlobalWindow):
        return LONG_MAX
    return int(window.end) - 1


def window_json(window: Any) -> list[Any]:
    if isinstance(window, GlobalWindow):
        return [None, None]
    return [int(window.start), int(window.end)]


def beam_watermark(w_f: int | None) -> Timestamp:
    """Beam's watermark for tidemark's: none yet -> MIN, end of input -> MAX, else W_f + 1."""
    if w_f is None:
        return MIN_TIMESTAMP
    if w_f >= END_OF_INPUT:
        return MAX_TIMESTAMP
    return Timestamp(w_f + 1)


class KeyState:
    """One key's Beam state, and what the shim keeps beside it."""

    def __init__(self) -> None:
        self.state = InMemoryUnmergedState()
        # elements added to a window since its last pane (merged windows: the sum)
        self.pending: dict[Any, int] = {}

    def adapter(self) -> MergeableStateAdapter:
        return MergeableStateAdapter(self.state)

    def remove(self, window: Any) -> None:
        """Forget a window: its state and timers are gone (expiry)."""
        adapter = self.adapter()
        for window_id in adapter.window_ids.pop(window, []):
            self.state.state.pop(window_id, None)
            self.state.timers.pop(window_id, None)
        adapter._persist_window_ids()
        self.pending.pop(window, None)


class Runner:
    """One scenario through Beam's driver, with tidemark's conventions shimmed."""

    def __init__(self, scenario: dict[str, Any]):
        self.lateness = int(scenario.get("allowed_lateness", 0))
        self.side_output = bool(scenario.get("late_side_output", False))
        self.window_fn = build_window_fn(scenario["assigner"])
        self.trigger = Observed(build_trigger(scenario["trigger"]))
        mode = getattr(AccumulationMode, scenario.get("accumulation_mode", "DISCARDING"))
        windowing = Windowing(
            self.window_fn, self.trigger, mode, TimestampCombiner.OUTPUT_AT_EOW, NEVER_LATE
        )
        self.driver = GeneralTriggerDriver(windowing, _Clock())
        self.keys: dict[Any, KeyState] = {}
        self.watermark: int | None = None
        self.panes: list[dict[str, Any]] = []
        self.late: list[dict[str, Any]] = []
        self.dropped = 0
        self.step = 0

    # ------------------------------------------------------------------ lateness

    def expired(self, window: Any) -> bool:
        """Flink's rule: ``max_timestamp + allowed_lateness <= W_f`` (capped at LONG_MAX)."""
        if self.watermark is None:
            return False
        return min(max_timestamp(window) + self.lateness, LONG_MAX) <= self.watermark

    def live_windows(self, ks: KeyState, windows: list[Any]) -> list[Any]:
        """The element's windows that are not late; sessions judged after merging."""
        if isinstance(self.window_fn, TouchingSessions):
            known = ks.adapter().known_windows()
            for group, result in touching_clusters(known + windows):
                if windows[0] in group:
                    return [] if self.expired(result) else windows
        return [w for w in windows if not self.expired(w)]

    # ------------------------------------------------------------------ steps

    def element(self, key: Any, value: Any, ts: int) -> None:
        ks = self.keys.setdefault(key, KeyState())
        stamp = Timestamp(ts)
        windows = list(self.window_fn.assign(WindowFn.AssignContext(stamp, element=value)))
        live = self.live_windows(ks, windows)
        self.trigger.added = []
        if live:
            w_b = beam_watermark(self.watermark)
            wv = WindowedValue(value, stamp, live)
            outputs = list(self.driver.process_elements(ks.state, [wv], w_b, w_b))
            self.apply_merges(ks)
            for window in self.trigger.added:
                ks.pending[window] = ks.pending.get(window, 0) + 1
            self.record(key, ks, outputs)
        if not self.trigger.added:  # only expired or closed windows
            if self.side_output:
                self.late.append({"step": self.step, "key": key, "value": value, "timestamp": ts})
            else:
                self.dropped += 1
        self.fire_timers(key, ks)

    def apply_merges(self, ks: KeyState) -> None:
        if not isinstance(self.window_fn, TouchingSessions):
            return
        for group, result in self.window_fn.merges:
            total = sum(ks.pending.pop(w, 0) for w in group)
            ks.pending[result] = total
        self.window_fn.merges = []

    def advance(self, w_f: int) -> None:
        if self.watermark is not None and w_f <= self.watermark:
            return  # a watermark that does not advance is ignored (as tidemark's harness)
        self.watermark = w_f
        for key, ks in self.keys.items():
            self.fire_timers(key, ks)
        for key, ks in self.keys.items():
            self.expire(key, ks)

    def fire_timers(self, key: Any, ks: KeyState) -> None:
        w_b = beam_watermark(self.watermark)
        to_fire = ks.state.get_and_clear_timers(w_b)
        while to_fire:
            for window_id, (name, domain, t_stamp, _) in to_fire:
                outputs = list(
                    self.driver.process_timer(window_id, name, domain, t_stamp, ks.state)
                )
                self.record(key, ks, outputs)
            to_fire = ks.state.get_and_clear_timers(w_b)

    def expire(self, key: Any, ks: KeyState) -> None:
        """Windows past ``max_timestamp + lateness``: a final pane of unemitted elements."""
        adapter = ks.adapter()
        for window in list(adapter.known_windows()):
            if not self.expired(window):
                continue
            closed = adapter.get_state(window, GeneralTriggerDriver.TOMBSTONE)
            if not closed and ks.pending.get(window, 0) > 0:
                self.panes.append(self.expiry_pane(key, adapter, window))
            ks.remove(window)

    def expiry_pane(self, key: Any, adapter: Any, window: Any) -> dict[str, Any]:
        index = adapter.get_state(window, GeneralTriggerDriver.INDEX)
        nonspec = adapter.get_state(window, GeneralTriggerDriver.NONSPECULATIVE_INDEX)
        # ON_TIME when the expiry is the window's end (Beam Java's isEndOfWindow): no
        # allowed lateness, or the global window, which expires at the end of input
        at_end = self.lateness == 0 or isinstance(window, GlobalWindow)
        on_time = at_end and nonspec == 0
        return {
            "step": self.step,
            "key": key,
            "window": window_json(window),
            "values": sorted(adapter.get_state(window, GeneralTriggerDriver.ELEMENTS)),
            "timing": "ON_TIME" if on_time else "LATE",
            "index": index,
            "non_speculative_index": nonspec,
            "is_first": index == 0,
            "is_last": True,
        }

    def record(self, key: Any, ks: KeyState, outputs: list[WindowedValue]) -> None:
        for wv in outputs:
            (window,) = wv.windows
            ks.pending[window] = 0
            pane = wv.pane_info
            self.panes.append(
                {
                    "step": self.step,
                    "key": key,
                    "window": window_json(window),
                    "values": sorted(wv.value),
                    "timing": _TIMING[pane.timing],
                    "index": pane.index,
                    "non_speculative_index": pane.nonspeculative_index,
                    "is_first": pane.is_first,
                    "is_last": pane.is_last,
                }
            )

    def run(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        for self.step, event in enumerate(events):
            if "element" in event:
                key, value, ts = event["element"]
                self.element(key, value, ts)
            else:
                self.advance(event["watermark"])
        self.step = len(events)
        self.advance(LONG_MAX)
        return {"panes": self.panes, "dropped": self.dropped, "late": self.late}


_TIMING = {
    PaneInfoTiming.EARLY: "EARLY",
    PaneInfoTiming.ON_TIME: "ON_TIME",
    PaneInfoTiming.LATE: "LATE",
    PaneInfoTiming.UNKNOWN: "UNKNOWN",
}


class _Clock:
    """Processing time never advances (AfterProcessingTime is not supported)."""

    def time(self) -> Timestamp:
        return Timestamp(0)


def run_scenario(scenario: dict[str, Any]) -> dict[str, Any]:
    """The panes (and dropped / late elements) Beam's driver gives for one scenario."""
    try:
        return Runner(scenario).run(scenario["events"])
    except Exception as exc:  # reported per scenario, the run goes on
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)
    with open(argv[1]) as f:
        scenarios = json.load(f)
    names = [s["name"] for s in scenarios]
    if len(set(names)) != len(names):
        print("scenario names must be unique", file=sys.stderr)
        return 2
    out = {s["name"]: run_scenario(s) for s in scenarios}
    with open(argv[2], "w") as f:  # one scenario per line
        lines = [f"{json.dumps(name)}: {json.dumps(result)}" for name, result in out.items()]
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    return 1 if any("error" in v for v in out.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
