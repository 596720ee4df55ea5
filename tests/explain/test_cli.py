"""Tests for the ``tidemark`` console command and the demo it runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tidemark
from tidemark.cli import main

SEED = Path(__file__).parents[1] / "data" / "seed_trace.json"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tidemark {tidemark.__version__}"


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "tidemark"
    if not script.exists():
        script_path = shutil.which("tidemark")
        if script_path is None:
            pytest.skip("the tidemark console script is not installed")
        script = Path(script_path)
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"tidemark {tidemark.__version__}"


@pytest.mark.parametrize("suffix", [".png", ".html"])
def test_timeline_subcommand_draws_a_saved_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    if suffix == ".png":
        pytest.importorskip("matplotlib")
    out = tmp_path / f"seed{suffix}"
    assert main(["timeline", str(SEED), str(out), "--title", "seed run"]) == 0
    assert str(out) in capsys.readouterr().out
    assert out.stat().st_size > 5000


def test_timeline_subcommand_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(tmp_path / "missing.json"), str(tmp_path / "x.png")]) == 1
    assert "tidemark timeline: error:" in capsys.readouterr().err
    assert main(["timeline"]) == 2
    assert "required: trace_json, out_path" in capsys.readouterr().err


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out
    assert main(["frobnicate"]) == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


@pytest.mark.spark
def test_demo_prints_the_articles_results(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tidemark.demo import run_demo

    assert run_demo(tmp_path) == 0
    out = capsys.readouterr().out
    # The article: [12:00:00, 12:00:05) 1 cart, 2 pv; [12:00:05, 12:00:10) 2 pv, 2 buy,
    # 1 cart; event3 late and dropped.
    sections = re.split(r"\n\((?=[abc]\) )", out)
    assert len(sections) == 4, out
    for section in sections[1:]:
        for window, key, n in (
            ("[12:00:00, 12:00:05)", "cart", 1),
            ("[12:00:00, 12:00:05)", "pv", 2),
            ("[12:00:05, 12:00:10)", "pv", 2),
            ("[12:00:05, 12:00:10)", "buy", 2),
            ("[12:00:05, 12:00:10)", "cart", 1),
        ):
            assert re.search(rf"{re.escape(window)}\s+{key}\s+{n}\s", section), (window, key)
    plain, lateness, side = sections[1:]
    assert "event3 (buy, 12:00:03, arrival 5) came at watermark 12:00:06.999: dropped" in plain
    assert "num_late_records_dropped() on Spark: 1" in plain
    assert re.search(r"\[12:00:00, 12:00:05\)\s+buy\s+1\s+12:00:06\.999\s+late", lateness)
    assert "side output 'late-events' (Spark): action=buy id=event3" in side
    assert "PROBLEM" not in out and "All three runs match the article's results." in out
    for slug in ("a-plain", "b-allowed-lateness", "c-side-output"):
        for suffix in (".json", ".png", ".html"):
            assert (tmp_path / f"{slug}{suffix}").exists()
            assert str(tmp_path / f"{slug}{suffix}") in out
