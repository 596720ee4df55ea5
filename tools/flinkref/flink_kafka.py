#!/usr/bin/env python3
"""Run a real Flink 1.20 job on a Kafka topic: ``java/FlinkKafkaCount.java``.

    python tools/flinkref/flink_kafka.py BOOTSTRAP TOPIC BOUND_MS WINDOW_MS [MODE]

Flink's own Kafka source (``flink-connector-kafka``, pinned in ``tools/versions.env``)
reads the topic from its earliest to its latest offsets (bounded), with
``WatermarkStrategy.forBoundedOutOfOrderness(BOUND_MS)`` on the source (MODE
``per-partition``, the default: one watermark generator per partition, Flink's Kafka
semantics) or after it (``after-source``: one generator over the partitions as the reader
interleaves them); a tumbling event-time window of WINDOW_MS counts per key, late elements
go to a side output. Prints ``{"main": [[key, start, end, count], ...], "late":
[[partition, key, ts], ...]}``.

Needs ``tools/flinkref/setup.sh`` (Flink's jars), ``python tools/kafka/jars.py flink``
(the connector) and Java 17. Used by ``tests/kafka/test_kafka_flink.py``.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kafka"))
import jars as kafka_jars  # noqa: E402  (tools/kafka/jars.py)
import run_flink  # noqa: E402  (tools/flinkref/run_flink.py)

SRC = os.path.join(HERE, "java", "FlinkKafkaCount.java")
MODES = ("per-partition", "after-source")


def missing() -> str | None:
    """What is missing to run the job, or ``None``."""
    if not os.environ.get("FLINK_LIB") and not glob.glob(
        os.path.join(HERE, ".venv", "lib", "python*", "site-packages", "pyflink", "lib")
    ):
        return "Flink's jars: run tools/flinkref/setup.sh"
    if not kafka_jars.fetched("flink"):
        return "Flink's Kafka connector: run `python tools/kafka/jars.py flink`"
    return None


def run(
    bootstrap: str,
    topic: str,
    bound_ms: int,
    window_ms: int,
    mode: str = "per-partition",
    timeout_s: float = 300,
) -> dict[str, list[list]]:
    """The job's window counts and late elements (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    lib = run_flink.flink_lib()
    connector = tuple(kafka_jars.classpath(["flink"]))
    run_flink.compile_if_needed(lib, SRC, connector)
    classpath = os.pathsep.join([run_flink.BUILD, os.path.join(lib, "*"), *connector])
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out.json")
        command = [
            run_flink.java_bin("java"), "-Xmx1g", "-XX:+UseSerialGC", *run_flink.JAVA_OPENS,
            "-cp", classpath, "FlinkKafkaCount",
            bootstrap, topic, str(bound_ms), str(window_ms), mode, out,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0 or not os.path.exists(out):
            said = (done.stdout + done.stderr).strip()[-3000:]
            raise RuntimeError(f"the Flink job failed (exit {done.returncode}):\n{said}")
        with open(out) as f:
            return json.load(f)


def main(argv: list[str]) -> int:
    if len(argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    reason = missing()
    if reason:
        print(f"flink_kafka.py: needs {reason}", file=sys.stderr)
        return 1
    bootstrap, topic, bound, window = argv[1:5]
    mode = argv[5] if len(argv) == 6 else "per-partition"
    print(json.dumps(run(bootstrap, topic, int(bound), int(window), mode)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
