"""Beam's Python trigger driver WITHOUT tidemark's shims, on the cases FINDINGS.md cites.

Usage: tools/beamref/.venv/bin/python tools/beamref/raw_facts.py
Fed as trigger_test.py's TriggerDriverTranscriptTest feeds it (Beam's own watermarks).
"""

from apache_beam.transforms.core import Windowing
from apache_beam.transforms.trigger import (
    AccumulationMode,
    AfterCount,
    AfterWatermark,
    DefaultTrigger,
    GeneralTriggerDriver,
    InMemoryUnmergedState,
)
from apache_beam.transforms.window import FixedWindows, Sessions, TimestampCombiner, WindowFn
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP, Timestamp
from apache_beam.utils.windowed_value import WindowedValue


class Clock:
    def time(self):
        return 0


def run(window_fn, trigger, lateness, script):
    windowing = Windowing(
        window_fn, trigger, AccumulationMode.DISCARDING, TimestampCombiner.OUTPUT_AT_EOW, lateness
    )
    driver = GeneralTriggerDriver(windowing, Clock())
    state, watermark, out = InMemoryUnmergedState(), MIN_TIMESTAMP, []

    def fire():
        due = state.get_and_clear_timers(watermark)
        while due:
            for window, (name, domain, ts, _) in due:
                out.extend(driver.process_timer(window, name, domain, ts, state))
            due = state.get_and_clear_timers(watermark)

    for kind, x in script:
        if kind == "e":
            windows = window_fn.assign(WindowFn.AssignContext(Timestamp(x)))
            wv = WindowedValue(x, Timestamp(x), windows)
            out.extend(driver.process_elements(state, [wv], watermark, watermark))
        else:
            watermark = x
        fire()
    return [(str(o.windows[0]), o.value, o.pane_info) for o in out]


CASES = {
    # window [0, 10), lateness 5: Beam watermark 15 (= tidemark 14) still accepts element 2
    "boundary": (FixedWindows(10), DefaultTrigger(), 5, [("e", 1), ("w", Timestamp(15)), ("e", 2)]),
    "boundary+1": (
        FixedWindows(10),
        DefaultTrigger(),
        5,
        [("e", 1), ("w", Timestamp(16)), ("e", 2)],
    ),
    # [0, 6) and [6, 12) touch: Beam keeps two sessions
    "touching-sessions": (
        Sessions(6),
        AfterWatermark(),
        0,
        [("e", 0), ("e", 6), ("w", MAX_TIMESTAMP)],
    ),
    # AfterCount(3) with 2 elements: nothing is ever emitted (no garbage collection)
    "no-gc": (FixedWindows(10), AfterCount(3), 0, [("e", 1), ("e", 2), ("w", MAX_TIMESTAMP)]),
    # live session [10, 15); element 6's own window [6, 11) is expired: dropped before merging
    "session-late-own-window": (
        Sessions(5),
        AfterWatermark(late=AfterCount(1)),
        0,
        [("e", 10), ("w", Timestamp(13)), ("e", 6), ("w", MAX_TIMESTAMP)],
    ),
    # DefaultTrigger never sets is_last, even with zero lateness
    "default-not-last": (FixedWindows(10), DefaultTrigger(), 0, [("e", 1), ("w", MAX_TIMESTAMP)]),
    # AfterCount(1) finishes on element 1: element 2 is dropped silently
    "closed": (FixedWindows(10), AfterCount(1), 0, [("e", 1), ("e", 2), ("w", MAX_TIMESTAMP)]),
}

if __name__ == "__main__":
    for name, case in CASES.items():
        print(name, run(*case))
