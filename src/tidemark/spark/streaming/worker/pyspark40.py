"""A work-around for PySpark 4.0's and 4.1's ``applyInPandasWithState`` (the row state
layout).

PySpark 4.0 and 4.1 (measured on 4.0.4 and 4.1.3) read where each group's rows lie in an Arrow batch (``startOffset``,
``numRows`` of the batch's state column) through its pandas conversion, which gives
those int fields as floats where the state column has null rows, as it has in every
batch with more rows than groups (measured with pyarrow 26.0.1, pandas 2.3.3);
``RecordBatch.slice`` then refuses them (``TypeError: 'float' object cannot be
interpreted as an integer``) and every micro-batch fails, for any
``applyInPandasWithState`` function, tidemark's or not. PySpark 4.2 reads them
otherwise. Where the running PySpark is 4.0 or 4.1, :func:`patch` wraps that conversion
so the two fields come back as ints; it runs when the worker loads the window's function
(:mod:`.bindings`), before Spark reads a batch.
"""

from __future__ import annotations

import functools
from typing import Any

import pyspark

__all__ = ["needs_patch", "patch", "int_offsets"]

_OFFSETS = ("startOffset", "numRows")


def needs_patch(version: str = pyspark.__version__) -> bool:
    """Whether this PySpark reads the offsets as floats (4.0.x, 4.1.x).

    >>> [needs_patch(v) for v in ("4.0.4", "4.1.3", "4.2.0")]
    [True, True, False]
    """
    return version.split(".")[:2] in (["4", "0"], ["4", "1"])


def int_offsets(info: Any) -> Any:
    """A group's state information with its offsets as ints (a null row as it is).

    >>> int_offsets({"startOffset": 2.0, "numRows": 3.0, "isLastChunk": True})
    {'startOffset': 2, 'numRows': 3, 'isLastChunk': True}
    >>> int_offsets(None) is None
    True
    """
    if not info:
        return info
    return {**info, **{name: int(info[name]) for name in _OFFSETS if info.get(name) is not None}}


def patch() -> None:
    """Wrap PySpark 4.0's and 4.1's conversion of the state column (once; elsewhere
    nothing)."""
    if not needs_patch():
        return
    from pyspark.sql.pandas.serializers import ApplyInPandasWithStateSerializer as serializer

    # 4.0's and 4.1's serializer has the method; 4.2's stubs do not
    original = serializer.arrow_to_pandas  # type: ignore[attr-defined]
    if getattr(original, "_tidemark_int_offsets", False):
        return

    @functools.wraps(original)
    def arrow_to_pandas(self: Any, column: Any, *args: Any, **kwargs: Any) -> Any:
        import pyarrow as pa

        converted = original(self, column, *args, **kwargs)
        fields = {f.name for f in column.type} if pa.types.is_struct(column.type) else set()
        if not fields.issuperset(_OFFSETS):
            return converted
        return converted.map(int_offsets)

    arrow_to_pandas._tidemark_int_offsets = True  # type: ignore[attr-defined]
    serializer.arrow_to_pandas = arrow_to_pandas  # type: ignore[attr-defined,method-assign,assignment]
