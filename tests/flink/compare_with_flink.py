"""Run N random scenarios on real Flink 1.20 and on the engine; report differences.

Usage: python tests/flink/compare_with_flink.py [N] [SEED]
Needs tools/flinkref set up (``bash tools/flinkref/setup.sh``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scenarios import compare, random_scenario, run_on_engine  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def run_flink(scenarios: list[dict]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp, "in.json"), Path(tmp, "out.json")
        src.write_text(json.dumps(scenarios))
        subprocess.run(
            [sys.executable, str(ROOT / "tools/flinkref/run_flink.py"), str(src), str(dst)],
            check=False,
            capture_output=True,
            text=True,
        )
        return json.loads(dst.read_text())


def main(count: int, seed: int) -> int:
    rng = random.Random(seed)
    scenarios = [random_scenario(rng, i) for i in range(count)]
    flink = run_flink(scenarios)
    failures = 0
    skipped = 0
    for scenario in scenarios:
        expected = flink.get(scenario["name"])
        if not isinstance(expected, list):
            skipped += 1
            continue
        try:
            got = run_on_engine(scenario)
        except Exception as exc:  # report, keep going
            failures += 1
            print(f"ENGINE ERROR {scenario['name']}: {exc!r}\n{json.dumps(scenario)}")
            continue
        difference = compare(got, expected)
        if difference:
            failures += 1
            print(f"MISMATCH {scenario['name']}: {difference}\n{json.dumps(scenario)}\n")
    print(f"{count - skipped} compared, {failures} differ, {skipped} not run by Flink")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 200,
            int(sys.argv[2]) if len(sys.argv) > 2 else 1,
        )
    )
