"""Where the tests' modules are, put on the path of this process and of the Spark
processes it starts.

The tests live in folders that mirror ``src`` (``tests/engine``, ``tests/spark/batch``,
...) and import one another and the support modules of this folder by name, and Spark's
Python workers (a local Connect server's too) import the functions a test module defines
by that module's name: so every such folder is on ``sys.path`` and on ``PYTHONPATH``, set
before the JVM starts (it hands its environment to the workers).

The suites pytest imports from their own folder stay off it: ``kafka/`` and ``flink/``
(their ``conftest.py`` and ``scenarios.py`` would shadow each other's) and the package
``beam/`` (imported as ``beam.*`` from ``tests/``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
OWN_FOLDERS = {"kafka", "flink", "beam", "data", "transcripts"}


def folders() -> list[str]:
    """``tests/``, this folder and every folder of test modules, but :data:`OWN_FOLDERS`."""
    found = {TESTS, Path(__file__).resolve().parent}
    found.update(
        path.parent
        for path in TESTS.rglob("test_*.py")
        if not OWN_FOLDERS & set(path.relative_to(TESTS).parts)
    )
    return [str(folder) for folder in sorted(found)]


def put_on_path() -> None:
    """:func:`folders` on this process's ``sys.path`` and its children's ``PYTHONPATH``."""
    paths = folders()
    sys.path[:0] = [path for path in paths if path not in sys.path]
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + [p for p in inherited if p not in paths])
