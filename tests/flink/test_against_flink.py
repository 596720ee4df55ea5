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


@pytest.mark.parametrize(
    "case", GOLDEN, ids=[c["scenario"]["name"] for c in GOLDEN]
)
def test_golden_flink_output(case):
    difference = compare(run_on_engine(case["scenario"]), case["flink"])
    assert difference is None, f"{difference}\n{json.dumps(case['scenario'])}"


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
