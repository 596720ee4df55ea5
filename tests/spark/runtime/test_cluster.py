"""tidemark on a real Spark standalone cluster whose workers' Python lacks tidemark.

A master and two workers are started on this machine from PySpark's own ``spark-class``
(bound to 127.0.0.1, one core and a little memory each); the executors run a bare
virtualenv holding only PySpark's Python dependencies (numpy, pandas, pyarrow, protobuf
and theirs, linked from the test's own environment), so they cannot import tidemark.
The driver, a child process (one SparkContext per process; the ``spark`` fixture is
untouched), runs tests/support/cluster_check.py:

- the workers' probe fails with ``SessionSetupError`` before anything is shipped;
- ``make dist``'s zip shipped with ``addPyFile`` makes a BATCH pipeline run;
- on a second application, ``tm.ship_to_executors(spark)`` does the same;
- a streaming query (one file per micro-batch, ``write_outputs`` with a checkpoint) loses
  an executor to ``kill -9`` mid-stream, and its results still equal the BATCH run's.

A local Spark Connect server whose workers run the same bare Python gets tidemark from
the helper as a Python artifact (``addArtifacts(..., pyfile=True)``).

Every wait is bounded; every process started here is stopped in a ``finally``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = Path(__file__).parents[2] / "support/cluster_check.py"
# What pandas, pyarrow and PySpark's workers import, and nothing of tidemark's.
WORKER_DISTRIBUTIONS = ("numpy", "pandas", "pyarrow", "protobuf", "python-dateutil", "pytz")
WORKER_DISTRIBUTIONS += ("tzdata",)
START_TIMEOUT_S = 120
DRIVER_TIMEOUT_S = 1200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bare_worker_python(root: Path) -> str:
    """A virtualenv without tidemark: the distributions of ``WORKER_DISTRIBUTIONS``
    linked into its site-packages from this environment's, nothing else."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120
    )
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    for name in WORKER_DISTRIBUTIONS:
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops:
            link = Path(site) / top
            if not link.exists():
                link.symlink_to(Path(str(dist.locate_file(top))))
    return str(python)


def _daemon_env(java_home: str, spark_home: str) -> dict[str, str]:
    """The JVMs' environment: none of this process's Python settings reach the
    executors (no PYTHONPATH pointing at tidemark's sources or the tests)."""
    drop = {"PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"JAVA_HOME": java_home, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1"}
    env["SPARK_DAEMON_MEMORY"] = "256m"
    return env


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


def start_cluster(workdir: Path, processes: list[subprocess.Popen]) -> tuple[str, list[int]]:
    """Start a master and two workers; returns the master URL and the workers' pids
    (the worker JVMs: ``spark-class`` execs java)."""
    import pyspark

    from tidemark.spark.runtime._java import ensure_java

    spark_home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    env = _daemon_env(str(ensure_java()), spark_home)
    port, ui_port = _free_port(), _free_port()
    master = f"spark://127.0.0.1:{port}"

    def daemon(name: str, *args: str) -> subprocess.Popen:
        log = open(workdir / f"{name}.log", "wb")
        process = subprocess.Popen(
            [spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir
        )
        processes.append(process)
        return process

    daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
           "--port", str(port), "--webui-port", str(ui_port))  # fmt: skip
    workers = [
        daemon(f"worker{i}", "org.apache.spark.deploy.worker.Worker", master,
               "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
               "--webui-port", str(_free_port()), "--work-dir", str(workdir / f"work{i}"))
        for i in (1, 2)
    ]  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while _alive_workers(ui_port) < 2:
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            logs = {p.name: p.read_text()[-2000:] for p in workdir.glob("*.log")}
            raise AssertionError(f"the cluster did not start in {START_TIMEOUT_S} s: {logs}")
        time.sleep(1)
    return master, [w.pid for w in workers]


def stop(processes: list[subprocess.Popen]) -> None:
    """Stop what this test started, workers (and their executors) first."""
    for process in reversed(processes):
        if process.poll() is None:
            process.terminate()
    for process in reversed(processes):
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def test_shipping_to_a_cluster_whose_workers_lack_tidemark(tmp_path):
    processes: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        # `make dist` in a copy of the project (its dist/ and build/ stay out of the tree)
        project = tmp_path / "project"
        project.mkdir()
        for name in ("Makefile", "pyproject.toml", "README.md"):
            shutil.copy(ROOT / name, project / name)
        shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns(
            "__pycache__", "*.egg-info"))  # fmt: skip
        venv = Path(sys.prefix)
        stamp = venv / ".installed"
        made = subprocess.run(
            ["make", "dist", f"VENV={venv}", f"STAMP={stamp}", "-o", str(stamp)],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert made.returncode == 0, made.stdout + made.stderr
        version = metadata.version("tidemark")
        dist_zip = project / "dist" / f"tidemark-{version}.zip"
        assert (project / "dist" / f"tidemark-{version}-py3-none-any.whl").is_file()

        python = bare_worker_python(tmp_path / "worker-venv")
        master, workers = start_cluster(tmp_path, processes)
        args = [master, str(dist_zip), str(tmp_path / "run"), json.dumps(workers)]
        notes = run_driver(args, python, tmp_path)
        print(f"cluster test: {time.monotonic() - started:.0f} s; {notes}")
    finally:
        stop(processes)


def run_driver(args: list[str], worker_python: str, cwd: Path) -> dict:
    """Run tests/support/cluster_check.py with ``args``; fail on any failure it reports."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYSPARK_PYTHON"] = worker_python
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        env=env,
        cwd=cwd,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("CLUSTER-RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-6000:]
    result = json.loads(lines[-1].removeprefix("CLUSTER-RESULT "))
    assert result["failures"] == [], "\n".join(result["failures"])
    return dict(result["notes"])


def test_shipping_over_spark_connect_to_workers_that_lack_tidemark(tmp_path):
    pytest.importorskip("grpc", reason="needs the pyspark[connect] extras")
    started = time.monotonic()
    run_driver(["connect"], bare_worker_python(tmp_path / "worker-venv"), tmp_path)
    print(f"Spark Connect shipping test: {time.monotonic() - started:.0f} s")


def test_the_bare_worker_python_lacks_tidemark(tmp_path):
    python = bare_worker_python(tmp_path / "venv")
    code = "import pandas, pyarrow, google.protobuf\ntry:\n import tidemark\nexcept ImportError:\n print('no tidemark')"
    done = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert done.stdout.strip() == "no tidemark", done.stderr
    assert sysconfig.get_paths()["purelib"] not in done.stdout
