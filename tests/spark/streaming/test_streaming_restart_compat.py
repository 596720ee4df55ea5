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
from checkpoint_compat import LAYOUT_CONF, PLACEHOLDER, outputs, start, write_input

FIXTURE = Path(__file__).parents[2] / "data" / "checkpoint_v0_1"
PANES_FIXTURE = Path(__file__).parents[2] / "data" / "checkpoint_v0_2_panes"
"""Written by release 0.1.0 at dd4fa98 (``checkpoint_compat.py ... --panes``): a Dataflow
trigger in RETRACTING mode, its pane records, trigger counts, timers and retractions."""

UPGRADE_FIXTURES = {
    layout: Path(__file__).parents[2] / "data" / f"checkpoint_pyspark_4_0_{layout}"
    for layout in ("deltas", "row")
}
"""Checkpoints written by this code on PySpark 4.0.4, the oldest supported, one per state
layout (``checkpoint_compat.py ... --layout LAYOUT``, as :mod:`checkpoint_compat` says)."""

pytestmark = pytest.mark.spark


def _relocate(root: Path) -> None:
    """Point the copied checkpoint's file-source log at the copied inputs (and their
    new modification times), and its operator metadata at the copied schema files,
    dropping the files' stale checksums."""
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
    # transformWithState's operator metadata (from Spark 4.0) names its schema files
    for metadata in (root / "checkpoint" / "state").glob("*/_metadata/v2/*"):
        if metadata.name.startswith("."):
            metadata.unlink()
        else:
            metadata.write_text(metadata.read_text().replace(PLACEHOLDER, str(root)))


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


@pytest.mark.parametrize("layout", sorted(UPGRADE_FIXTURES))
def test_a_checkpoint_of_the_oldest_pyspark_restarts_on_this_one_exactly(spark, tmp_path, layout):
    """A platform upgrade: a query that ran on PySpark 4.0 restarts on the running
    PySpark with one more input file; its outputs over both runs equal those of all three
    files run here from a fresh checkpoint in the same layout (the restart takes the
    layout its checkpoint records, whatever the session asks)."""
    restarted = tmp_path / "restarted"
    shutil.copytree(UPGRADE_FIXTURES[layout], restarted)
    _relocate(restarted)
    write_input(restarted / "in", 2)
    start(spark, restarted).awaitTermination(300)

    fresh = tmp_path / "fresh"
    (fresh / "in").mkdir(parents=True)
    asked = spark.conf.get(LAYOUT_CONF, None)
    spark.conf.set(LAYOUT_CONF, layout)
    try:
        for index in range(3):
            write_input(fresh / "in", index)
            start(spark, fresh).awaitTermination(300)
    finally:
        spark.conf.unset(LAYOUT_CONF)
        if asked is not None:
            spark.conf.set(LAYOUT_CONF, asked)

    def without_batch(found: dict) -> dict:
        return {name: sorted(row[:3] for row in rows) for name, rows in found.items()}

    got, want = without_batch(outputs(spark, restarted)), without_batch(outputs(spark, fresh))
    assert got == want
    assert want["late"] == [("a", 8, 2)]
    assert ("a", 14, 30) in want["main"]
