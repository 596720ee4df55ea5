"""The engine against real Flink 1.20.

``test_golden_*`` replays scenarios whose output real Flink recorded (tests/flink/
golden.json, made by record_golden.py), so it runs everywhere. ``test_fresh_*`` (marker
``flink``, ``make test-flink``) generates new scenarios and runs Flink itself.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from scenarios import compare, random_scenario, run_on_engine

GOLDEN = json.loads((Path(__file__).parent / "golden.json").read_text())["cases"]

# Hand-written scenarios (evictors before/after, delta triggers, continuous triggers,
# late session merges, negative offsets, ...) with the output real Flink 1.20 gave.
_REF = Path(__file__).resolve().parents[2] / "tools" / "flinkref"
_OUTPUTS = json.loads((_REF / "examples.out.json").read_text())
EXAMPLES = [
    {"scenario": s, "flink": _OUTPUTS[s["name"]]}
    for s in json.loads((_REF / "examples.json").read_text())
    if isinstance(_OUTPUTS.get(s["name"]), list)
]


@pytest.mark.parametrize("case", GOLDEN, ids=[c["scenario"]["name"] for c in GOLDEN])
def test_golden_flink_output(case):
    difference = compare(run_on_engine(case["scenario"]), case["flink"])
    assert difference is None, f"{difference}\n{json.dumps(case['scenario'])}"


@pytest.mark.parametrize("case", EXAMPLES, ids=[c["scenario"]["name"] for c in EXAMPLES])
def test_hand_written_scenarios_match_flink(case):
    difference = compare(run_on_engine(case["scenario"]), case["flink"])
    assert difference is None, difference


def test_golden_cases_cover_every_kind():
    kinds = {c["scenario"]["assigner"]["type"] for c in GOLDEN}
    assert len(GOLDEN) >= 200 and len(kinds) == 5
    assert any(c["scenario"]["evictor"] for c in GOLDEN)
    assert any(c["scenario"]["trigger"] for c in GOLDEN)


@pytest.mark.flink
@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 17 for Flink")
@pytest.mark.parametrize("seed", [101, 202])
def test_fresh_random_scenarios_match_flink(seed):
    from compare_with_flink import run_flink

    rng = random.Random(seed)
    scenarios = [random_scenario(rng, i) for i in range(150)]
    outputs = run_flink(scenarios)
    for scenario in scenarios:
        expected = outputs.get(scenario["name"])
        if isinstance(expected, list):
            difference = compare(run_on_engine(scenario), expected)
            assert difference is None, f"{difference}\n{json.dumps(scenario)}"
