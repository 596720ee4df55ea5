"""The engine's Dataflow triggers against Apache Beam's own Python trigger driver.

``test_golden_*`` replays random scenarios whose panes Beam's driver gave through
tools/beamref (tests/beam/golden.json, made by record_golden.py from Beam only), so it
runs everywhere. ``test_hand_written_*`` replays tools/beamref/examples.json, one
scenario per shim and per trigger. ``test_fresh_*`` (marker ``beam``, ``make test-beam``)
generates new scenarios and runs Beam itself.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from beam.compare_with_beam import BEAM_PYTHON, run_beam
from beam.scenarios import compare, random_scenario, run_on_engine

GOLDEN = json.loads((Path(__file__).parent / "golden.json").read_text())["cases"]

_REF = Path(__file__).resolve().parents[2] / "tools" / "beamref"
_OUTPUTS = json.loads((_REF / "examples.out.json").read_text())
EXAMPLES = [
    {"scenario": s, "beam": _OUTPUTS[s["name"]]}
    for s in json.loads((_REF / "examples.json").read_text())
]


# Known disagreements between the engine and Beam's driver (none today); strict, so a
# fix shows up.
KNOWN: dict[str, str] = {}


def _params(cases):
    return [
        pytest.param(
            c,
            id=c["scenario"]["name"],
            marks=[pytest.mark.xfail(reason=KNOWN[c["scenario"]["name"]], strict=True)]
            if c["scenario"]["name"] in KNOWN
            else [],
        )
        for c in cases
    ]


@pytest.mark.parametrize("case", _params(GOLDEN))
def test_golden_beam_panes(case):
    difference = compare(run_on_engine(case["scenario"]), case["beam"])
    assert difference is None, f"{difference}\n{json.dumps(case['scenario'])}"


@pytest.mark.parametrize("case", _params(EXAMPLES))
def test_hand_written_scenarios_match_beam(case):
    difference = compare(run_on_engine(case["scenario"]), case["beam"])
    assert difference is None, f"{difference}\n{json.dumps(case['scenario'])}"


def _trigger_kinds(spec, depth=1):
    yield spec["type"], depth
    for part in ("early", "late", "trigger", "until"):
        if spec.get(part):
            yield from _trigger_kinds(spec[part], depth + 1)
    for sub in spec.get("triggers", []):
        yield from _trigger_kinds(sub, depth + 1)


def test_golden_cases_cover_every_kind():
    scenarios = [c["scenario"] for c in GOLDEN]
    assert len(GOLDEN) >= 300
    assert len({s["assigner"]["type"] for s in scenarios}) == 4
    kinds = {k for s in scenarios for k, _ in _trigger_kinds(s["trigger"])}
    assert kinds == {
        "DefaultTrigger",
        "AfterCount",
        "AfterWatermark",
        "Repeatedly",
        "AfterAny",
        "AfterAll",
        "AfterEach",
        "OrFinally",
    }
    assert max(d for s in scenarios for _, d in _trigger_kinds(s["trigger"])) == 3
    assert {s["accumulation_mode"] for s in scenarios} == {"DISCARDING", "ACCUMULATING"}
    assert {s["allowed_lateness"] > 0 for s in scenarios} == {True, False}
    outputs = [c["beam"] for c in GOLDEN]
    timings = {p["timing"] for o in outputs for p in o["panes"]}
    assert timings == {"EARLY", "ON_TIME", "LATE"}
    assert sum(o["dropped"] for o in outputs) > 0 and sum(len(o["late"]) for o in outputs) > 0


@pytest.mark.beam
@pytest.mark.skipif(not BEAM_PYTHON.exists(), reason="needs tools/beamref/setup.sh")
@pytest.mark.parametrize("seed", [101, 202])
def test_fresh_random_scenarios_match_beam(seed):
    rng = random.Random(seed)
    scenarios = [random_scenario(rng, i) for i in range(150)]
    outputs = run_beam(scenarios)
    differences = []
    for scenario in scenarios:
        expected = outputs[scenario["name"]]
        assert "error" not in expected, expected
        try:
            difference = compare(run_on_engine(scenario), expected)
        except Exception as exc:  # an engine error is one more difference, the run goes on
            difference = f"engine raised {exc!r}"
        if difference:
            differences.append(f"{scenario['name']}: {difference}\n{json.dumps(scenario)}")
    assert not differences, f"{len(differences)} differ; first:\n{differences[0]}"


@pytest.mark.beam
@pytest.mark.skipif(not BEAM_PYTHON.exists(), reason="needs tools/beamref/setup.sh")
def test_recorded_outputs_come_from_the_installed_beam():
    """golden.json and examples.out.json are what run_beam.py gives today (deterministic)."""
    cases = GOLDEN + EXAMPLES
    outputs = run_beam([c["scenario"] for c in cases])
    assert [outputs[c["scenario"]["name"]] for c in cases] == [c["beam"] for c in cases]
