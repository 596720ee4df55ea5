"""Record real Flink 1.20's output for random scenarios into tests/flink/golden.json.

Usage: python tests/flink/record_golden.py COUNT SEED   (needs tools/flinkref set up)
The golden file lets ``make test`` check the engine against Flink without Flink.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from compare_with_flink import run_flink  # noqa: E402
from scenarios import random_scenario  # noqa: E402

GOLDEN = Path(__file__).parent / "golden.json"


def main(count: int, seed: int) -> None:
    rng = random.Random(seed)
    scenarios = [random_scenario(rng, i) for i in range(count)]
    outputs = run_flink(scenarios)
    cases = [
        {"scenario": s, "flink": outputs[s["name"]]}
        for s in scenarios
        if isinstance(outputs.get(s["name"]), list)
    ]
    GOLDEN.write_text(
        json.dumps({"flink": "1.20", "seed": seed, "cases": cases}, separators=(",", ":"))
    )
    print(f"recorded {len(cases)} of {count} scenarios in {GOLDEN}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
