"""Window semantics as transcripts: input, watermarks, processing time, and what to expect.

A transcript file (``tests/transcripts/*.yaml``) holds a list of cases. Each case names a
window pipeline from a small vocabulary and a list of steps; a step feeds an element, a
watermark or a processing time and says what the operator must emit during that step.
Cases are validated strictly (unknown keys, duplicate keys or names, and an empty
collection are errors) and run by executors: the engine here, the Spark runners in
their own tests.

Schema of a case::

    name: unique-name                    # required
    source: "WOT-01 testSliding..."      # where it comes from (optional)
    doc: free text                       # optional
    timeline: ASCII picture              # optional
    window:
      assigner: {type: SlidingEventTimeWindows, size: 3000, slide: 1000, offset: 0}
      trigger: {type: PurgingTrigger, nested: {type: CountTrigger, count: 4}}   # optional
      evictor: {type: CountEvictor, max_count: 4, do_evict_after: false}       # optional
               # (Delta trigger/evictor: threshold, delta: abs_value | new_minus_old)
      allowed_lateness: 0                # optional, ms
      late_side_output: false            # optional
      function: sum                      # a name from FUNCTIONS
      keyed: true                        # optional; false = window_all
      key_by: f0                         # optional key selector from KEY_SELECTORS (default f0)
      flatten: false                     # optional; true: element [k, [a, b], ts] is (k, a, b)
      gap_of: value                      # dynamic sessions: a name from GAP_EXTRACTORS
    order: sorted                        # sorted (multiset per step, default) or exact
    steps:
      - element: [key1, 1, 3999]         # key, value, timestamp (null: none)
      - watermark: 999
        expect: [[[key1, 3], 999]]       # [result, timestamp] emitted during this step
      - processing_time: 5000
      - snapshot_restore: true
    expect_late: [[[key1, 1], 500]]      # late side output [element, timestamp], in order
    expect_state: {entries: 0, event_timers: 0, processing_timers: 0, dropped: 0}
    must_fail: false                     # self-tests: the case is wrong on purpose
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import tidemark as tm
from tidemark.testing import WindowOperatorHarness

__all__ = [
    "Transcript",
    "TranscriptError",
    "TranscriptMismatch",
    "load_transcripts",
    "run_on_engine",
    "check_engine",
    "build_harness",
    "FUNCTIONS",
    "within_seconds",
]

TRANSCRIPT_DIR = Path(__file__).parents[1] / "transcripts"

CASE_KEYS = {
    "name",
    "source",
    "doc",
    "timeline",
    "window",
    "order",
    "steps",
    "expect_late",
    "expect_state",
    "must_fail",
}
WINDOW_KEYS = {
    "assigner",
    "trigger",
    "evictor",
    "allowed_lateness",
    "late_side_output",
    "function",
    "keyed",
    "gap_of",
    "key_by",
    "flatten",
}
STEP_KINDS = {"element", "watermark", "processing_time", "snapshot_restore"}
STATE_KEYS = {"entries", "event_timers", "processing_timers", "dropped"}


class TranscriptError(ValueError):
    """A transcript file or case is malformed."""


class TranscriptMismatch(AssertionError):
    """A run did not produce what a transcript expects."""


class _StrictLoader(yaml.SafeLoader):
    pass


def _no_duplicate_keys(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise TranscriptError(f"duplicate key {key!r} at line {key_node.start_mark.line + 1}")
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)


@dataclass
class Transcript:
    name: str
    window: dict[str, Any]
    steps: list[dict[str, Any]]
    order: str = "sorted"
    expect_late: list[Any] | None = None
    expect_state: dict[str, int] | None = None
    must_fail: bool = False
    source: str = ""
    file: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _fail(where: str, message: str) -> TranscriptError:
    return TranscriptError(f"{where}: {message}")


def _validate_step(where: str, step: Any) -> dict[str, Any]:
    if not isinstance(step, dict):
        raise _fail(where, f"a step must be a mapping; got {step!r}")
    kinds = STEP_KINDS & step.keys()
    if len(kinds) != 1:
        raise _fail(where, f"a step needs exactly one of {sorted(STEP_KINDS)}; got {sorted(step)}")
    unknown = step.keys() - STEP_KINDS - {"expect", "note"}
    if unknown:
        raise _fail(where, f"unknown step keys {sorted(unknown)}")
    if "element" in step and (not isinstance(step["element"], list) or len(step["element"]) != 3):
        raise _fail(where, f"element must be [key, value, timestamp]; got {step['element']!r}")
    if "expect" in step and not isinstance(step["expect"], list):
        raise _fail(where, f"expect must be a list of [result, timestamp]; got {step['expect']!r}")
    return step


def _validate_case(where: str, raw: Any) -> Transcript:
    if not isinstance(raw, dict):
        raise _fail(where, "a case must be a mapping")
    unknown = raw.keys() - CASE_KEYS
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}; allowed: {sorted(CASE_KEYS)}")
    for required in ("name", "window", "steps"):
        if required not in raw:
            raise _fail(where, f"missing {required!r}")
    where = f"{where} ({raw['name']})"
    window = raw["window"]
    if not isinstance(window, dict) or window.keys() - WINDOW_KEYS:
        raise _fail(where, f"window keys must be among {sorted(WINDOW_KEYS)}; got {window!r}")
    if "assigner" not in window or "function" not in window:
        raise _fail(where, "window needs an assigner and a function")
    if "key_by" in window and (
        window["key_by"] not in KEY_SELECTORS or window.get("keyed", True) is False
    ):
        raise _fail(
            where,
            f"key_by must be one of {sorted(KEY_SELECTORS)} and needs keyed: true; "
            f"got {window['key_by']!r}",
        )
    if "flatten" in window and not isinstance(window["flatten"], bool):
        raise _fail(where, f"flatten must be true or false; got {window['flatten']!r}")
    if "gap_of" in window and window["gap_of"] not in GAP_EXTRACTORS:
        raise _fail(where, f"unknown gap_of {window['gap_of']!r}; known: {sorted(GAP_EXTRACTORS)}")
    if window["function"] not in FUNCTIONS:
        raise _fail(where, f"unknown function {window['function']!r}; known: {sorted(FUNCTIONS)}")
    if not isinstance(raw["steps"], list) or not raw["steps"]:
        raise _fail(where, "steps must be a non-empty list")
    steps = [_validate_step(f"{where} step {i}", s) for i, s in enumerate(raw["steps"])]
    order = raw.get("order", "sorted")
    if order not in ("sorted", "exact"):
        raise _fail(where, f"order must be sorted or exact; got {order!r}")
    state = raw.get("expect_state")
    if state is not None and (not isinstance(state, dict) or state.keys() - STATE_KEYS):
        raise _fail(where, f"expect_state keys must be among {sorted(STATE_KEYS)}; got {state!r}")
    return Transcript(
        name=raw["name"],
        window=window,
        steps=steps,
        order=order,
        expect_late=raw.get("expect_late"),
        expect_state=state,
        must_fail=bool(raw.get("must_fail", False)),
        source=raw.get("source", ""),
    )


def load_transcripts(paths: list[Path] | None = None) -> list[Transcript]:
    """Load and validate every case; names must be unique across files."""
    files = sorted(paths if paths is not None else TRANSCRIPT_DIR.glob("*.yaml"))
    cases: list[Transcript] = []
    names: dict[str, str] = {}
    for path in files:
        raw = yaml.load(path.read_text(), Loader=_StrictLoader)
        if not isinstance(raw, list) or not raw:
            raise TranscriptError(f"{path.name}: must hold a non-empty list of cases")
        for i, item in enumerate(raw):
            case = _validate_case(f"{path.name}[{i}]", item)
            if case.name in names:
                raise TranscriptError(
                    f"{path.name}: duplicate case name {case.name!r} (also in {names[case.name]})"
                )
            names[case.name] = path.name
            case.file = path.name
            cases.append(case)
    if not cases:
        raise TranscriptError(f"no transcripts found in {[str(p) for p in files]}")
    return cases


# ---------------------------------------------------------------- pipeline vocabulary


def _ms(spec: dict[str, Any], name: str, default: int | None = None) -> int:
    value = spec.get(name, default)
    if value is None:
        raise TranscriptError(f"{spec.get('type')}: missing {name!r}")
    return int(value)


def build_assigner(spec: dict[str, Any], gap_of: str | None = None) -> tm.WindowAssigner:
    kind = spec["type"]
    if kind in ("TumblingEventTimeWindows", "TumblingProcessingTimeWindows"):
        return getattr(tm, kind).of(_ms(spec, "size"), _ms(spec, "offset", 0))
    if kind in ("SlidingEventTimeWindows", "SlidingProcessingTimeWindows"):
        return getattr(tm, kind).of(_ms(spec, "size"), _ms(spec, "slide"), _ms(spec, "offset", 0))
    if kind in ("EventTimeSessionWindows", "ProcessingTimeSessionWindows"):
        return getattr(tm, kind).with_gap(_ms(spec, "gap"))
    if kind in ("DynamicEventTimeSessionWindows", "DynamicProcessingTimeSessionWindows"):
        return getattr(tm, kind).with_dynamic_gap(GAP_EXTRACTORS[gap_of or "value"])
    if kind == "GlobalWindows":
        return tm.GlobalWindows.create()
    if kind == "GlobalWindowsWithEndOfStreamTrigger":
        return tm.GlobalWindows.create_with_end_of_stream_trigger()
    if kind in CUSTOM_ASSIGNERS:
        return CUSTOM_ASSIGNERS[kind](spec)
    raise TranscriptError(f"unknown assigner {kind!r}")


def build_trigger(spec: dict[str, Any] | None) -> tm.Trigger | None:
    if spec is None:
        return None
    kind = spec["type"]
    if kind in ("EventTimeTrigger", "ProcessingTimeTrigger"):
        return getattr(tm, kind).create()
    if kind == "CountTrigger":
        return tm.CountTrigger.of(int(spec["count"]))
    if kind == "PurgingTrigger":
        nested = build_trigger(spec["nested"])
        assert nested is not None
        return tm.PurgingTrigger.of(nested)
    if kind in ("ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger"):
        return getattr(tm, kind).of(_ms(spec, "interval"))
    if kind == "DeltaTrigger":
        return tm.DeltaTrigger.of(spec["threshold"], _delta_function(spec))
    if kind in CUSTOM_TRIGGERS:
        return CUSTOM_TRIGGERS[kind](spec)
    raise TranscriptError(f"unknown trigger {kind!r}")


def build_evictor(spec: dict[str, Any] | None) -> tm.Evictor | None:
    if spec is None:
        return None
    after = bool(spec.get("do_evict_after", False))
    kind = spec["type"]
    if kind == "CountEvictor":
        return tm.CountEvictor.of(int(spec["max_count"]), after)
    if kind == "TimeEvictor":
        return tm.TimeEvictor.of(_ms(spec, "interval"), after)
    if kind == "DeltaEvictor":
        return tm.DeltaEvictor.of(spec["threshold"], _delta_function(spec), after)
    raise TranscriptError(f"unknown evictor {kind!r}")


def _value_delta(a: Any, b: Any) -> float:
    return float(abs(a[1] - b[1]))


# Delta functions ``(old, new) -> float`` a DeltaTrigger / DeltaEvictor may name with
# ``delta:`` (default abs_value). new_minus_old is EvictingWindowOperatorTest's
# ``newDataPoint.f1 - oldDataPoint.f1`` (signed).
DELTA_FUNCTIONS: dict[str, Any] = {
    "abs_value": _value_delta,
    "new_minus_old": lambda a, b: float(b[1] - a[1]),
}


def _delta_function(spec: dict[str, Any]) -> Any:
    name = spec.get("delta", "abs_value")
    if name not in DELTA_FUNCTIONS:
        raise TranscriptError(
            f"{spec.get('type')}: unknown delta {name!r}; known: {sorted(DELTA_FUNCTIONS)}"
        )
    return DELTA_FUNCTIONS[name]


LATE = tm.OutputTag("late")

# Key selectors a window may name with ``key_by`` (the element is ``(key, value)`` or,
# flattened, ``(key, *value)``).
KEY_SELECTORS: dict[str, Any] = {
    "f0": lambda v: v[0],
    "f1": lambda v: v[1],
    "f0_f1_f2": lambda v: (v[0], v[1], v[2]),
}


def build_harness(case: Transcript) -> WindowOperatorHarness:
    """The engine pipeline a transcript describes."""
    w = case.window
    keyed = w.get("keyed", True)
    return WindowOperatorHarness(
        build_assigner(w["assigner"], w.get("gap_of")),
        FUNCTIONS[w["function"]](),
        key_selector=KEY_SELECTORS[w.get("key_by", "f0")] if keyed else None,
        trigger=build_trigger(w.get("trigger")),
        evictor=build_evictor(w.get("evictor")),
        allowed_lateness=int(w.get("allowed_lateness", 0)),
        late_data_tag=LATE if w.get("late_side_output") else None,
    )


# ---------------------------------------------------------------- running


def normalise(value: Any) -> Any:
    """Tuples become lists, so results compare with YAML data."""
    return json.loads(json.dumps(value, default=_encode))


def _encode(value: Any) -> Any:
    if isinstance(value, tm.TimeWindow):
        return [value.start, value.end]
    if isinstance(value, tm.GlobalWindow):
        return "GlobalWindow"
    raise TypeError(f"cannot encode {value!r}")


def element_value(step_element: list[Any], flatten: bool = False) -> tuple[Any, ...]:
    """The element a step feeds: ``(key, value)``, or ``(key, *value)`` when flattened."""
    key, value, _ = step_element
    if flatten and isinstance(value, list):
        return (key, *value)
    return (key, tuple(value) if isinstance(value, list) else value)


@dataclass
class EngineRun:
    per_step: list[list[Any]]
    late: list[Any]
    state: dict[str, int]


def run_on_engine(case: Transcript) -> EngineRun:
    """Feed a transcript's steps to the engine; collect what each step emitted."""
    h = build_harness(case)
    per_step: list[list[Any]] = []
    for step in case.steps:
        before = len(h.output())
        if "element" in step:
            value = element_value(step["element"], bool(case.window.get("flatten", False)))
            h.process_element(value, step["element"][2])
        elif "watermark" in step:
            h.process_watermark(int(step["watermark"]))
        elif "processing_time" in step:
            h.set_processing_time(int(step["processing_time"]))
        else:
            h.restore(h.snapshot())
        per_step.append(normalise([[v, t] for v, t in h.output()[before:]]))
    state = {
        "entries": h.num_keyed_state_entries(),
        "event_timers": h.num_event_time_timers(),
        "processing_timers": h.num_processing_time_timers(),
        "dropped": h.num_late_records_dropped,
    }
    return EngineRun(per_step, normalise([[v, t] for v, t in h.side_output(LATE)]), state)


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True)


def compare(case: Transcript, run: EngineRun) -> None:
    """Raise :class:`TranscriptMismatch` where ``run`` differs from the transcript."""
    for i, (step, got) in enumerate(zip(case.steps, run.per_step)):
        want = normalise(step.get("expect", []))
        if case.order == "sorted":
            want, got = sorted(want, key=_sort_key), sorted(got, key=_sort_key)
        if want != got:
            raise TranscriptMismatch(
                f"{case.name}: step {i} {json.dumps({k: v for k, v in step.items() if k != 'expect'})}"
                f"\n  expected {want}\n  got      {got}"
            )
    if case.expect_late is not None and normalise(case.expect_late) != run.late:
        raise TranscriptMismatch(
            f"{case.name}: late side output\n  expected {case.expect_late}\n  got      {run.late}"
        )
    for name, want_count in (case.expect_state or {}).items():
        if run.state[name] != want_count:
            raise TranscriptMismatch(
                f"{case.name}: {name} expected {want_count}, got {run.state[name]}"
            )


class TranscriptTimeout(AssertionError):
    """A run did not finish in time: the engine looped (e.g. on a timer that re-registers
    itself in the past), which must fail a test, not hang it."""


@contextmanager
def within_seconds(seconds: int, what: str) -> Iterator[None]:
    """Fail with :class:`TranscriptTimeout` when the block runs longer than ``seconds``
    (SIGALRM: main thread, POSIX; pure-Python loops are interrupted)."""

    def expire(signum: int, frame: Any) -> None:
        raise TranscriptTimeout(f"{what}: still running after {seconds} s (a loop?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_engine(case: Transcript) -> None:
    with within_seconds(20, case.name):
        run = run_on_engine(case)
    compare(case, run)


# Filled in by tests/support/transcript_functions.py (the vocabulary of window functions, custom
# assigners and triggers that the transcripts name).
FUNCTIONS: dict[str, Any] = {}
CUSTOM_ASSIGNERS: dict[str, Any] = {}
CUSTOM_TRIGGERS: dict[str, Any] = {}
GAP_EXTRACTORS: dict[str, Any] = {}

from transcript_functions import register  # noqa: E402

register(FUNCTIONS, CUSTOM_ASSIGNERS, CUSTOM_TRIGGERS, GAP_EXTRACTORS)
