"""A query started by the previous release restarts on this code and carries on exactly.

The checkpoint in ``tests/data/checkpoint_v0_1`` (made as :mod:`checkpoint_compat` says)
holds session windows, timers and reducing state written by the previous release's
streaming runtime. Restarted here with one more input file, the query's outputs over
both runs equal those of this code running all three files from a fresh checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from checkpoint_compat import PLACEHOLDER, outputs, start, write_input

FIXTURE = Path(__file__).parent / "data" / "checkpoint_v0_1"
PANES_FIXTURE = Path(__file__).parent / "data" / "checkpoint_v0_2_panes"
"""Written by release 0.1.0 at dd4fa98 (``checkpoint_compat.py ... --panes``): a Dataflow
trigger in RETRACTING mode, its pane records, trigger counts, timers and retractions."""

pytestmark = pytest.mark.spark


def _relocate(root: Path) -> None:
    """Point the copied checkpoint's file-source log at the copied inputs (and their
    new modification times), dropping the logs' stale checksums."""
    for log in sorted((root / "checkpoint" / "sources" / "0").iterdir()):
        if log.name.startswith("."):
            log.unlink()
            continue
        lines = log.read_text().splitlines()
        for n, line in enumerate(lines):
            if line.startswith("{"):
                entry = json.loads(line)
                entry["path"] = entry["path"].replace(PLACEHOLDER, str(root))
                entry["timestamp"] = int(os.path.getmtime(entry["path"][len("file://") :]) * 1000)
                lines[n] = json.dumps(entry, separators=(",", ":"))
        log.write_text("\n".join(lines))


def test_a_checkpoint_of_the_previous_release_restarts_exactly(spark, tmp_path):
    restarted = tmp_path / "restarted"
    shutil.copytree(FIXTURE, restarted)
    _relocate(restarted)
    write_input(restarted / "in", 2)
    start(spark, restarted).awaitTermination(300)

    fresh = tmp_path / "fresh"
    (fresh / "in").mkdir(parents=True)
    for index in range(3):
        write_input(fresh / "in", index)
        start(spark, fresh).awaitTermination(300)

    def without_batch(found: dict) -> dict:
        return {name: sorted(row[:3] for row in rows) for name, rows in found.items()}

    got, want = without_batch(outputs(spark, restarted)), without_batch(outputs(spark, fresh))
    assert got == want
    assert want["late"] == [("a", 8, 2)]
    assert ("a", 14, 30) in want["main"]  # a fired session, merged with a later element


def test_a_checkpoint_with_panes_of_the_previous_release_restarts_exactly(spark, tmp_path):
    restarted = tmp_path / "restarted"
    shutil.copytree(PANES_FIXTURE, restarted)
    _relocate(restarted)
    write_input(restarted / "in", 2)
    start(spark, restarted, panes=True).awaitTermination(300)

    fresh = tmp_path / "fresh"
    (fresh / "in").mkdir(parents=True)
    for index in range(3):
        write_input(fresh / "in", index)
        start(spark, fresh, panes=True).awaitTermination(300)

    def without_batch(found: dict) -> dict:
        return {name: sorted(row[:-1] for row in rows) for name, rows in found.items()}

    got = without_batch(outputs(spark, restarted, panes=True))
    want = without_batch(outputs(spark, fresh, panes=True))
    assert got == want
    assert want["late"] == [("a", 8, 2)]
    # the late element a@31 fires [30, 40) again: a retraction of its on-time pane, then
    # the late pane with both elements
    assert ("a", 4, 30, "ON_TIME", 0, False, False) in want["main"]
    assert ("a", 4, 30, "ON_TIME", 0, False, True) in want["main"]
    assert ("a", 14, 30, "LATE", 1, False, False) in want["main"]
