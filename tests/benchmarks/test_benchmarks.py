"""The benchmark suite (``python -m benchmarks``, ``benchmarks/suite.py``): every script in
``benchmarks/`` is reached from it, and every entry runs at its tiny size and writes its
table, so that a move of tidemark's code cannot break a benchmark silently."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the suite is not installed: it runs from the repository

from benchmarks.suite import ENTRIES, SUPPORT, Ran  # noqa: E402

BENCHMARKS = ROOT / "benchmarks"
# explain_cost.py's smoke run is tests/spark/streaming/test_explain_streaming.py::test_the_cost_benchmark_runs
TESTED_ELSEWHERE = {"explain-cost"}
SPARK_FREE = {"engine", "nexmark-state-bound"}


def _suite(tmp_path: Path, *names: str) -> tuple[subprocess.CompletedProcess[str], str]:
    out = tmp_path / "table.md"
    command = [sys.executable, "-m", "benchmarks", "--tiny", "--only", ",".join(names)]
    done = subprocess.run(
        [*command, "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return done, out.read_text() if out.exists() else ""


def test_every_script_in_benchmarks_is_an_entry_or_a_module_an_entry_imports():
    on_disk = {
        str(p.relative_to(BENCHMARKS))
        for p in [*BENCHMARKS.rglob("*.py"), *BENCHMARKS.rglob("*.sh")]
        if p.name not in ("__init__.py", "__main__.py", "suite.py")
    }
    reached = {e.script for e in ENTRIES} | set(SUPPORT)
    assert on_disk == reached


def test_a_missed_target_is_told_from_a_failure():
    def verdict(status: int, output: str) -> str:
        return Ran(ENTRIES[0], (), 1.0, 0.0, 0.0, status, output).verdict

    assert verdict(0, "max: 0.20x (target 0.5x NOT met)") == "ok"
    assert verdict(1, "max: 0.20x (target 0.5x NOT met)") == "target missed"
    assert verdict(1, "measured 200,000: BELOW TARGET") == "target missed"
    assert verdict(1, "NOT met\nq7: tidemark's 3 rows differ from Spark's 4") == "failed (exit 1)"
    assert verdict(1, "NOT met\nTraceback (most recent call last):") == "failed (exit 1)"
    assert verdict(1, "q5 stream: tidemark's counts miss bids") == "failed (exit 1)"
    assert verdict(-9, "NOT met") == "failed (exit -9)"


def test_the_suite_refuses_an_unknown_entry():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "nexmark,no-such-entry"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "--only takes" in done.stderr


def test_the_suite_writes_its_table_with_the_runs_set_up(tmp_path):
    done, table = _suite(tmp_path, *sorted(SPARK_FREE))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for expected in ("commit ", "PySpark ", "load average before", "| engine |"):
        assert expected in table
    assert "| nexmark-state-bound |" in table and "engine / baseline" in table


@pytest.mark.slow  # each entry starts its own Spark session: 30 s to a few minutes each
@pytest.mark.spark
@pytest.mark.parametrize(
    "name", [e.name for e in ENTRIES if e.name not in TESTED_ELSEWHERE | SPARK_FREE]
)
def test_an_entry_runs_at_its_tiny_size(tmp_path, name):
    done, table = _suite(tmp_path, name)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    # a target (window_all's 0.5x, ...) means nothing at a tiny size: only a failure counts
    assert f"| {name} |" in table and ("| ok |" in table or "| target missed |" in table)
