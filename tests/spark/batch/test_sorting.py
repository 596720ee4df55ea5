"""Sorting a BATCH partition in the worker: in memory, or in spilled runs merged, the
order is Spark's (ascending, nulls first), and the memory budget holds."""

from __future__ import annotations

import datetime as dt
import math
import os
import random
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    TimestampType,
)

from tidemark.spark.batch import sorting
from tidemark.spark.batch.sorting import budget_bytes, sortable, sorted_batches

COLUMNS = ["key", "ts", "tag", "blob", "amount", "day", "flag", "price"]


def _table(rng: random.Random, n: int) -> pa.Table:
    """Few distinct values per column, so ties fall through to the later columns;
    nulls in every column but the key; strings beyond ASCII."""

    def maybe(value):
        return None if rng.random() < 0.1 else value

    tags = ["", "a", "b", "ab", "é", "z", "\u4e2d", "\U0001f600"]
    return pa.table(
        {
            "key": [rng.choice(["k1", "k2", "k3"]) for _ in range(n)],
            "ts": [maybe(rng.randrange(-5, 5)) for _ in range(n)],
            "tag": [maybe(rng.choice(tags)) for _ in range(n)],
            "blob": [maybe(bytes([rng.randrange(3)] * rng.randrange(3))) for _ in range(n)],
            "amount": pa.array(
                [maybe(Decimal(rng.randrange(-3, 3)) / 2) for _ in range(n)], pa.decimal128(10, 2)
            ),
            "day": [
                maybe(dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(3))) for _ in range(n)
            ],
            "flag": [maybe(rng.random() < 0.5) for _ in range(n)],
            "price": [
                maybe(rng.choice([float("nan"), -0.0, 0.0, 1.5, -2.0, float("inf"), float("-inf")]))
                for _ in range(n)
            ],
        }
    )


def _spark_order(rows: list[dict]) -> list[tuple]:
    """Spark's ascending, nulls-first order, in plain Python (strings by UTF-8 bytes)."""

    def key(row):
        values = []
        for c in COLUMNS:
            v = row[c]
            if isinstance(v, str):
                v = v.encode()
            elif isinstance(v, float):
                v = (1, 0.0) if math.isnan(v) else (0, v)
            values.append((v is not None, v if v is not None else 0))
        return values

    return [_comparable(r) for r in sorted(rows, key=key)]


def _comparable(row: dict) -> tuple:
    """The row's values, with NaN as a string (NaN != NaN would fail equal rows)."""
    return tuple(
        "NaN" if isinstance(v, float) and math.isnan(v) else v for v in (row[c] for c in COLUMNS)
    )


@pytest.mark.parametrize("budget", [1 << 30, 2_000, 1])
@pytest.mark.parametrize("seed", range(4))
def test_sorted_batches_are_in_spark_order_in_memory_or_spilled(
    tmp_path, monkeypatch, seed, budget
):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    rng = random.Random(seed)
    table = _table(rng, rng.randrange(1, 400))
    batches = table.to_batches(max_chunksize=rng.randrange(1, 50))
    out = list(sorted_batches(iter(batches), COLUMNS, budget, rows_per_batch=37))
    got = [_comparable(r) for b in out for r in b.to_pylist()]
    assert got == _spark_order(table.to_pylist())
    assert all(b.num_rows <= 37 for b in out[:1]) or budget < 1 << 30
    assert list(tmp_path.iterdir()) == []  # spilled runs are removed


def test_a_partition_over_budget_is_merged_from_spilled_runs(tmp_path, monkeypatch):
    spilled = []
    real_spill = sorting._spill

    def spy(table, spill_dir, index, rows):
        spilled.append(table.num_rows)
        return real_spill(table, spill_dir, index, rows)

    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    monkeypatch.setattr(sorting, "_spill", spy)
    table = _table(random.Random(7), 1010)
    budget = table.nbytes // 5
    out = list(sorted_batches(iter(table.to_batches(max_chunksize=50)), COLUMNS, budget))
    assert len(spilled) >= 4 and sum(spilled) < 1010  # the last run stays in memory
    assert sum(b.num_rows for b in out) == 1010
    got = [_comparable(r) for b in out for r in b.to_pylist()]
    assert got == _spark_order(table.to_pylist())


def test_nothing_in_nothing_out():
    assert list(sorted_batches(iter([]), ["key"], 10)) == []


def test_only_types_arrow_orders_as_spark_are_sorted_in_the_worker():
    assert sortable(LongType()) and sortable(StringType()) and sortable(TimestampType())
    assert sortable(DoubleType())  # NaN sorted after every number, as in Spark
    assert not sortable(ArrayType(LongType())) and not sortable(MapType(StringType(), LongType()))


def test_the_budget_conf_takes_bytes_with_a_unit():
    assert budget_bytes("256m") == 256 << 20 and budget_bytes(4096) == 4096
    assert budget_bytes("1G") == 1 << 30 and budget_bytes("0") == 0
    with pytest.raises(ValueError, match="workerSortBytes.*'lots'"):
        budget_bytes("lots")


def test_spill_files_go_to_sparks_local_dir(tmp_path, monkeypatch):
    seen = []
    real = sorting._spill
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path},/elsewhere")
    monkeypatch.setattr(sorting, "_spill", lambda t, d, i, r: seen.append(d) or real(t, d, i, r))
    table = _table(random.Random(1), 100)
    list(sorted_batches(iter(table.to_batches(max_chunksize=10)), COLUMNS, 1))
    assert seen and all(os.path.dirname(d) == str(tmp_path) for d in seen)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("budget_batches", [1000, 3])
def test_nan_sorts_after_every_number_and_nulls_first_merged_or_not(seed, budget_batches):
    rng = random.Random(seed)
    kinds = [float("nan"), None, 2.0, float("inf"), -0.0, float("-inf"), 0.0, 1.0]
    values = [rng.choice(kinds) for _ in range(200)]
    table = pa.table({"key": ["k"] * 200, "price": pa.array(values, pa.float64())})
    batches = table.to_batches(max_chunksize=7)
    budget = batches[0].nbytes * budget_batches  # runs of 21 rows, read 2 rows at a time
    out = list(sorted_batches(iter(batches), ["key", "price"], budget, rows_per_batch=2))
    got = [_spark_float(v) for b in out for v in b.column("price").to_pylist()]
    assert got == sorted(map(_spark_float, values), key=lambda v: (v is not None, v))


def _spark_float(v):
    """Spark's order of a double, as a comparable value: null, numbers, NaN last."""
    if v is None:
        return None
    return (1, 0.0) if math.isnan(v) else (0, v + 0.0)  # -0.0 == 0.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "times",
    [
        pa.array(range(-5, 5), pa.int64()),  # few values: ties on (key, ts) go by the rest
        pa.array([-(2**31), 2**31 - 1, 0], pa.int32()),  # an int32 span needing 32 bits
        pa.array([-(2**63), 2**63 - 1, 0], pa.int64()),  # too wide to pack with the key
    ],
)
def test_a_key_and_time_packed_in_one_integer_keep_sparks_order(tmp_path, monkeypatch, seed, times):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    packed = []
    real = sorting._packed_order
    monkeypatch.setattr(sorting, "_packed_order", lambda a: packed.append(real(a)) or packed[-1])
    rng = random.Random(seed)
    table = _table(rng, 300)
    stamps = pa.array([rng.choice(times.to_pylist()) for _ in range(300)], times.type)
    table = table.set_column(COLUMNS.index("ts"), "ts", stamps)
    out = list(sorted_batches(iter(table.to_batches(max_chunksize=40)), COLUMNS, 1 << 30))
    got = [_comparable(r) for b in out for r in b.to_pylist()]
    assert got == _spark_order(table.to_pylist())
    wide = times.type == pa.int64() and times.to_pylist()[0] == -(2**63)
    assert [order is None for order in packed] == [wide]  # packed unless too wide
