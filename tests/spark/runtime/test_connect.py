"""Every mode on Spark Connect: a local Connect server started by a client in a child
process (tests/support/connect_check.py), so the classic ``spark`` fixture is untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = Path(__file__).parents[2] / "support/connect_check.py"


def test_batch_replay_and_streaming_on_spark_connect(tmp_path):
    pytest.importorskip("grpc", reason="needs the pyspark[connect] extras")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1500,  # ~4 min of it real data's values (value_cases)
        env=env,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("CONNECT-RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    failures = json.loads(lines[-1].removeprefix("CONNECT-RESULT "))
    assert failures == [], "\n".join(failures)
