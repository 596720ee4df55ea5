"""``aggregate_vectorized`` of a :class:`~tidemark.functions.VectorizedCombineFunction`
in BATCH: each input partition pre-aggregated where it is, only the partial numbers
shuffled.

Where the columnar path applies (:func:`tidemark.spark.batch.columnar.applies`: a keyed
BATCH window of tumbling or sliding event-time windows, each fired once at its end over
all its elements) and the function declares a partial step, the run is Spark's own
partial aggregation (as for ``avg``), with the user's ``partial`` and ``finish``:

1. **local**: every partition of the checked elements (``mapInArrow``, no shuffle, no
   Spark sort), in parts of at most ``spark.tidemark.batch.workerSortBytes`` of Arrow
   input (64m where it is 0): each element's window start(s) (sliding: one per window it is in), the
   elements grouped by (key, window start) in NumPy (a dense code per key, one
   ``argsort``), ``partial`` called once per group: one row ``(key..., window start,
   p_1..p_k)`` per group (the partials in double columns named after the function's
   ``partials``), and the task's figures row (elements in);
2. **shuffle** of those rows by key, into one partition per core (the partials are
   few: about one per window and input partition holding it);
3. **global**: each task groups its partials by (key, window start), calls ``finish``
   once per window with the parts' columns, and emits what the columnar path emits: one
   result row per window, its figures (the local rows' elements summed, so
   ``num_records_in`` counts the elements once) and a dropped row (0).

The function's promise (the result does not depend on how the values were split, nor
on the parts' order) makes this equal to the columnar path, which calls ``aggregate``
(``finish`` of the single part of all values) per window. The input checks (a null key
or timestamp, a timestamp whose windows overflow a long) are the SQL fast path's
(:func:`~tidemark.spark.batch.sql_plan.checked_elements`). A ``partial`` or ``finish``
that raises is a :class:`~tidemark.errors.UserFunctionError`, a wrong ``partial`` or
result a :class:`~tidemark.errors.WindowResultError`, each with the key and window. Set
``spark.tidemark.preAggregate=false`` (or either fast-path switch off) to run the
columnar path instead. A replay and a stream run the engine path. The guide:
``docs/concepts/columnar.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DoubleType, LongType, StringType, StructField, StructType

from tidemark.errors import UserFunctionError
from tidemark.functions import VectorizedCombineFunction, checked_partial
from tidemark.spark.batch import columnar, sql_plan
from tidemark.spark.batch.columnar import Plan
from tidemark.spark.batch.frames import ElementFrame, long_timestamp_column
from tidemark.spark.batch.run import engine_partitions
from tidemark.spark.plan import WindowOp
from tidemark.spark.protocol.columns import (
    MAIN,
    OUTPUT,
    SIDE,
    STATS_OUTPUT,
    TS,
    WINDOW_START,
    combined_schema,
    partial_column,
)
from tidemark.spark.protocol.figures import Figures
from tidemark.spark.runtime.confs import PRE_AGGREGATE, WORKER_SORT_BYTES
from tidemark.spark.runtime.session import session_cores
from tidemark.time import LONG_MAX
from tidemark.windows import TimeWindow

__all__ = ["applies", "run_preaggregated", "partial_columns", "CONF"]

CONF = PRE_AGGREGATE.name
_DENSE = 1 << 62  # group codes stay below this: no int64 overflow when combined


def applies(op: WindowOp, frame: ElementFrame, spark: Any) -> bool:
    """Whether ``op`` is pre-aggregated before the shuffle: the columnar path applies, the
    function declares a partial step, ``spark.tidemark.preAggregate`` is on."""
    if not columnar.applies(op, frame, spark):
        return False
    return op.function.combine is not None and PRE_AGGREGATE.enabled(spark)


def partial_columns(function: VectorizedCombineFunction) -> list[str]:
    """The shuffled columns of ``function``'s partials, named after its ``partials``."""
    return [partial_column(name) for name in function.partials]


def run_preaggregated(op: WindowOp, frame: ElementFrame) -> Any:
    """The combined frame of ``op`` (see :func:`applies`): local partials, the shuffle
    of the partials by key, the windows finished."""
    spark = frame.df.sparkSession
    assert op.key is not None
    keys = list(op.key.columns)
    checked = sql_plan.checked_elements(op, frame)
    time = long_timestamp_column(frame) or TS
    if time != TS:  # its checked copy (the checks run where the column is read)
        checked = checked.withColumn(time, F.col(TS)).drop(TS)
    fn = op.function
    selected = checked.select(*[F.col(f"`{c}`") for c in dict.fromkeys([*keys, time, *fn.fields])])
    local_schema = StructType(
        [
            StructField(OUTPUT, StringType(), False),
            *[StructField(k, selected.schema[k].dataType, True) for k in keys],
            StructField(WINDOW_START, LongType(), True),
            *[StructField(c, DoubleType(), True) for c in partial_columns(fn.combine)],
            StructField(SIDE, BinaryType(), True),
        ]
    )
    assigner: Any = op.assigner  # tumbling or sliding, checked by applies()
    layout = (assigner.size_ms, getattr(assigner, "slide_ms", assigner.size_ms))
    budget = WORKER_SORT_BYTES.read(spark) or WORKER_SORT_BYTES.default
    schema = combined_schema(op.output_schema)
    local_schema_arrow = columnar.arrow_schema(local_schema)
    local = Plan(
        fn, tuple(keys), time, *layout, assigner.offset_ms, local_schema_arrow, None, budget
    )
    final = replace(local, schema=columnar.arrow_schema(schema))
    parts = selected.mapInArrow(partial(_local_partials, local), local_schema)
    shuffled = parts.repartition(_global_partitions(spark), *[F.col(f"`{k}`") for k in keys])
    return shuffled.mapInArrow(partial(_finished_windows, final), schema)


def _global_partitions(spark: Any) -> int:
    """One global task per core (at most the keyed run's partitions): the partials are
    few (about one per window and input partition holding it), and each Python task
    costs ~0.1 s however little it does (8 tasks at 10M events: 1.7 s of their wall
    time, 0.6 s of CPU; ``benchmarks/README.md``)."""
    return max(1, min(engine_partitions(spark), session_cores(spark)))


# ------------------------------------------------------------------ the local step


def _local_partials(plan: Plan, batches: Any) -> Iterator[pa.RecordBatch]:
    """One input partition's partials, a part of at most ``plan.budget`` bytes at a
    time, then its figures row."""
    rows = 0
    held: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        rows += batch.num_rows
        held.append(batch)
        size += batch.nbytes
        if size >= plan.budget:
            yield _partials(plan, pa.Table.from_batches(held))
            held, size = [], 0
    if held:
        yield _partials(plan, pa.Table.from_batches(held))
    yield _figures_row(plan.schema, rows)


def _partials(plan: Plan, table: pa.Table) -> pa.RecordBatch:
    """One row of partials per (key, window start) of ``table``'s elements."""
    ts = np.asarray(table.column(plan.time_column).to_numpy(), dtype=np.int64)
    rows, starts = _element_windows(plan, ts)
    codes = _key_codes(table, plan.keys)
    order, bounds = _groups(codes if rows is None else codes[rows], starts)
    picked = order if rows is None else rows[order]  # each grouped element's table row
    fn = plan.window_function
    arrays = [columnar.float64_values(table.column(f))[picked] for f in fn.fields]
    firsts = picked[bounds[:-1]]
    group_starts = starts[order[bounds[:-1]]]
    parts = [
        _partial(plan, table, arrays, lo, hi, first, start)
        for lo, hi, first, start in zip(
            bounds[:-1].tolist(), bounds[1:].tolist(), firsts.tolist(), group_starts.tolist()
        )
    ]
    numbers = np.array(parts, dtype=np.float64).reshape(len(parts), len(_combine(plan).partials))
    return _partials_batch(plan, table, firsts, group_starts, numbers)


def _combine(plan: Plan) -> VectorizedCombineFunction:
    combine = plan.window_function.combine
    assert combine is not None  # applies() checked it
    return combine


def _element_windows(plan: Plan, ts: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """The start of each (element, window) pair: ``(None, starts)`` for tumbling
    windows (one each, in element order), else the pairs' element rows and starts."""
    last = ts - np.mod(ts - plan.offset_ms, plan.slide_ms)
    if plan.slide_ms == plan.size_ms:
        return None, last
    count = -(-plan.size_ms // plan.slide_ms)
    candidates = last[:, None] - np.arange(count, dtype=np.int64) * plan.slide_ms
    held = candidates > (ts - plan.size_ms)[:, None]
    rows = np.nonzero(held)[0]
    return rows, candidates[held]


def _key_codes(table: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    """A code per row, equal where the rows' keys are equal (keys are never null here,
    and never floats or nested: :func:`tidemark.spark.batch.columnar.applies`)."""
    codes = np.zeros(table.num_rows, dtype=np.int64)
    bound = 1
    for key in keys:
        encoded = pc.dictionary_encode(table.column(key).combine_chunks())
        column = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        codes, bound = _paired(codes, bound, column, len(encoded.dictionary))
    return codes


def _paired(a: np.ndarray, a_bound: int, b: np.ndarray, b_bound: int) -> tuple[np.ndarray, int]:
    """One code per pair of codes (``a`` below ``a_bound``, ``b`` below ``b_bound``)."""
    if a_bound * b_bound >= _DENSE:  # renumber both densely first
        a_unique, a = np.unique(a, return_inverse=True)
        b_unique, b = np.unique(b, return_inverse=True)
        a_bound, b_bound = len(a_unique), len(b_unique)
    return a * b_bound + b, a_bound * b_bound


def _groups(codes: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order that puts each (key code, window start) together, and the bounds of
    its runs (``bounds[i]:bounds[i + 1]`` of the order is group i)."""
    if not len(starts):
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    windows = starts - starts.min()
    span = int(windows.max()) + 1
    group, _ = _paired(codes, int(codes.max()) + 1, windows, span)
    order = np.argsort(group, kind="stable")
    ordered = group[order]
    change = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    return order, np.concatenate(([0], change, [len(order)])).astype(np.int64)


def _partial(
    plan: Plan,
    table: pa.Table,
    arrays: list[np.ndarray],
    lo: int,
    hi: int,
    first: int,
    start: int,
) -> tuple[float, ...]:
    """The checked partial of one group (rows ``lo:hi`` of ``arrays``)."""
    returned, where = _called(plan, "partial", table, [a[lo:hi] for a in arrays], first, start)
    return checked_partial(_combine(plan), returned, where)


def _called(
    plan: Plan, method: str, table: pa.Table, arrays: list[np.ndarray], first: int, start: int
) -> tuple[Any, Any]:
    """The combine function's ``method`` on ``arrays`` and where it was called (key and
    window, of ``table``'s row ``first``, found only when asked); its errors with them."""
    combine = _combine(plan)

    def where() -> tuple[Any, TimeWindow]:
        return columnar.key_of(plan, table, first), TimeWindow(start, start + plan.size_ms)

    try:
        return getattr(combine, method)(*arrays), where
    except Exception as exc:
        what = f"{type(combine).__qualname__}.{method}"
        raise UserFunctionError(what, *where(), LONG_MAX, exc) from exc


def _partials_batch(
    plan: Plan, table: pa.Table, firsts: np.ndarray, starts: np.ndarray, numbers: np.ndarray
) -> pa.RecordBatch:
    schema = plan.schema
    m = len(firsts)
    columns: dict[str, Any] = {OUTPUT: pa.array([MAIN] * m, pa.string())}
    taken = pa.array(firsts, pa.int64())
    for key in plan.keys:
        columns[key] = table.column(key).take(taken).combine_chunks().cast(schema.field(key).type)
    columns[WINDOW_START] = pa.array(starts, pa.int64())
    for i, name in enumerate(partial_columns(_combine(plan))):
        columns[name] = pa.array(numbers[:, i], pa.float64())
    columns[SIDE] = pa.nulls(m, pa.binary())
    return pa.RecordBatch.from_arrays([columns[n] for n in schema.names], schema=schema)


def _figures_row(schema: pa.Schema, rows: int) -> pa.RecordBatch:
    """The local task's figures: the elements it read (its partials count none)."""
    columns = {name: pa.nulls(1, schema.field(name).type) for name in schema.names}
    columns[OUTPUT] = pa.array([STATS_OUTPUT], pa.string())
    columns[SIDE] = pa.array([Figures(num_records_in=rows).encode()], pa.binary())
    return pa.RecordBatch.from_arrays([columns[n] for n in schema.names], schema=schema)


# ------------------------------------------------------------------ the global step


def _finished_windows(plan: Plan, batches: Any) -> Iterator[pa.RecordBatch]:
    """One task's windows finished from their partials, its figures and dropped rows."""
    collected = [b for b in batches if b.num_rows]
    table = pa.Table.from_batches(collected) if collected else None
    records_in = out = 0
    if table is not None:
        is_main = pc.equal(table.column(OUTPUT), MAIN)
        for side in table.filter(pc.invert(is_main)).column(SIDE).to_pylist():
            records_in += json.loads(side)["num_records_in"]
        parts = table.filter(is_main)
        if parts.num_rows:
            result = _windows(plan, parts)
            out = result.num_rows
            yield result
    figures = Figures(num_records_in=records_in, num_records_out=out, watermark_ms=LONG_MAX)
    yield columnar.meta_rows(plan.schema, figures)


def _windows(plan: Plan, parts: pa.Table) -> pa.RecordBatch:
    """One result per (key, window start) of ``parts``: ``finish`` of its partials."""
    starts = np.asarray(parts.column(WINDOW_START).to_numpy(), dtype=np.int64)
    order, bounds = _groups(_key_codes(parts, plan.keys), starts)
    combine = _combine(plan)
    arrays = [
        np.asarray(parts.column(c).to_numpy(), dtype=np.float64)[order]
        for c in partial_columns(combine)
    ]
    firsts = order[bounds[:-1]]
    window_starts = starts[firsts]
    values = [
        _finish(plan, parts, arrays, lo, hi, first, start)
        for lo, hi, first, start in zip(
            bounds[:-1].tolist(), bounds[1:].tolist(), firsts.tolist(), window_starts.tolist()
        )
    ]
    return columnar.result_batch(plan, parts, firsts, window_starts, values)


def _finish(
    plan: Plan,
    parts: pa.Table,
    arrays: list[np.ndarray],
    lo: int,
    hi: int,
    first: int,
    start: int,
) -> Any:
    """The checked value of one window from its parts (rows ``lo:hi`` of ``arrays``)."""
    value, where = _called(plan, "finish", parts, [a[lo:hi] for a in arrays], first, start)
    return columnar.checked_value(plan.window_function, value, where)
