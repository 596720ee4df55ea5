"""``WindowedStream.aggregate_vectorized`` on Spark: its definition checks, its output
schema, and its columnar BATCH path.

Every mode runs the vectorized function as the window function over all elements it is
(:mod:`tidemark.vectorized`): the engine buffers the window's elements and calls it once
per firing, so triggers, evictors, allowed lateness and late firings keep their meaning.

A keyed BATCH window of a fixed layout (tumbling or sliding event-time windows, the
default trigger or one that fires only at the window's end, no evictor, no Dataflow
trigger) fires each window once, at the end of the input, with all its elements in
timestamp order (ties in the element frame's tie order,
:func:`tidemark.spark.batch.frames.tie_order`). That is computed here without a Python
``Row`` per element: Spark shuffles the needed columns by key and sorts each partition
by key, time and tie order (the order the engine path sees); each partition reaches
Python as Arrow batches (``mapInArrow``), where NumPy finds each key's windows
(``searchsorted`` of the windows' starts in the sorted timestamps) and the function is
called on array slices: the same values, in the same order, as the engine path hands
it. The input checks (null key or timestamp, a timestamp whose windows overflow a long)
are the SQL fast path's. Set the Spark conf ``spark.tidemark.vectorizedFastPath=false``
(or ``spark.tidemark.fastPaths=false``) to run it through the engine instead. A
:class:`~tidemark.functions.VectorizedCombineFunction` runs combined before the shuffle
instead (:mod:`tidemark.spark.batch.columnar_preaggregate`, which shares this module's
:class:`Plan` and result rows) unless ``spark.tidemark.preAggregate=false``. The guide:
``docs/concepts/vectorized.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NumericType,
    ShortType,
    StructField,
    StructType,
)

from tidemark.errors import UserFunctionError, WindowResultError, WindowSpecError
from tidemark.spark.batch import sorting, sql_plan
from tidemark.spark.batch.frames import ElementFrame, long_timestamp_column
from tidemark.spark.batch.run import engine_partitions
from tidemark.spark.plan import KeySpec, WindowOp, fast_paths_enabled
from tidemark.spark.protocol.columns import (
    DROPPED,
    DROPPED_OUTPUT,
    MAIN,
    OUTPUT,
    SIDE,
    STATS_OUTPUT,
    TS,
    combined_schema,
)
from tidemark.spark.protocol.figures import Figures
from tidemark.spark.protocol.keys import key_normaliser
from tidemark.spark.runtime.confs import VECTORIZED_FAST_PATH, WORKER_SORT_BYTES
from tidemark.time import LONG_MAX
from tidemark.vectorized import (
    VectorizedWindowFunction,
    output_type_name,
    vectorized_window_function,
)
from tidemark.windows import TimeWindow

__all__ = [
    "define",
    "applies",
    "run_columnar",
    "CONF",
    "WINDOW_COLUMNS",
    "Plan",
    "arrow_schema",
    "meta_rows",
    "result_batch",
    "float64_values",
    "key_of",
    "checked_value",
]

CONF = VECTORIZED_FAST_PATH.name
WINDOW_COLUMNS = ("window_start", "window_end")
"""The window's bounds in every result (long ms; null for a global window)."""

_SPARK_TYPES = {
    "double": DoubleType(),
    "float": FloatType(),
    "boolean": BooleanType(),
    "bigint": LongType(),
    "int": IntegerType(),
    "smallint": ShortType(),
    "tinyint": ByteType(),
}


def define(
    schema: StructType,
    key: KeySpec | None,
    function: Any,
    fields: Any,
    output_type: Any,
    output_name: Any,
) -> tuple[Any, StructType]:
    """The window function and output schema of ``aggregate_vectorized`` on a stream of
    ``schema`` keyed by ``key`` (None: ``window_all``), checked now.

    Raises
    ------
    WindowSpecError
        A key function; an unknown or non-numeric field; an unknown output type; an
        ``output_name`` that is not a new column name; a function that is neither a
        VectorizedAggregateFunction nor callable.
    """
    if key is not None and key.function is not None:
        raise WindowSpecError(
            "`aggregate_vectorized` needs a stream keyed by columns (its results carry "
            f"them); got key_by({key.function!r}): add the key as a column with "
            "withColumn, then key_by that column"
        )
    keys = list(key.columns) if key is not None else []
    window_function = vectorized_window_function(function, fields, output_type, len(keys))
    for name in window_function.fields:
        _check_numeric(schema, name)
    taken = [*keys, *WINDOW_COLUMNS]
    if not isinstance(output_name, str) or not output_name or output_name in taken:
        raise WindowSpecError(
            f"`output_name` must be a column name other than {taken}; got "
            f"output_name={output_name!r}: e.g. output_name='p90'"
        )
    columns = [StructField(k, schema[k].dataType, True) for k in keys]
    columns += [StructField(name, LongType(), True) for name in WINDOW_COLUMNS]
    columns.append(StructField(output_name, _SPARK_TYPES[output_type_name(output_type)], True))
    return window_function, StructType(columns)


def _check_numeric(schema: StructType, name: str) -> None:
    numeric = [
        f.name
        for f in schema.fields
        if isinstance(f.dataType, NumericType) and f.dataType.typeName() != "decimal"
    ]
    if name not in schema.fieldNames():
        raise WindowSpecError(
            f"`fields` must name columns of the stream; got {name!r}, columns: "
            f"{schema.fieldNames()}"
        )
    if name not in numeric:
        kind = schema[name].dataType.simpleString()
        raise WindowSpecError(
            f"`fields` must name numeric columns (their values arrive as float64 arrays); "
            f"got {name!r} of type {kind}; numeric columns: {numeric} (cast a decimal to "
            "double first; for other values use process())"
        )


def applies(op: WindowOp, frame: ElementFrame, spark: Any) -> bool:
    """Whether ``op`` is a keyed vectorized BATCH window this module computes columnar."""
    if not isinstance(op.function, VectorizedWindowFunction) or frame.replay:
        return False
    if op.key is None or op.key.function is not None or op.evictor is not None:
        return False
    if not sql_plan.columnar_windows(op):
        return False
    types = [type(frame.value_schema[k].dataType).__name__ for k in op.key.columns]
    if key_normaliser(types) is not None:
        return False  # float or nested keys: equal keys need not be equal values here
    return fast_paths_enabled(spark) and VECTORIZED_FAST_PATH.enabled(spark)


@dataclass(frozen=True)
class Plan:
    """What each task needs (picklable): the function, the columns, the layout."""

    window_function: VectorizedWindowFunction
    keys: tuple[str, ...]
    time_column: str  # the long ms timestamps (``__tm_ts`` or the source's own)
    size_ms: int
    slide_ms: int
    offset_ms: int
    schema: Any  # the combined frame's pyarrow schema
    sort_columns: tuple[str, ...] | None  # where the worker sorts (else Spark sorted)
    budget: int  # the most input (bytes) a task sorts, or groups at once, in memory


def run_columnar(op: WindowOp, frame: ElementFrame) -> Any:
    """The combined frame of ``op`` (see :func:`applies`) computed columnar."""
    spark = frame.df.sparkSession
    keys = list(op.key.columns) if op.key is not None else []
    checked = sql_plan.checked_elements(op, frame)
    fn: VectorizedWindowFunction = op.function
    # the timestamp column itself where it is long ms: one column less to shuffle
    time = long_timestamp_column(frame) or TS
    if time != TS:  # its checked copy (the checks run where the column is read)
        checked = checked.withColumn(time, F.col(TS)).drop(TS)
    order = [*keys, time, *[c for c in frame.tie_order if c not in (*keys, time)]]
    ordered = checked.repartition(engine_partitions(spark), *[F.col(f"`{k}`") for k in keys])
    budget = WORKER_SORT_BYTES.read(spark)
    in_worker = budget > 0 and all(sorting.sortable(ordered.schema[c].dataType) for c in order)
    if not in_worker:
        ordered = ordered.sortWithinPartitions(*[F.col(f"`{c}`") for c in order])
    # Arrow sorts as Spark does, in less time (:mod:`.batch.sorting`): it needs them all
    needed = list(dict.fromkeys([*(order if in_worker else [*keys, time]), *fn.fields]))
    schema = combined_schema(op.output_schema)
    assigner: Any = op.assigner  # tumbling or sliding, checked by applies()
    layout = (assigner.size_ms, getattr(assigner, "slide_ms", assigner.size_ms))
    plan = Plan(
        fn,
        tuple(keys),
        time,
        *layout,
        assigner.offset_ms,
        arrow_schema(schema),
        tuple(order) if in_worker else None,
        budget,
    )
    selected = ordered.select(*[F.col(f"`{c}`") for c in needed])
    return selected.mapInArrow(partial(_partition_results, plan), schema)


def arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def _partition_results(plan: Plan, batches: Any) -> Any:
    """One partition's results, a stats row and a dropped row (as the BATCH driver's)."""
    if plan.sort_columns is not None:
        batches = sorting.sorted_batches(batches, list(plan.sort_columns), plan.budget)
    collected = list(batches)
    table = pa.Table.from_batches(collected) if collected else None
    rows = 0 if table is None else table.num_rows
    out = 0
    if rows:
        result = _windows(plan, table)
        out = result.num_rows
        yield result
    figures = Figures(num_records_in=rows, num_records_out=out, watermark_ms=LONG_MAX)
    yield meta_rows(plan.schema, figures)


def meta_rows(schema: pa.Schema, figures: Figures) -> pa.RecordBatch:
    """The task's ``"__tm_stats"`` and ``"__late_records_dropped"`` rows (0 dropped)."""
    columns = {name: pa.nulls(2, schema.field(name).type) for name in schema.names}
    columns[OUTPUT] = pa.array([STATS_OUTPUT, DROPPED_OUTPUT], pa.string())
    columns[SIDE] = pa.array([figures.encode(), None], pa.binary())
    columns[DROPPED] = pa.array([None, 0], pa.int64())
    return pa.RecordBatch.from_arrays([columns[n] for n in schema.names], schema=schema)


def _windows(plan: Plan, table: pa.Table) -> pa.RecordBatch:
    """The results of the windows of ``table`` (sorted by key, time and tie order)."""
    ts = table.column(plan.time_column).to_numpy()
    firsts, starts, lows, highs = _layout(plan, table, ts)
    fn = plan.window_function
    arrays = [float64_values(table.column(f)) for f in fn.fields]
    values = [
        _call(plan, table, first, start, arrays, low, high)
        for first, start, low, high in zip(firsts, starts, lows, highs, strict=True)
    ]
    return result_batch(plan, table, firsts, np.asarray(starts, np.int64), values)


def float64_values(column: pa.ChunkedArray) -> np.ndarray:
    """A field's values as float64, null as NaN (as :func:`tidemark.vectorized.field_array`)."""
    cast = column.cast(pa.float64(), safe=False).combine_chunks()
    return np.asarray(cast.to_numpy(zero_copy_only=False), dtype=np.float64)


def _layout(
    plan: Plan, table: pa.Table, ts: np.ndarray
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Each window's first row of its key, start, and ``[low, high)`` rows."""
    n = len(ts)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for key in plan.keys:
        column = table.column(key).combine_chunks()
        if n > 1:
            change[1:] |= _differs(column)
    bounds = [*np.flatnonzero(change).tolist(), n]
    firsts: list[int] = []
    starts: list[int] = []
    lows: list[int] = []
    highs: list[int] = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        key_ts = ts[a:b]
        window_starts = _starts(plan, key_ts)
        lows += (np.searchsorted(key_ts, window_starts, "left") + a).tolist()
        highs += (np.searchsorted(key_ts, window_starts + plan.size_ms, "left") + a).tolist()
        starts += window_starts.tolist()
        firsts += [a] * len(window_starts)
    return firsts, starts, lows, highs


def _differs(column: pa.Array) -> np.ndarray:
    """Where each row's key differs from the row before (keys are never null here)."""
    n = len(column)
    return np.asarray(
        pc.not_equal(column.slice(1), column.slice(0, n - 1)).to_numpy(zero_copy_only=False),
        dtype=bool,
    )


def _starts(plan: Plan, ts: np.ndarray) -> np.ndarray:
    """The sorted starts of the windows that hold the (sorted) timestamps ``ts``."""
    last = ts - np.mod(ts - plan.offset_ms, plan.slide_ms)
    if plan.slide_ms == plan.size_ms:
        return last[np.concatenate(([True], last[1:] != last[:-1]))]
    count = -(-plan.size_ms // plan.slide_ms)
    candidates = last[:, None] - np.arange(count, dtype=np.int64) * plan.slide_ms
    held = candidates > (ts - plan.size_ms)[:, None]
    return np.unique(candidates[held])


def _call(
    plan: Plan, table: pa.Table, first: int, start: int, arrays: list[np.ndarray], lo: int, hi: int
) -> Any:
    """The function's checked value for one window; its errors as the engine path's."""
    fn = plan.window_function

    def where() -> tuple[Any, TimeWindow]:
        return key_of(plan, table, first), TimeWindow(start, start + plan.size_ms)

    try:
        value = fn.value([a[lo:hi] for a in arrays], where)
    except UserFunctionError:  # a wrong partial, with the key and window
        raise
    except Exception as exc:
        raise UserFunctionError("the window function", *where(), LONG_MAX, exc) from exc
    return checked_value(fn, value, where)


def checked_value(fn: VectorizedWindowFunction, value: Any, where: Any) -> Any:
    """``value`` checked against the output type; a wrong one reported with ``where()``'s
    key and window (found only then)."""
    try:
        return fn.check(value)
    except WindowResultError:  # again, with the key and window
        fn.check(value, *where())
        raise


def key_of(plan: Plan, table: pa.Table, row: int) -> Any:
    values = tuple(table.column(k)[row].as_py() for k in plan.keys)
    return values[0] if len(values) == 1 else values


def result_batch(
    plan: Plan, table: pa.Table, firsts: list[int], starts: np.ndarray, values: list[Any]
) -> pa.RecordBatch:
    schema = plan.schema
    m = len(firsts)
    taken = pa.array(firsts, pa.int64())
    columns: dict[str, Any] = {n: pa.nulls(m, schema.field(n).type) for n in schema.names}
    columns[OUTPUT] = pa.array([MAIN] * m, pa.string())
    columns[TS] = pa.array(starts + (plan.size_ms - 1), pa.int64())
    for key in plan.keys:
        taken_keys = table.column(key).take(taken).combine_chunks()
        columns[key] = taken_keys.cast(schema.field(key).type)
    start_name, end_name = WINDOW_COLUMNS
    columns[start_name] = pa.array(starts, pa.int64())
    columns[end_name] = pa.array(starts + plan.size_ms, pa.int64())
    value_name = schema.names[len(schema.names) - 3]  # before __tm_side, __tm_dropped
    columns[value_name] = pa.array(values, schema.field(value_name).type)
    return pa.RecordBatch.from_arrays([columns[n] for n in schema.names], schema=schema)
