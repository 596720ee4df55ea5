"""Write examples.json: hand-written sanity scenarios, one per shim and per trigger.

Usage: python tools/beamref/make_examples.py, then
  tools/beamref/.venv/bin/python tools/beamref/run_beam.py tools/beamref/examples.json tools/beamref/examples.out.json
"""

import json
from pathlib import Path


def T(size, offset=0):
    return {"type": "TumblingEventTimeWindows", "size": size, "offset": offset}


def S(gap):
    return {"type": "EventTimeSessionWindows", "gap": gap}


def SL(size, slide):
    return {"type": "SlidingEventTimeWindows", "size": size, "slide": slide, "offset": 0}


G = {"type": "GlobalWindows"}
D = {"type": "DefaultTrigger"}


def AC(n):
    return {"type": "AfterCount", "count": n}


def AW(early=None, late=None):
    spec = {"type": "AfterWatermark", "early": early, "late": late}
    return {k: v for k, v in spec.items() if v is not None}


def R(t):
    return {"type": "Repeatedly", "trigger": t}


def E(*elements):
    return [{"element": list(x)} for x in elements]


def W(w):
    return [{"watermark": w}]


def sc(name, assigner, trigger, events, mode="DISCARDING", L=0, side=False, note=""):
    return {
        "name": name,
        "note": note,
        "assigner": assigner,
        "trigger": trigger,
        "accumulation_mode": mode,
        "allowed_lateness": L,
        "late_side_output": side,
        "events": events,
    }


ex = [
    sc(
        "default-on-time",
        T(10),
        D,
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 12)) + W(9) + W(19),
        note="W_f = 9 = max_timestamp of [0,10): ON_TIME pane (Beam watermark 10 = end)",
    ),
    sc(
        "default-one-before",
        T(10),
        D,
        E(("a", 1, 1)) + W(8),
        note="W_f = 8 < max_timestamp: no pane until the end of input",
    ),
    sc(
        "default-late-fires-per-element",
        T(10),
        D,
        E(("a", 1, 1)) + W(9) + E(("a", 2, 3), ("a", 3, 4)) + W(30),
        L=5,
        mode="ACCUMULATING",
        note="DefaultTrigger fires a LATE pane per late element; is_last never set",
    ),
    sc(
        "lateness-boundary-dropped",
        T(10),
        D,
        E(("a", 1, 1)) + W(14) + E(("a", 2, 2)),
        L=5,
        side=True,
        note="Flink: dropped iff max_timestamp + L <= W_f (9 + 5 <= 14); "
        "Beam alone would accept it (W_b 15 > 10 + 5 is false)",
    ),
    sc(
        "lateness-boundary-accepted",
        T(10),
        D,
        E(("a", 1, 1)) + W(13) + E(("a", 2, 2)),
        L=5,
        side=True,
        note="9 + 5 > 13: accepted, LATE pane",
    ),
    sc(
        "early-count-discarding-empty-on-time",
        T(10),
        AW(early=AC(2)),
        E(("a", 1, 1), ("a", 2, 2)) + W(9),
        note="early pane takes every element; the ON_TIME pane is empty and last",
    ),
    sc(
        "early-count-accumulating",
        T(10),
        AW(early=AC(2)),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3)) + W(9),
        mode="ACCUMULATING",
    ),
    sc(
        "early-late-count",
        T(10),
        AW(early=AC(2), late=AC(1)),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3)) + W(9) + E(("a", 4, 4), ("a", 5, 5)) + W(40),
        L=20,
        mode="ACCUMULATING",
        note="late panes have non_speculative_index 1, 2; none is last; expiry at 29 emits nothing (all emitted)",
    ),
    sc(
        "expiry-leftover-late",
        T(10),
        AC(5),
        E(("a", 1, 1)) + W(9) + E(("a", 2, 2)),
        L=10,
        note="AfterCount(5) never fires: at the end of input the 2 buffered elements fire "
        "as the final pane, LATE (L > 0), index 0",
    ),
    sc(
        "late-arrival-first-pane",
        T(10),
        D,
        W(12) + E(("a", 1, 5)),
        L=5,
        note="the window's first element arrives after the watermark passed its end: its first"
        " pane is LATE with non_speculative_index 0",
    ),
    sc(
        "expiry-on-time",
        T(10),
        AC(3),
        E(("a", 1, 1), ("a", 2, 2)) + W(9),
        note="L = 0: the expiry pane of unemitted elements is ON_TIME (nonspeculative index 0), last",
    ),
    sc(
        "expiry-after-early",
        T(10),
        R(AC(2)),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3)) + W(9),
        note="EARLY pane [1,2], then at expiry the leftover [3]: ON_TIME, index 1, last",
    ),
    sc(
        "expiry-late",
        T(10),
        R(AC(2)),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3)) + W(9) + W(20),
        L=5,
        note="leftover [3] emitted at expiry W_f 20 >= 14: LATE, last",
    ),
    sc(
        "expiry-accumulating",
        T(10),
        R(AC(2)),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3)) + W(9),
        mode="ACCUMULATING",
        note="ACCUMULATING: the expiry pane holds every buffered element [1,2,3]",
    ),
    sc(
        "closed-window-drops",
        T(10),
        AC(2),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3), ("a", 4, 4)),
        note="AfterCount(2) finishes: window closed; later elements counted as dropped",
    ),
    sc(
        "closed-window-side-output",
        T(10),
        AC(2),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3)),
        side=True,
    ),
    sc(
        "sessions-touching-merge",
        S(6),
        AW(),
        E(("a", 1, 0), ("a", 2, 6)) + W(20),
        note="[0,6) and [6,12) touch: one session [0,12) (Beam's own Sessions would keep two)",
    ),
    sc(
        "sessions-late-merge-accepted",
        S(5),
        AW(late=AC(1)),
        E(("a", 1, 10)) + W(12) + E(("a", 2, 6)) + W(30),
        L=0,
        note="element 6's own window [6,11) is late at W_f 12 but merges with the live [10,15):"
        " accepted (Flink checks the merged window)",
    ),
    sc(
        "sessions-late-alone-dropped",
        S(3),
        AW(),
        E(("a", 1, 20)) + W(12) + E(("a", 2, 6)),
        side=True,
        note="[6,9) is late and merges with nothing: late side output",
    ),
    sc(
        "sessions-merge-restarts-index",
        S(10),
        AW(early=AC(2), late=AC(3)),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3), ("a", 4, 4), ("a", 5, 5))
        + W(99)
        + E(("a", 6, 1), ("a", 7, 3), ("a", 8, 4)),
        L=100,
        mode="ACCUMULATING",
        note="Beam's early_late_sessions transcript, one element per bundle",
    ),
    sc(
        "sessions-closed-absorbs",
        S(5),
        AC(2),
        E(("a", 1, 0), ("a", 2, 2), ("a", 3, 6), ("a", 4, 20)),
        side=True,
        note="closed session [0,7) absorbs 6 ([6,11) overlaps): dropped to the side output, "
        "and the closed session grows to [0,11)",
    ),
    sc(
        "sliding-partial",
        SL(10, 5),
        AC(2),
        E(("a", 1, 6), ("a", 2, 7), ("a", 3, 8)) + W(30),
        note="6,7 fill both [0,10) and [5,15); 8 reaches only closed windows",
    ),
    sc("global-count", G, AC(2), E(("a", 1, 0), ("a", 2, 6), ("a", 3, 7))),
    sc(
        "global-repeatedly-leftover",
        G,
        R(AC(2)),
        E(("a", 1, 0), ("a", 2, 6), ("a", 3, 7)),
        note="global window: leftover [3] fires at the end of input, ON_TIME (L = 0)",
    ),
    sc(
        "global-after-watermark",
        G,
        AW(early=AC(2)),
        E(("a", 1, 0), ("a", 2, 6), ("a", 3, 7)) + W(100),
    ),
    sc(
        "after-each",
        T(10),
        {"type": "AfterEach", "triggers": [AC(2), AC(1)]},
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3), ("a", 4, 4)) + W(9),
    ),
    sc(
        "after-all",
        T(10),
        R({"type": "AfterAll", "triggers": [AC(2), AW()]}),
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3)) + W(9) + E(("a", 4, 4), ("a", 5, 5)) + W(40),
        L=10,
    ),
    sc(
        "after-any",
        T(10),
        {"type": "AfterAny", "triggers": [AC(3), AW()]},
        E(("a", 1, 1), ("a", 2, 2)) + W(9) + E(("a", 3, 3)),
        L=10,
    ),
    sc(
        "or-finally",
        T(10),
        {"type": "OrFinally", "trigger": R(AC(1)), "until": AC(3)},
        E(("a", 1, 1), ("a", 2, 2), ("a", 3, 3), ("a", 4, 4)),
    ),
    sc(
        "keys-apart",
        T(10),
        AW(early=AC(2)),
        E(("a", 1, 1), ("b", 2, 2), ("a", 3, 3), ("b", 4, 14)) + W(9) + W(19),
    ),
    sc(
        "watermark-jump",
        T(5),
        AW(early=AC(1), late=AC(1)),
        E(("a", 1, 1), ("a", 2, 6), ("a", 3, 11)) + W(40) + E(("a", 4, 3)),
        L=3,
        side=True,
        note="one watermark passes three windows: three ON_TIME panes at one step; element 3 is late by then",
    ),
    sc(
        "closed-session-grown-expires",
        S(5),
        AC(1),
        E(("a", 1, 0), ("a", 2, 3)) + W(10) + E(("a", 3, 8)),
        side=True,
        note="closed [0,5) grows to [0,8) absorbing 3 (late output); it expires at W_f 10 >= 7, "
        "so 8's window [8,13) is a new session: EARLY pane",
    ),
    sc(
        "closed-session-grown-expires-late-alone",
        S(5),
        AC(1),
        E(("a", 1, 0), ("a", 2, 3)) + W(10) + E(("a", 3, 6)),
        side=True,
        note="as above; 6's window [6,11) is late (10 <= 10) and the expired [0,8) is gone: late output",
    ),
    sc(
        "global-expiry-lateness",
        G,
        AC(3),
        E(("a", 1, 0)),
        L=2,
        note="the leftover fires at the end of input; L > 0, so the rule says LATE "
        "(for the global window max_timestamp + L is capped at its max_timestamp)",
    ),
    sc(
        "two-default-timers",
        T(10),
        {"type": "AfterAny", "triggers": [D, D]},
        E(("a", 1, 1)) + W(9),
        note="each DefaultTrigger sets its own end-of-window timer; Beam's driver fires once per "
        "due timer: ON_TIME, then an empty LATE pane at the same step",
    ),
    sc(
        "two-watermark-timers-accumulating",
        T(10),
        R({"type": "OrFinally", "trigger": AW(), "until": AW()}),
        E(("a", 1, 1)) + W(9),
        mode="ACCUMULATING",
        note="two AfterWatermark timers: ON_TIME [1], then LATE [1] again at the same step",
    ),
]
for s in ex:
    if not s["note"]:
        del s["note"]
(Path(__file__).parent / "examples.json").write_text(json.dumps(ex, indent=1) + "\n")
print(len(ex))
