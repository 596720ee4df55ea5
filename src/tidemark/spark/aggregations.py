"""Flink's shorthand window aggregations on a field of Rows: sum, min, max, min_by, max_by.

As in Flink, ``sum``/``min``/``max`` replace only the field and keep the other fields of
the window's first element; ``min_by``/``max_by`` return a whole element (the first one
on ties).
"""

from __future__ import annotations

from typing import Any

from tidemark.functions import ReduceFunction

__all__ = ["Sum", "Min", "Max", "MinBy", "MaxBy"]


def _with_field(row: Any, field: str, value: Any) -> Any:
    from pyspark.sql import Row

    values = row.asDict()
    values[field] = value
    return Row(**values)


class _FieldReduce(ReduceFunction):
    def __init__(self, field: str):
        self.field = field

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


class Sum(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        return _with_field(value1, self.field, value1[self.field] + value2[self.field])


class Min(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        if value2[self.field] < value1[self.field]:
            return _with_field(value1, self.field, value2[self.field])
        return value1


class Max(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        if value2[self.field] > value1[self.field]:
            return _with_field(value1, self.field, value2[self.field])
        return value1


class MinBy(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        return value2 if value2[self.field] < value1[self.field] else value1


class MaxBy(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        return value2 if value2[self.field] > value1[self.field] else value1
