"""Apache Beam's trigger transcripts (data/trigger_transcripts.yaml), run on tidemark.

Each transcript is fed the way Beam's ``TriggerDriverTranscriptTest`` feeds its driver,
translated to tidemark's conventions: an ``input`` bundle's timestamps become elements
(value = timestamp, one key), fed one at a time; a Beam watermark ``W_b`` becomes
tidemark's ``W_f = W_b - 1``; Beam's ``FixedWindows`` / ``SlidingWindows`` / ``Sessions``
/ ``GlobalWindows`` become tidemark's assigners; Beam's defaults (ACCUMULATING, lateness
0) apply. The end of input is not fed (Beam's test does not feed it either). Expected
panes match on the attributes they list, except ``timestamp``: tidemark's output
timestamp is always the window's ``max_timestamp``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

import tidemark as tm
from tidemark.testing import WindowOperatorHarness

__all__ = [
    "TRANSCRIPTS",
    "TranscriptFailure",
    "check",
    "run_on_engine",
    "to_scenario",
    "reference_per_action",
]

DATA = Path(__file__).parent / "data" / "trigger_transcripts.yaml"


def _load() -> list[dict[str, Any]]:
    specs = [s for s in yaml.safe_load_all(DATA.read_text()) if s]
    seen: dict[str, int] = {}
    for spec in specs:  # the file names two transcripts alike: make ids unique
        name = spec.get("name", "unnamed")
        seen[name] = seen.get(name, 0) + 1
        spec["id"] = name if seen[name] == 1 else f"{name}_{seen[name] - 1}"
    return specs


TRANSCRIPTS = _load()


class TranscriptFailure(AssertionError):
    """The output disagrees with the transcript (Beam's 'Unmatched' / 'Unexpected output')."""


# resolved when a transcript runs (the Dataflow triggers are tidemark's top-level names)
_TRIGGERS = {
    "Default": "DefaultTrigger",
    **{n: n for n in ("DefaultTrigger", "AfterWatermark", "AfterCount", "Repeatedly")},
    **{n: n for n in ("AfterAny", "AfterAll", "AfterEach", "OrFinally")},
}


def _trigger(name: str) -> Callable[..., Any]:
    return getattr(tm, _TRIGGERS[name])  # type: ignore[no-any-return]


_WINDOW_FNS: dict[str, Callable[..., Any]] = {
    "FixedWindows": tm.TumblingEventTimeWindows.of,
    # output timestamps are not compared, so the custom-timestamping variant is FixedWindows
    "CustomTimestampingFixedWindowsWindowFn": tm.TumblingEventTimeWindows.of,
    "SlidingWindows": tm.SlidingEventTimeWindows.of,
    "Sessions": tm.EventTimeSessionWindows.with_gap,
    "GlobalWindows": tm.GlobalWindows.create,
}


def _evaluate(text: str, names: Callable[[str], Callable[..., Any]]) -> Any:
    """``Foo(1, bar=Baz(2))`` with only ``names`` callable (Beam's transcript syntax)."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return names(node.id)()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = names(node.func.id)
            return fn(*map(ev, node.args), **{k.arg: ev(k.value) for k in node.keywords})
        raise ValueError(f"unsupported transcript expression {ast.dump(node)}")

    return ev(ast.parse(text.strip(), mode="eval").body)


def _actions(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    return [next(iter(line.items())) for line in spec["transcript"]]


class _Info(tm.ProcessWindowFunction):
    """A pane as Beam's ``_windowed_value_info`` reports it (without the timestamp)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window, pane = context.window(), context.pane()
        yield {
            "window": [getattr(window, "start", None), window.max_timestamp()],
            "values": sorted(e[1] for e in elements),
            "index": pane.index,
            "nonspeculative_index": pane.non_speculative_index,
            "early": pane.timing is tm.PaneTiming.EARLY,
            "late": pane.timing is tm.PaneTiming.LATE,
            "final": pane.is_last,
        }


def run_on_engine(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The panes each transcript action emits, on tidemark's harness."""
    mode = spec.get("accumulation_mode", "accumulating").upper()
    h = WindowOperatorHarness(  # type: ignore[call-arg]
        _evaluate(spec.get("window_fn", "GlobalWindows"), _WINDOW_FNS.__getitem__),
        _Info(),
        key_selector=lambda e: e[0],
        trigger=_evaluate(spec.get("trigger_fn", "Default"), _trigger),
        allowed_lateness=spec.get("allowed_lateness", 0),
        accumulation_mode=getattr(tm.AccumulationMode, mode),
    )
    per_action: list[list[dict[str, Any]]] = []
    seen = 0
    for action, params in _actions(spec):
        if action == "input":
            for t in params:
                h.process_element(("k", t), t)
        elif action == "watermark":
            h.process_watermark(params - 1)
        output = h.output()
        per_action.append([value for value, _ts in output[seen:]])
        seen = len(output)
    return per_action


def to_scenario(spec: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """The transcript as a tools/beamref scenario, and the action index of each event."""
    window_fn = spec.get("window_fn", "GlobalWindows").strip()
    name, _, args = window_fn.partition("(")
    numbers = [int(a) for a in args.rstrip(")").split(",") if a.strip()]
    assigner = {
        "FixedWindows": lambda: {"type": "TumblingEventTimeWindows", "size": numbers[0]},
        "CustomTimestampingFixedWindowsWindowFn": lambda: {
            "type": "TumblingEventTimeWindows",
            "size": numbers[0],
        },
        "SlidingWindows": lambda: {
            "type": "SlidingEventTimeWindows",
            "size": numbers[0],
            "slide": numbers[1],
        },
        "Sessions": lambda: {"type": "EventTimeSessionWindows", "gap": numbers[0]},
        "GlobalWindows": lambda: {"type": "GlobalWindows"},
    }[name]()
    events: list[dict[str, Any]] = []
    owner: list[int] = []
    for i, (action, params) in enumerate(_actions(spec)):
        if action == "input":
            events += [{"element": ["k", t, t]} for t in params]
            owner += [i] * len(params)
        elif action == "watermark":
            events.append({"watermark": params - 1})
            owner.append(i)
    scenario = {
        "name": spec["id"],
        "assigner": assigner,
        "trigger": _trigger_spec(spec.get("trigger_fn", "Default")),
        "accumulation_mode": spec.get("accumulation_mode", "accumulating").upper(),
        "allowed_lateness": spec.get("allowed_lateness", 0),
        "events": events,
    }
    return scenario, owner


def reference_per_action(
    spec: dict[str, Any], result: dict[str, Any], owner: list[int]
) -> list[list[dict[str, Any]]]:
    """tools/beamref's panes for :func:`to_scenario`'s scenario, per transcript action
    (the end-of-input step, which Beam's transcript test never feeds, left out)."""
    per_action: list[list[dict[str, Any]]] = [[] for _ in spec["transcript"]]
    for pane in result["panes"]:
        if pane["step"] >= len(owner):
            continue
        start, end = pane["window"]
        per_action[owner[pane["step"]]].append(
            {
                "window": [start, tm.LONG_MAX if end is None else end - 1],
                "values": pane["values"],
                "index": pane["index"],
                "nonspeculative_index": pane["non_speculative_index"],
                "early": pane["timing"] == "EARLY",
                "late": pane["timing"] == "LATE",
                "final": pane["is_last"],
            }
        )
    return per_action


def _trigger_spec(text: str) -> dict[str, Any]:
    """A transcript's trigger expression as a SCENARIO.md trigger spec."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        name = node.func.id if isinstance(node, ast.Call) else node.id  # type: ignore[attr-defined]
        name = "DefaultTrigger" if name == "Default" else name
        args = [ev(a) for a in getattr(node, "args", [])]
        kwargs = {k.arg: ev(k.value) for k in getattr(node, "keywords", [])}
        if name == "AfterCount":
            return {"type": name, "count": args[0]}
        if name == "Repeatedly":
            return {"type": name, "trigger": args[0]}
        if name == "OrFinally":
            return {"type": name, "trigger": args[0], "until": args[1]}
        if name in ("AfterAny", "AfterAll", "AfterEach"):
            return {"type": name, "triggers": args}
        return {"type": name, **kwargs}

    return dict(ev(ast.parse(text.strip(), mode="eval").body))


def check(spec: dict[str, Any], per_action: list[list[dict[str, Any]]]) -> None:
    """Beam's TriggerDriverTranscriptTest check: every pane expected, in its action."""
    output: list[dict[str, Any]] = []
    for (action, params), produced in zip(_actions(spec), per_action):
        if action != "expect" and output:
            raise TranscriptFailure(f"Unexpected output: {output} before {action}: {params}")
        output.extend(produced)
        if action != "expect":
            continue
        for expected in params:
            wanted = {k: v for k, v in expected.items() if k != "timestamp"}
            match = next(
                (c for c in output if all(c[k] == wanted[k] for k in c if k in wanted)), None
            )
            if match is None:
                raise TranscriptFailure(f"Unmatched output {expected} in {output}")
            output.remove(match)
    if output:
        raise TranscriptFailure(f"Unexpected output: {output}")
