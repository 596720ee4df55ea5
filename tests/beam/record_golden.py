"""Record Beam's trigger driver's panes for random scenarios into tests/beam/golden.json.

Usage: python tests/beam/record_golden.py COUNT SEED   (needs tools/beamref set up)
Golden output comes from Beam only, never from the engine: ``make test`` then checks
the engine against Beam without Beam installed.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):  # run as a script: make `beam.*` importable
    sys.path.insert(0, str(ROOT / "tests"))
from beam.compare_with_beam import BEAM_PYTHON, run_beam  # noqa: E402
from beam.scenarios import random_scenario  # noqa: E402

GOLDEN = Path(__file__).parent / "golden.json"


def beam_version() -> str:
    code = "import apache_beam; print(apache_beam.__version__)"
    done = subprocess.run([str(BEAM_PYTHON), "-c", code], capture_output=True, text=True)
    return done.stdout.strip()


def main(count: int, seed: int) -> None:
    rng = random.Random(seed)
    scenarios = [random_scenario(rng, i) for i in range(count)]
    outputs = run_beam(scenarios)
    cases = [{"scenario": s, "beam": outputs[s["name"]]} for s in scenarios]
    refused = [c["scenario"]["name"] for c in cases if "error" in c["beam"]]
    cases = [c for c in cases if "error" not in c["beam"]]
    GOLDEN.write_text(
        json.dumps(
            {"apache_beam": beam_version(), "seed": seed, "cases": cases},
            separators=(",", ":"),
        )
        + "\n"
    )
    print(f"recorded {len(cases)} of {count} scenarios in {GOLDEN}; refused: {refused}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
