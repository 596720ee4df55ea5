"""PySpark 4.0's and 4.1's ``applyInPandasWithState`` read each group's offsets as floats where
the state column has null rows; the worker's work-around (``worker/pyspark40.py``) gives
them back as ints. The column as Spark sends it: a struct whose children are null where
the row is."""

from __future__ import annotations

import inspect

import pyarrow as pa
import pytest

from tidemark.spark.streaming.worker.pyspark40 import needs_patch, patch


def _state_column() -> pa.ChunkedArray:
    children = [
        pa.array(["{}", "{}", None]),
        pa.array([b"", b"", None]),
        pa.array([None, None, None], pa.binary()),
        pa.array([0, 2, None], pa.int32()),
        pa.array([2, 1, None], pa.int32()),
        pa.array([True, True, None]),
    ]
    names = ["properties", "keyRowAsUnsafe", "object", "startOffset", "numRows", "isLastChunk"]
    mask = pa.array([False, False, True])
    return pa.chunked_array([pa.StructArray.from_arrays(children, names=names, mask=mask)])


@pytest.mark.skipif(not needs_patch(), reason="PySpark 4.0's and 4.1's serializer only")
def test_pyspark_40_and_41_read_the_offsets_as_ints_once_patched():
    from pyspark.sql.pandas.serializers import ApplyInPandasWithStateSerializer

    arguments = ["UTC", False, True, None, 10_000, False]
    if len(inspect.signature(ApplyInPandasWithStateSerializer).parameters) > 6:
        arguments.append(False)  # 4.1: int_to_decimal_coercion_enabled
    serializer = ApplyInPandasWithStateSerializer(*arguments)
    # 4.1 passes the column's index too
    index = (0,) if "idx" in inspect.signature(serializer.arrow_to_pandas).parameters else ()
    patch()
    patch()  # once only: a second call wraps nothing again
    wrapped = ApplyInPandasWithStateSerializer.arrow_to_pandas.__wrapped__
    assert not getattr(wrapped, "_tidemark_int_offsets", False)
    infos = list(serializer.arrow_to_pandas(_state_column(), *index))
    assert [(i["startOffset"], i["numRows"]) for i in infos[:2]] == [(0, 2), (2, 1)]
    assert all(type(i["startOffset"]) is int and type(i["numRows"]) is int for i in infos[:2])
    assert infos[2] is None


def test_only_pyspark_40_and_41_are_patched():
    versions = ("4.0.0", "4.0.5", "4.1.0", "4.1.4", "4.2.0", "4.3.0")
    assert [needs_patch(v) for v in versions] == [True, True, True, True, False, False]
