"""Run N random scenarios through Beam's trigger driver and on the engine; report differences.

Usage: python tests/beam/compare_with_beam.py [N] [SEED]
Needs tools/beamref set up (``bash tools/beamref/setup.sh``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BEAM_PYTHON = ROOT / "tools" / "beamref" / ".venv" / "bin" / "python"

if __package__ in (None, ""):  # run as a script: make `beam.scenarios` importable
    sys.path.insert(0, str(ROOT / "tests"))
from beam.scenarios import compare, random_scenario, run_on_engine  # noqa: E402


def run_beam(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """Beam's output per scenario name (tools/beamref/run_beam.py in its own venv)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp, "in.json"), Path(tmp, "out.json")
        src.write_text(json.dumps(scenarios))
        done = subprocess.run(
            [str(BEAM_PYTHON), str(ROOT / "tools/beamref/run_beam.py"), str(src), str(dst)],
            check=False,
            capture_output=True,
            text=True,
        )
        if not dst.exists():
            raise RuntimeError(f"run_beam.py failed:\n{done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(dst.read_text())
        return result


def main(count: int, seed: int) -> int:
    rng = random.Random(seed)
    scenarios = [random_scenario(rng, i) for i in range(count)]
    beam = run_beam(scenarios)
    failures = skipped = 0
    for scenario in scenarios:
        expected = beam[scenario["name"]]
        if "error" in expected:
            skipped += 1
            continue
        try:
            got = run_on_engine(scenario)
        except Exception as exc:  # report, keep going
            failures += 1
            print(f"ENGINE ERROR {scenario['name']}: {exc!r}\n{json.dumps(scenario)}\n")
            continue
        difference = compare(got, expected)
        if difference:
            failures += 1
            print(f"MISMATCH {scenario['name']}: {difference}\n{json.dumps(scenario)}\n")
    print(f"{count - skipped} compared, {failures} differ, {skipped} refused by the reference")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 200,
            int(sys.argv[2]) if len(sys.argv) > 2 else 1,
        )
    )
