"""The Rows handed to functions on Spark (pyspark Rows in every respect, built cheaply),
and the shorthand aggregations reading their fields."""

from __future__ import annotations

import pickle
from functools import reduce

import pyarrow as pa
import pytest
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import Row

from tidemark.functions import ReduceFunction
from tidemark.spark.aggregations import Max, MaxBy, Min, MinBy, Sum
from tidemark.spark.protocol.codec import RowResultReduce, as_tidemark_row, row_type_of
from tidemark.spark.protocol.column_values import arrow_rows_and_columns


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


@pytest.mark.parametrize(
    "aggregation, expected",
    [
        (Sum, ("a", 12, 1)),
        (Min, ("a", 3, 1)),
        (Max, ("a", 9, 1)),
        (MinBy, ("a", 3, 2)),
        (MaxBy, ("a", 9, 1)),
    ],
)
def test_shorthand_aggregations_read_any_row_or_tuple(aggregation, expected):
    """The field is read by name on tidemark's Rows, by position on plain Rows (whose
    attributes are slow) and tuples, and through Row.__getitem__ for names Rows own."""
    values = [("a", 9, 1), ("a", 3, 2), ("a", None, 3)]
    names = ["user", "count", "ts"]
    shapes = {
        "tidemark": (_rows(names, *zip(*values)), "count"),
        "tidemark attribute": (_rows(["user", "n", "ts"], *zip(*values)), "n"),
        "plain": ([Row(user=u, count=c, ts=t) for u, c, t in values], "count"),
        "tuple": (values, "1"),
    }
    for shape, (elements, field) in shapes.items():
        function = aggregation(field)
        if isinstance(function, ReduceFunction):
            result = reduce(function.reduce, elements)
        else:
            accumulator = function.create_accumulator()
            for element in elements:
                accumulator = function.add(element, accumulator)
            result = function.get_result(accumulator)
        assert tuple(result) == expected, shape
        assert type(result) is type(elements[0]), shape
        if shape != "tuple":
            assert result.__fields__ == elements[0].__fields__, shape


def test_a_reduce_function_gets_its_plain_row_results_back_as_equal_tidemark_rows():
    seen = []

    def add(a, b):
        seen.append(a)
        return Row(user=a.user, amount=a.amount + b.amount)

    elements = _rows(["user", "amount"], ["a", "a", "a"], [1, 2, 3])
    function = RowResultReduce(add)
    result = reduce(function.reduce, elements)
    assert result == Row(user="a", amount=6) and result.amount == 6
    assert type(result) is type(elements[0])  # names on the class, attributes at C speed
    assert seen[1] == Row(user="a", amount=3) and type(seen[1]) is type(elements[0])
    assert pickle.loads(pickle.dumps(result)) == Row(user="a", amount=6)
    # other results pass through as they are
    assert RowResultReduce(lambda a, b: (a, b)).reduce(1, 2) == (1, 2)
    assert RowResultReduce(lambda a, b: Row("x", "y")).reduce(1, 2) == Row("x", "y")
    assert as_tidemark_row(Row(b=1, a=2)).__fields__ == ["b", "a"]


@pytest.mark.parametrize("aggregation", [Sum, Min, Max], ids=["sum", "min", "max"])
def test_shorthand_result_from_an_accumulator_restored_in_a_fresh_function(aggregation):
    # Streaming restores a window's accumulator from state into a new function object
    # that has seen no element in this process: get_result must not rely on add().
    row_type = Row("k", "v")
    first = aggregation("v")
    acc = first.add(row_type("a", 4), first.create_accumulator())
    acc = first.add(row_type("a", 7), acc)
    restored = pickle.loads(pickle.dumps(acc))
    fresh = pickle.loads(pickle.dumps(aggregation("v")))
    assert fresh.get_result(restored) == first.get_result(acc)


def test_a_null_result_is_a_row_of_nulls():
    # Flink's null record: a reduce whose evictor removed every element (TimeEvictor(0))
    from tidemark.spark.protocol.codec import result_tuple

    assert result_tuple(None, ["key", "v", "ts"]) == (None, None, None)


@pytest.mark.parametrize("kind", [Sum, Min, Max], ids=["sum", "min", "max"])
def test_shorthand_over_a_window_emptied_by_an_evictor_is_flinks_null_record(kind):
    # Found by the differential suite: TimeEvictor(0) removes every element (cutoff
    # max_ts - 0, `<=`); Flink's sum/min/max reduce over nothing and emit null, where the
    # accumulator's get_result failed reading a field of no element.
    import tidemark as tm
    from tidemark.testing import WindowOperatorHarness

    h = WindowOperatorHarness(
        tm.TumblingEventTimeWindows.of(10),
        kind("v"),
        key_selector=lambda r: r.key,
        evictor=tm.TimeEvictor.of(0),
    )
    h.process_element(Row(key="a", v=1), 3)
    h.process_element(Row(key="a", v=2), 3)
    h.process_watermark(9)
    assert h.output() == [(None, 9)]
