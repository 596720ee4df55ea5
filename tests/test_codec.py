"""The Rows handed to functions on Spark: pyspark Rows in every respect, built cheaply."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import Row

from tidemark.spark.codec import arrow_rows_and_columns, row_type_of


def _rows(names, *values):
    return arrow_rows_and_columns(
        pa.record_batch([pa.array(v) for v in values], names=names), names
    )[0]


def test_rows_read_fields_by_attribute_name_and_position():
    (row,) = _rows(["user", "amount", "ts"], ["a"], [5], [100])
    assert isinstance(row, Row)
    assert (row.user, row.amount, row.ts) == ("a", 5, 100)
    assert (row["amount"], row[1], row[-1], row[:2]) == (5, 5, 100, ("a", 5))
    assert row == Row(user="a", amount=5, ts=100)
    assert row.asDict() == {"user": "a", "amount": 5, "ts": 100}
    assert "amount" in row
    assert repr(row) == "Row(user='a', amount=5, ts=100)"


def test_rows_pickle_as_plain_rows():
    (row,) = _rows(["user", "amount"], ["a"], [5])
    back = pickle.loads(pickle.dumps(row))
    assert type(back) is Row
    assert back == row and back.amount == 5


def test_fields_named_like_row_methods_stay_methods():
    (row,) = _rows(["count", "index", "my field", "x"], [3], [4], [5], [6])
    assert row.count(3) == 1  # tuple.count, as on every Row
    assert row.index(4) == 1
    assert row["count"] == 3 and row["my field"] == 5 and row.x == 6


def test_fields_are_read_only_as_on_a_row():
    row = tuple.__new__(row_type_of(("user", "amount")), ("a", 5))
    with pytest.raises(PySparkRuntimeError, match="READ_ONLY"):
        row.amount = 6
    with pytest.raises(AttributeError):
        row.other  # noqa: B018
    assert row.amount == 5
