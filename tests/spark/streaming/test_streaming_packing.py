"""A stream's rows packed per key group before ``transformWithStateInPandas``
(:mod:`tidemark.spark.streaming.worker.packing`): every row of every batch comes back
once, in its key group, in its batch's order, converted as PySpark converts the rows
it hands a call (the session's time zone; a NaN and a null both NaN in a float column,
told apart by the lossless columns beside them, :mod:`tidemark.spark.protocol.lossless`). The same streams with
and without packing: ``tests/spark/protocol/test_values.py`` (every value case, both ways) and the
streaming suites (packed, the default)."""

from __future__ import annotations

import datetime as dt
import math
import random

import pandas as pd
import pyarrow as pa
import pytest

from tidemark.spark.protocol.columns import KEY_GROUP, KEY_GROUP_ROWS
from tidemark.spark.streaming.worker.packing import (
    Unpacking,
    arrow_to_pandas,
    pack_batches,
    unpacked_frames,
)

pytestmark = pytest.mark.skipif(arrow_to_pandas is None, reason="PySpark before 4.1")

KOLKATA = Unpacking(timezone="Asia/Kolkata", prefer_int_ext_dtype=False)
UTC = dt.timezone.utc


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    """Rows of (key group, key, ts, amount, when, note) as Spark's Arrow hands them."""
    schema = pa.schema(
        [
            (KEY_GROUP, pa.int32()),
            ("key", pa.string()),
            ("ts", pa.int64()),
            ("amount", pa.float64()),
            ("when", pa.timestamp("us", tz="Asia/Kolkata")),
            ("note", pa.binary()),
        ]
    )
    return pa.RecordBatch.from_pylist([dict(zip(schema.names, r)) for r in rows], schema)


def _rows(n: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    amounts = [math.nan, None, -0.0, 1.5]
    return [
        (
            rng.choice([0, 1, 2, 7]),
            rng.choice(["a", "b", None]),
            i,
            rng.choice(amounts),
            rng.choice([None, dt.datetime(2026, 3, 29, 1, 30, i % 60, tzinfo=UTC)]),
            rng.choice([None, b"\x00x"]),
        )
        for i in range(n)
    ]


def _spark_frame(rows: list[tuple]) -> pd.DataFrame:
    """The frame PySpark builds from ``rows`` for a call (its own conversion)."""
    table = pa.Table.from_batches([_batch(rows)])
    return pd.concat(arrow_to_pandas(table, timezone=KOLKATA.timezone), axis=1)


def _packed_rows(batches: list[pa.RecordBatch]) -> dict[int, list[pd.DataFrame]]:
    """Each key group's packed rows, as its calls get them (a frame of the two columns)."""
    calls: dict[int, list[pd.DataFrame]] = {}
    for packed in pack_batches(batches):
        assert packed.schema.names == [KEY_GROUP, KEY_GROUP_ROWS]
        for group, blob in zip(*packed.to_pydict().values(), strict=True):
            calls.setdefault(group, []).append(pd.DataFrame({"_1": [group], "_2": [blob]}))
    return calls


@pytest.mark.parametrize("seed", range(5))
def test_each_group_gets_its_rows_in_order_as_pyspark_converts_them(seed):
    rows = _rows(300, seed)
    batches = [_batch(rows[i : i + 70]) for i in range(0, len(rows), 70)]
    calls = _packed_rows(batches)
    assert set(calls) == {r[0] for r in rows}
    for group, frames in calls.items():
        (found,) = unpacked_frames(frames, KOLKATA)
        expected = _spark_frame([r for r in rows if r[0] == group])
        pd.testing.assert_frame_equal(found, expected)


def test_a_batch_of_one_group_is_one_packed_row_and_empty_batches_none():
    rows = [(3, "a", i, float(i), None, None) for i in range(5)]
    packed = list(pack_batches([_batch([]), _batch(rows), _batch([])]))
    assert [p.num_rows for p in packed] == [1]
    (frame,) = unpacked_frames([pd.DataFrame({"_2": packed[0].column(1).to_pylist()})], KOLKATA)
    assert frame["ts"].tolist() == list(range(5))


def test_a_call_without_packed_rows_has_no_frame():
    assert list(unpacked_frames([], KOLKATA)) == []


def test_timestamps_come_back_in_the_sessions_zone_as_pyspark_gives_them():
    instant = dt.datetime(2026, 11, 27, 0, 0, tzinfo=UTC)
    packed = next(pack_batches([_batch([(0, "a", 1, 1.0, instant, None)])]))
    (frame,) = unpacked_frames([pd.DataFrame({"_2": packed.column(1).to_pylist()})], KOLKATA)
    assert frame["when"].tolist() == [pd.Timestamp("2026-11-27 05:30:00")]
