"""A stream's rows packed per key group before the shuffle, for the deltas layout.

``transformWithStateInPandas`` (the deltas layout's operator) hands a Python worker its
rows one by one: PySpark turns each Arrow batch into pandas, iterates it row by row to
group the rows by key and builds a pandas frame again from the rows (several
microseconds a row, most of a call's time at 100,000 rows a micro-batch). Packed, that
loop sees a few rows per key group instead:

- :func:`pack_batches` is a ``mapInArrow`` function over the key groups' input (every
  column, the key group's included): each Arrow batch's rows, stably sorted by key
  group, become one row per key group and batch, ``__tm_key_group`` and
  ``__tm_key_group_rows`` (the rows as an Arrow IPC stream). The rows of one key group keep
  their order, as Spark's shuffle would keep it.
- :func:`unpacked_frames` in the key group's call turns each packed row back into the
  pandas frame PySpark would have built from the same rows (the same Arrow-to-pandas
  conversion, with the session's time zone), so the call reads the same values.

Where it runs: :mod:`tidemark.spark.streaming.driver.packing`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.spark.protocol.columns import KEY_GROUP, KEY_GROUP_ROWS

__all__ = ["Unpacking", "pack_batches", "unpacked_frames", "arrow_to_pandas"]


def _converter() -> Any:
    """PySpark's own Arrow-to-pandas conversion of a table's columns, or None."""
    try:
        from pyspark.sql.conversion import ArrowBatchTransformer
    except ImportError:  # PySpark before 4.1: its converter has another name
        return None
    return ArrowBatchTransformer.to_pandas


arrow_to_pandas = _converter()
"""None where this PySpark converts otherwise: the rows are then not packed."""


@dataclass(frozen=True)
class Unpacking:
    """How a call turns a packed row into pandas: PySpark's settings for its workers."""

    timezone: str
    prefer_int_ext_dtype: bool


def pack_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: each batch's rows as one row per key group (see the docstring)."""
    for batch in batches:
        if batch.num_rows:
            yield _packed(batch)


def _packed(batch: pa.RecordBatch) -> pa.RecordBatch:
    groups = batch.column(batch.schema.get_field_index(KEY_GROUP))
    order = pc.sort_indices(groups)  # stable: a group's rows keep their order
    ordered = batch.take(order)
    grouped = ordered.column(batch.schema.get_field_index(KEY_GROUP))
    bounds = _run_bounds(grouped)
    keys, blobs = [], []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        keys.append(grouped[start])
        blobs.append(_ipc(ordered.slice(start, end - start)))
    key_column = pa.array([k.as_py() for k in keys], grouped.type)
    return pa.RecordBatch.from_arrays(
        [key_column, pa.array(blobs, pa.binary())], [KEY_GROUP, KEY_GROUP_ROWS]
    )


def _run_bounds(column: pa.Array) -> list[int]:
    """Where each run of equal (non-null) key groups starts, and the end."""
    n = len(column)
    if n == 1:
        return [0, 1]
    changes = pc.fill_null(pc.not_equal(column.slice(1), column.slice(0, n - 1)), True)
    starts = pc.indices_nonzero(changes).to_pylist()
    return [0, *(s + 1 for s in starts), n]


def _ipc(rows: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_batch(rows)
    return sink.getvalue().to_pybytes()


def unpacked_frames(frames: Iterable[pd.DataFrame], unpacking: Unpacking) -> Iterator[pd.DataFrame]:
    """The rows PySpark would have handed the call for the packed rows of ``frames``, as
    one frame (converted once: a conversion costs per column as well as per row)."""
    tables = [
        pa.ipc.open_stream(blob).read_all()
        for frame in frames
        for blob in frame.iloc[:, -1]  # by position: PySpark renames "__tm_key_group_rows"
    ]
    if not tables:
        return
    columns = arrow_to_pandas(
        pa.concat_tables(tables),
        timezone=unpacking.timezone,
        prefer_int_ext_dtype=unpacking.prefer_int_ext_dtype,
    )
    yield pd.concat(columns, axis=1)
