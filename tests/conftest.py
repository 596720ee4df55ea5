"""Shared fixtures: one local SparkSession for the whole test run."""

from __future__ import annotations

import gc
import os
import sys
import warnings

import pytest
from search_path import put_on_path  # tests/support, on pytest's pythonpath

warnings.filterwarnings("ignore", message=".*PySpark does not yet fully support pandas.*")

# Spark's Python workers import the functions tests define by module name: put every
# folder of test modules on their path (the JVM passes its environment on to the
# workers), and on this process's (tests import one another and tests/support by name).
put_on_path()


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by every Spark test (start-up is paid once)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from tidemark.spark.runtime.session import get_spark

    # the deltas state layout (the default) with a compaction threshold small enough
    # that the tests compact too
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.tidemark.streaming.stateCompactBytes": "2048",
    }
    # `make test-row`: every streaming test through the row state layout
    layout = os.environ.get("TIDEMARK_TEST_STATE_LAYOUT")
    if layout:
        conf["spark.tidemark.streaming.stateLayout"] = layout
    session = get_spark(master="local[2]", app_name="tidemark-tests", conf=conf)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _collect_garbage_between_tests(request: pytest.FixtureRequest):
    """Collect a Spark test's cyclic garbage when it ends, not later in another test's
    Py4J call: freeing a Java object's proxy sends the JVM a command, and one sent from
    a collection that runs while a Py4J answer is being read fails that call ("reentrant
    call inside BufferedReader"), seen once in a full run."""
    yield
    if request.node.get_closest_marker("spark") is not None:
        gc.collect()


@pytest.fixture(autouse=True)
def _stop_queries_left_running(request: pytest.FixtureRequest):
    """Stop the streaming queries a test leaves running (one that failed before its own
    ``stop``, or a query started where a refusal was expected): left running, they fail
    every later test that asserts ``spark.streams.active == []``, and take the cores."""
    yield
    if "spark" not in request.fixturenames:
        return
    for query in request.getfixturevalue("spark").streams.active:
        query.stop()
