"""kill -9 at 1.8M live keys: ``state_growth.py``'s stream through tidemark's query, its
driver killed mid-micro-batch once the state is large, restarted on the checkpoint, and
its fired windows checked equal to Spark's own query's (issue 31, target 1: a restart
loses and duplicates nothing at this size).

The stream is ``state_growth.py``'s (``--batches`` files of ``--events`` rows, keys from a
``--key-space``, every timestamp in the first hour, 1-hour tumbling windows counting and
summing per key), then its end-of-input file, which fires every window. tidemark's query
runs in child processes (each its own driver), in the ``--layout`` given:

1. the first child reads the files one a micro-batch; once ``--kill-after`` micro-batches
   are committed and the next one is under way (its offsets written, no commit yet), it
   is killed with SIGKILL;
2. a second child restarts on the checkpoint and reads the rest of the files (Spark
   replays the killed micro-batch);
3. a third restarts with the end-of-input file: every window fires.

Each child's sink writes each micro-batch's digest (``state_growth.DigestSink``'s: row
count, sums, an order-free hash) to a file named by the batch id, so a replayed batch
overwrites its own. Their sum must equal the digest of Spark's own query over the same
files, run in this process.

Usage::

    python benchmarks/state_kill.py                     # the issue's size, deltas layout
    python benchmarks/state_kill.py --layout row --kill-after 16
    python benchmarks/state_kill.py --key-space 200000 --events 10000 --batches 8 --kill-after 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

import state_growth  # noqa: E402

CONF = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"}


class FileDigestSink(state_growth.DigestSink):
    """A digest per micro-batch, in ``directory/batch-<id>.npy`` (a replay overwrites)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    def __call__(self, df: Any, batch_id: int) -> None:
        self.digest[:] = 0
        super().__call__(df, batch_id)
        np.save(self.directory / f"batch-{batch_id}.npy", self.digest)


def child(stream: Path, checkpoint: Path, digests: Path, layout: str) -> None:
    """One driver: tidemark's query on the checkpoint until the files present are read."""
    from tidemark.spark.session import get_spark

    spark = get_spark(master="local[2]", conf=CONF)
    spark.conf.set(state_growth.LAYOUT_CONF, layout)
    query = state_growth.start_tidemark(spark, stream, checkpoint, FileDigestSink(digests))
    query.awaitTermination()


def _start_child(root: Path, layout: str, log: str) -> subprocess.Popen:
    args = [sys.executable, __file__, "--child", str(root), "--layout", layout]
    out = open(root / log, "w")
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


def _count(directory: Path) -> int:
    return sum(1 for p in directory.glob("[0-9]*")) if directory.exists() else 0


def kill_mid_batch(root: Path, layout: str, after: int) -> int:
    """Start the first child; SIGKILL it while the micro-batch after ``after`` committed
    ones runs. Returns the committed micro-batches at the kill."""
    process = _start_child(root, layout, "child-1.log")
    offsets, commits = root / "checkpoint" / "offsets", root / "checkpoint" / "commits"
    try:
        while not (_count(commits) >= after and _count(offsets) > _count(commits)):
            if process.poll() is not None:
                raise SystemExit(f"the first child exited early: see {root / 'child-1.log'}")
            time.sleep(0.2)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    committed = _count(commits)
    if _count(offsets) <= committed:
        raise SystemExit("the kill came after the micro-batch committed: run again")
    return committed


def finish(root: Path, layout: str, log: str) -> None:
    process = _start_child(root, layout, log)
    if process.wait() != 0:
        raise SystemExit(f"a restarted child failed: see {root / log}")


def spark_digest(root: Path) -> tuple[int, ...]:
    """Spark's own query over the same files (state_growth's run)."""
    from tidemark.spark.session import get_spark

    spark = get_spark(master="local[2]", conf=CONF)
    return state_growth.run_side(spark, "spark", root, root / "inputs", "reference").digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key-space", type=int, default=state_growth.FULL["key_space"])
    parser.add_argument("--events", type=int, default=state_growth.FULL["events"])
    parser.add_argument("--batches", type=int, default=state_growth.FULL["batches"])
    parser.add_argument("--kill-after", type=int, default=16, help="committed micro-batches")
    parser.add_argument("--layout", default="deltas", choices=["deltas", "row"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        root = Path(args.child)
        child(root / "stream", root / "checkpoint", root / "digests", args.layout)
        return
    root = Path(tempfile.mkdtemp(prefix="tidemark-state-kill-"))
    try:
        inputs = root / "inputs"
        state_growth.write_input(inputs, args.key_space, args.events, args.batches)
        (root / "stream").mkdir()
        (root / "digests").mkdir()
        for path in sorted((inputs / "data").iterdir()):
            os.link(path, root / "stream" / path.name)  # hard links keep the mtimes
        started = time.perf_counter()
        committed = kill_mid_batch(root, args.layout, args.kill_after)
        print(f"killed with {committed} micro-batches committed, the next under way", flush=True)
        finish(root, args.layout, "child-2.log")
        os.link(inputs / "end" / "part-end.parquet", root / "stream" / "part-end.parquet")
        finish(root, args.layout, "child-3.log")
        files = sorted((root / "digests").iterdir())
        got = tuple(int(v) for v in sum(np.load(p) for p in files))
        print(
            f"tidemark ({args.layout} layout), killed and restarted: digest {got} "
            f"from {len(files)} micro-batches in {time.perf_counter() - started:,.0f} s"
        )
        want = spark_digest(root)
        print(f"Spark's own query: digest {want}")
        if got != want:
            raise SystemExit("the results differ: windows lost or duplicated")
        print("equal: no window lost or duplicated")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
