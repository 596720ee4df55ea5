#!/usr/bin/env python3
"""Run tidemark window scenarios on real Apache Flink 1.20 (reference runner).

    python tools/flinkref/run_flink.py scenarios.json out.json

Needs tools/flinkref/setup.sh to have been run once (creates .venv with apache-flink 1.20.*, whose
wheel ships the Flink jars).  Compiles java/FlinkRef.java into build/ when it is missing or stale, then
runs all scenarios in one JVM.  out.json = {scenario name: output list} (see SCENARIO.md); a scenario
that Flink rejects (e.g. invalid assigner parameters) maps to {"error": "..."} and the exit code is 1.
Only the Python standard library is used, so any Python 3 can run this driver.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "java", "FlinkRef.java")
BUILD = os.path.join(HERE, "build")

# Flink's own JVM flags for Java 17 (from its flink-conf env.java.opts.all), needed by Kryo/serializers.
JAVA_OPENS = [
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in (
        "java.lang",
        "java.lang.reflect",
        "java.lang.invoke",
        "java.io",
        "java.net",
        "java.nio",
        "java.text",
        "java.time",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "java.util.concurrent.locks",
        "sun.nio.ch",
    )
] + ["--add-exports=java.base/sun.net.util=ALL-UNNAMED"]


def flink_lib() -> str:
    env = os.environ.get("FLINK_LIB")
    if env:
        return env
    hits = glob.glob(
        os.path.join(HERE, ".venv", "lib", "python*", "site-packages", "pyflink", "lib")
    )
    if not hits:
        sys.exit(f"pyflink jars not found under {HERE}/.venv; run tools/flinkref/setup.sh first")
    return hits[0]


def java_bin(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", name) if home else name


def compile_if_needed(lib: str, src: str = SRC, jars: tuple[str, ...] = ()) -> None:
    """Compile ``src`` (a class of ``java/``) into ``build/`` against Flink's ``lib`` and
    ``jars`` when its class is missing or older than the source."""
    cls = os.path.join(BUILD, os.path.splitext(os.path.basename(src))[0] + ".class")
    if os.path.exists(cls) and os.path.getmtime(cls) >= os.path.getmtime(src):
        return
    os.makedirs(BUILD, exist_ok=True)
    cmd = [
        java_bin("javac"),
        "-nowarn",
        "-encoding",
        "UTF-8",
        "-d",
        BUILD,
        "-cp",
        os.pathsep.join([os.path.join(lib, "*"), *jars]),
        src,
    ]
    subprocess.run(cmd, check=True)


def write_pretty(path: str, data: dict) -> None:
    """One output record per line: diff-friendly and still plain JSON."""
    parts = []
    for name, out in data.items():
        if isinstance(out, list):
            body = (
                "[\n" + ",\n".join("    " + json.dumps(r) for r in out) + ("\n  ]" if out else "]")
            )
            if not out:
                body = "[]"
        else:
            body = json.dumps(out)
        parts.append(f"  {json.dumps(name)}: {body}")
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(parts) + "\n}\n")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    scen, out = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    lib = flink_lib()
    compile_if_needed(lib)
    cp = os.pathsep.join([BUILD, os.path.join(lib, "*")])
    raw = out + ".raw.tmp"
    t0 = time.time()
    cmd = [
        java_bin("java"),
        "-Xmx2g",
        "-XX:+UseSerialGC",
        *JAVA_OPENS,
        "-cp",
        cp,
        "FlinkRef",
        scen,
        raw,
    ]
    rc = subprocess.run(cmd).returncode
    if not os.path.exists(raw):
        print(f"flinkref: java failed (exit {rc}), no output", file=sys.stderr)
        return rc or 1
    with open(raw) as f:
        data = json.load(f)
    os.remove(raw)
    write_pretty(out, data)
    print(
        f"flinkref: wrote {len(data)} scenario outputs to {out} in {time.time() - t0:.1f} s",
        file=sys.stderr,
    )
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
