"""Where a streaming Nexmark run's CPU goes: the JVM's and the Python workers' CPU seconds
of one run of each side, read from ``/proc`` before and after (Linux only).

Each query's stream (``run.py``'s files: ``--batch-rows`` bids a micro-batch, one file per
micro-batch) runs once per side untimed, then ``--rounds`` times per side; each line is one
run: its wall seconds, the JVM's CPU seconds and the Python workers' (Spark's own queries
start none). On two cores a run can use at most twice its wall time.

Usage::

    python benchmarks/nexmark/cpu_split.py [--events 200000] [--batch-rows 20000]
        [--queries q5,q11] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexmark.generator import GeneratorConfig  # noqa: E402
from nexmark.run import run_stream, write_inputs  # noqa: E402
from tidemark.spark.session import get_spark  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> tuple[float, float]:
    """A process's own CPU seconds and its waited-for children's."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0, 0.0
    return (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


def _processes() -> dict[int, str]:
    names = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as comm:
                    names[int(entry)] = comm.read().strip()
            except OSError:
                continue
    return names


def snapshot() -> tuple[float, dict[int, float], float]:
    """The JVM's CPU, each Python process's (this one's excepted), and what exited Python
    workers left in their daemons' children time."""
    procs = _processes()
    jvm = sum(_cpu(p)[0] for p, name in procs.items() if name == "java")
    pythons = [p for p, name in procs.items() if name.startswith("python") and p != os.getpid()]
    return jvm, {p: _cpu(p)[0] for p in pythons}, sum(_cpu(p)[1] for p in pythons)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--queries", default="q5,q11")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    spark = get_spark(master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    root = Path(tempfile.mkdtemp(prefix="nexmark-cpu-"))
    config = GeneratorConfig()
    write_inputs(root, args.events, args.batch_rows, config)
    queries = args.queries.split(",")
    for query in queries:
        for side in ("spark", "tidemark"):
            run_stream(side, query, spark, root, config.max_disorder_ms)
    for _ in range(args.rounds):
        for query in queries:
            for side in ("spark", "tidemark"):
                jvm, python, children = snapshot()
                timing = run_stream(side, query, spark, root, config.max_disorder_ms)
                jvm_after, python_after, children_after = snapshot()
                workers = sum(cpu - python.get(p, 0.0) for p, cpu in python_after.items())
                workers += children_after - children
                print(
                    f"{query:<4} {side:<8} wall {timing.seconds:6.2f} s | JVM CPU "
                    f"{jvm_after - jvm:6.2f} s | Python workers' CPU {workers:6.2f} s",
                    flush=True,
                )


if __name__ == "__main__":
    main()
