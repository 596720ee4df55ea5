"""The benchmark suite: one command runs the current table of ``benchmarks/README.md``
and writes it down.

    python -m benchmarks                         # every entry at its full size (hours)
    python -m benchmarks --only nexmark-stream   # one entry (a comma-separated list)
    python -m benchmarks --tiny                  # smoke sizes: every script runs, no figure

Each entry is one script run in a process of its own (its own Spark session, set up as
the script sets it), with the arguments its README figures were measured with, or with
tiny ones. Every script prints its own figures, each beside a baseline measured in the
same run (Spark's own query on the same input, or a bare Python loop) and as a ratio to
it; the suite does not read them, it keeps them: each entry's output is echoed as it
runs and written, after a table of the entries (command, seconds, the machine's load
average before and after, verdict), to ``benchmarks/results/<UTC date>-pyspark-
<version>.md`` (``-tiny`` added at smoke sizes), headed by the commit, the PySpark and
Python versions and the cores. The file is printed at the end.

An entry's verdict: ``ok``; ``target missed`` where its script exits 1 because a figure
is below the target it prints (``engine``, ``spark-batch``, ``batch-functions``,
``window-all``: the figures stand, and mean nothing at tiny sizes); ``failed`` otherwise
(its results differ from the baseline's, or it raised). The exit status is 1 when an
entry failed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


@dataclass(frozen=True)
class Entry:
    """One row of the table: a script, what it measures against what, and its runs (one
    argument list each) at full and at tiny sizes."""

    name: str
    script: str  # relative to benchmarks/
    measures: str
    baseline: str
    full: tuple[tuple[str, ...], ...]
    tiny: tuple[tuple[str, ...], ...]


NEXMARK_TINY = ("--events", "6000", "--batch-rows", "2000", "--repeat", "1")

ENTRIES = (
    Entry(
        "nexmark-stream",
        "nexmark/run.py",
        "Nexmark q5, q7, q11, q12 streamed, 1M bids, 100,000 a micro-batch",
        "Spark's own SQL streaming query",
        (("--stream-100k",),),
        (("--modes", "stream", *NEXMARK_TINY),),
    ),
    Entry(
        "nexmark",
        "nexmark/run.py",
        "Nexmark q5, q7, q11, q12 in BATCH, replay and stream, 200,000 bids",
        "Spark's own SQL query",
        ((),),
        (("--modes", "batch,replay", *NEXMARK_TINY),),
    ),
    Entry(
        "nexmark-floor",
        "nexmark/floor.py",
        "the floors under a Python stateful operator on Nexmark's streams",
        "Spark's own SQL streaming query",
        (("--events", "1000000", "--batch-rows", "100000"),),
        # 13 s of event time: its checks need a closed 10 s window (q7) on both sides
        (("--events", "120000", "--batch-rows", "40000", "--rounds", "1"),),
    ),
    Entry(
        "nexmark-state-bound",
        "nexmark/state_bound.py",
        "the least state an exact q5 holds, as a multiple of q5t's",
        "q5t's state (2 s tumbling windows)",
        ((),),
        (("--events", "120000"),),  # 13 s of event time: two 10 s windows inside it
    ),
    Entry(
        "state-growth",
        "state_growth.py",
        "a stream whose keys pile up in state: 1.8M live keys",
        "Spark's own streaming aggregation, RocksDB",
        (("--conf", "spark.driver.memory=4g", "--rounds", "2"),),
        (("--key-space", "20000", "--events", "2000", "--batches", "3"),),
    ),
    Entry(
        "spark-batch",
        "spark_batch.py",
        "BATCH keyed tumbling reduce, 10M events",
        "Spark's own groupBy(window).agg(sum)",
        ((),),
        (("20000",),),
    ),
    Entry(
        "batch-functions",
        "batch_functions.py",
        "BATCH user AggregateFunction / ProcessWindowFunction, 10M events",
        "Spark's own groupBy(window).agg(count, sum)",
        (("--floor",),),
        (("--events", "20000", "--rounds", "1", "--floor"),),
    ),
    Entry(
        "window-all",
        "window_all.py",
        "BATCH window_all on every core: max over 10M events, q7 over 2M bids",
        "Spark's own groupBy(window).agg(max), its own q7",
        (("--floor",),),
        (("--events", "20000", "--bids", "5000", "--rounds", "1", "--floor"),),
    ),
    Entry(
        "vectorized",
        "vectorized.py",
        "BATCH aggregate_vectorized mean and 90th percentile, 10M events",
        "Spark's own avg / percentile",
        (("10000000", "3"),),
        (("20000", "1"),),
    ),
    Entry(
        "vectorized-stream",
        "vectorized.py",
        "stream aggregate_vectorized mean, 100,000 events a micro-batch",
        "Spark's own streaming avg",
        (("--stream", "10", "3"),),
        # 77 s of event time: the check needs closed 1-minute windows
        (("--stream", "3", "1", "70000"),),
    ),
    Entry(
        "engine",
        "engine_throughput.py",
        "the pure-Python window engine on one core",
        "a bare dict loop",
        ((),),
        (("--scale", "0.03"),),  # below, its sliding table has no entries
    ),
    Entry(
        "explain-cost",
        "explain_cost.py",
        "what explaining a checkpoint costs a running query",
        "the same query with its records off / no reader",
        (("record",), ("reader",)),
        (("record", "2"), ("reader", "2")),
    ),
)

# Modules the entries' scripts import; not run on their own.
SUPPORT = ("nexmark/generator.py", "nexmark/queries.py", "vectorized_stream.py")


# What a script prints when a figure misses its target (it then exits 1), and what it
# prints when it failed: a run that missed a target still measured what it measured.
MISSED = ("NOT met", "BELOW TARGET")
FAILED = ("Traceback", "differ", "disagree")


@dataclass
class Ran:
    entry: Entry
    argv: tuple[str, ...]
    seconds: float
    load_before: float
    load_after: float
    status: int
    output: str

    @property
    def verdict(self) -> str:
        """``ok``, ``target missed`` (its figures stand) or ``failed (exit N)``."""
        if self.status == 0:
            return "ok"
        missed = any(m in self.output for m in MISSED)
        if self.status == 1 and missed and not any(f in self.output for f in FAILED):
            return "target missed"
        return f"failed (exit {self.status})"


def select(only: str | None) -> list[Entry]:
    """The entries named in ``--only`` (all of them without it), in the table's order."""
    if not only:
        return list(ENTRIES)
    names = [n for n in only.split(",") if n]
    known = {e.name for e in ENTRIES}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        sys.exit(f"--only takes a comma-separated subset of {','.join(sorted(known))}")
    return [e for e in ENTRIES if e.name in names]


def run_entry(entry: Entry, argv: tuple[str, ...]) -> Ran:
    """One run of an entry's script, its output echoed as it comes and kept."""
    command = [sys.executable, str(HERE / entry.script), *argv]
    print(f"\n=== {entry.name}: {' '.join(command[1:])}", flush=True)
    load_before, started = os.getloadavg()[0], time.perf_counter()
    lines = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=HERE.parent
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    seconds = time.perf_counter() - started
    return Ran(
        entry, argv, seconds, load_before, os.getloadavg()[0], process.returncode, "".join(lines)
    )


def commit() -> str:
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=HERE, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def markdown(runs: list[Ran], tiny: bool, started: datetime.datetime, head: str) -> str:
    """The results file: the run's set-up, the table of entries, then each entry's output."""
    size = "tiny (smoke sizes: no figure to quote)" if tiny else "full"
    lines = [
        f"# Benchmarks, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"- commit {head}; PySpark {pyspark_version()}; Python {platform.python_version()}",
        f"- {os.cpu_count()} cores; sizes: {size}",
        f"- load average before: {runs[0].load_before:.1f}; after: {runs[-1].load_after:.1f}",
        "",
        "| entry | measures | against | arguments | seconds | load before / after | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for ran in runs:
        arguments = " ".join(ran.argv) or "(defaults)"
        lines.append(
            f"| {ran.entry.name} | {ran.entry.measures} | {ran.entry.baseline} | "
            f"`{ran.entry.script} {arguments}` | {ran.seconds:.0f} | "
            f"{ran.load_before:.1f} / {ran.load_after:.1f} | {ran.verdict} |"
        )
    for ran in runs:
        lines += ["", f"## {ran.entry.name}: `{ran.entry.script} {' '.join(ran.argv)}`", ""]
        lines += ["```", ran.output.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--only", help="entries to run, comma-separated: " + ", ".join(e.name for e in ENTRIES)
    )
    parser.add_argument("--tiny", action="store_true", help="smoke sizes (no figure to quote)")
    parser.add_argument("--out", type=Path, help="the results file (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    entries = select(args.only)
    started, head = datetime.datetime.now(datetime.timezone.utc), commit()  # what ran
    runs = [
        run_entry(entry, tuple(run))
        for entry in entries
        for run in (entry.tiny if args.tiny else entry.full)
    ]
    text = markdown(runs, args.tiny, started, head)
    parts = [f"{started:%Y-%m-%d}", f"pyspark-{pyspark_version()}"]
    parts += [e.name for e in entries] if args.only else []  # a part does not overwrite the whole
    name = "-".join(parts + (["tiny"] if args.tiny else [])) + ".md"
    out = args.out or RESULTS / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print("\n" + text + f"\nwritten to {out}")
    return 1 if any(r.verdict.startswith("failed") for r in runs) else 0
