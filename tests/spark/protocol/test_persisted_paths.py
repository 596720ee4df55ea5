"""Module paths that state rows persist still load (issue 49, the layers' move).

A streaming query's state rows hold Python values pickled by reference: a key's Rows as
``tidemark.spark.codec.restored_row`` (tests/data/checkpoint_pyspark_4_0_* and
checkpoint_v0_2_panes hold it) or ``rows_from_columns``, a NaN key as ``_nan_key``, and a
release-0.1 row's keys as ``tidemark.spark.streaming.state.StoredKey``. A restart of such
a checkpoint unpickles them by those paths, so each path keeps its names wherever their
code moved (the restarts themselves: test_streaming_restart_compat.py); and a NaN key is
still written by its old path, its bytes being hashed into its key group (that byte for
byte: test_values.py).
"""

from __future__ import annotations

import importlib
import math
import pickle

import pytest


def _call(module: str, name: str, *args: str) -> bytes:
    """A protocol-0 pickle calling ``module.name(*args)``, args given as pickle source."""
    return f"c{module}\n{name}\n({''.join(args)}tR.".encode()


ROW_NAMES = "(S'k'\nS'v'\nt"


def test_a_row_pickled_by_its_old_path_loads_as_the_same_row():
    row = pickle.loads(_call("tidemark.spark.codec", "restored_row", ROW_NAMES, "(S'a'\nI5\nt"))
    assert (row.k, row.v) == ("a", 5)
    assert type(row).__name__ == "Row"


def test_rows_pickled_as_columns_by_their_old_path_load():
    columns = "((S'a'\nS'b'\ntp0\n(I1\nI2\ntp1\nl"  # [("a", "b"), (1, 2)]
    rows = pickle.loads(_call("tidemark.spark.codec", "rows_from_columns", ROW_NAMES, columns))
    assert [(r.k, r.v) for r in rows] == [("a", 1), ("b", 2)]


def test_a_nan_key_pickled_by_its_old_path_is_the_one_nan_key():
    first, second = (pickle.loads(_call("tidemark.spark.codec", "_nan_key")) for _ in range(2))
    assert math.isnan(first) and first is second and first == float("nan")


@pytest.mark.parametrize(
    "module, name",
    [
        ("tidemark.spark.codec", "restored_row"),
        ("tidemark.spark.codec", "rows_from_columns"),
        ("tidemark.spark.streaming.state", "StoredKey"),
    ],
)
def test_each_persisted_path_names_the_code_that_runs(module, name):
    """The old path holds the very object the code uses, not a copy."""
    old = getattr(importlib.import_module(module), name)
    home = importlib.import_module(old.__module__)
    assert getattr(home, old.__qualname__) is old
    assert old.__module__ != module
