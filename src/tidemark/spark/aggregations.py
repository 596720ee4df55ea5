"""Flink's shorthand window aggregations on a field of Rows: sum, min, max, min_by, max_by.

As in Flink, ``sum``/``min``/``max`` replace only the field and keep the other fields of
the window's first element; ``min_by``/``max_by`` return a whole element (the first one
on ties).
"""

from __future__ import annotations

from typing import Any

from tidemark.functions import ReduceFunction

__all__ = ["Sum", "Min", "Max", "MinBy", "MaxBy"]


def _with_field(row: Any, index: int, value: Any) -> Any:
    """A copy of ``row`` with field ``index`` replaced (Rows are immutable tuples)."""
    values = list(row)
    values[index] = value
    fields = getattr(row, "__fields__", None)
    if fields is None:
        return type(row)(values)
    new = tuple.__new__(type(row), values)
    new.__dict__["__fields__"] = fields
    return new


class _FieldReduce(ReduceFunction):
    """A reduce over one named field of Rows; the field's position is looked up once."""

    def __init__(self, field: str):
        self.field = field
        self._index: int | None = None

    def index(self, row: Any) -> int:
        if self._index is None:
            fields = getattr(row, "__fields__", None)
            self._index = fields.index(self.field) if fields is not None else int(self.field)
        return self._index

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})"


_get = tuple.__getitem__  # Row.__getitem__ also takes names, at Python speed


class Sum(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        i = self._index if self._index is not None else self.index(value1)
        return _with_field(value1, i, _get(value1, i) + _get(value2, i))


class Min(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        i = self._index if self._index is not None else self.index(value1)
        return _with_field(value1, i, value2[i]) if value2[i] < value1[i] else value1


class Max(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        i = self._index if self._index is not None else self.index(value1)
        return _with_field(value1, i, value2[i]) if value2[i] > value1[i] else value1


class MinBy(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        i = self._index if self._index is not None else self.index(value1)
        return value2 if value2[i] < value1[i] else value1


class MaxBy(_FieldReduce):
    def reduce(self, value1: Any, value2: Any) -> Any:
        i = self._index if self._index is not None else self.index(value1)
        return value2 if value2[i] > value1[i] else value1
