"""Flink's shorthand aggregations in BATCH mode as Spark SQL aggregations.

``sum``/``min``/``max``/``min_by``/``max_by`` on tumbling or sliding event-time windows
with the default trigger (not a Dataflow trigger: its results carry panes) and no
evictor have a closed form in BATCH mode: each window fires once, at the end, with the
fold of its elements in timestamp order. Spark computes that with its own (partial,
native) aggregation, and the result equals the engine's exactly:

- ``sum/min/max``: the window's first element (by timestamp, then the tie order of
  :func:`tidemark.spark.batch.frames.tie_order`) with the
  field replaced by the aggregate (nulls skipped; sum only on integral and decimal
  fields, where the order of additions cannot change the result);
- ``min_by/max_by``: the first element holding the smallest/largest non-null field.

Results carry ``window.max_timestamp()`` as every window result does. Set the Spark
conf ``spark.tidemark.sqlFastPath=false`` to run these through the engine instead
(``spark.tidemark.fastPaths=false`` turns off this and the engine's fast paths).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    FractionalType,
    IntegralType,
    LongType,
    TimestampNTZType,
    TimestampType,
)

from tidemark.ranges import out_of_range_message
from tidemark.spark import aggregations as agg
from tidemark.spark.batch.worker import NULL_TIMESTAMP_ADVICE, UNPARSEABLE_ADVICE
from tidemark.spark.plan import WindowOp, fast_paths_enabled
from tidemark.spark.protocol.columns import (
    AGGREGATE,
    COUNTED,
    DROPPED,
    FIRST_ROW,
    MAIN,
    OUTPUT,
    SEQ,
    SIDE,
    TS,
    WINDOW_START,
)
from tidemark.spark.protocol.keys import NULL_KEY_ADVICE, key_normaliser, null_key_message
from tidemark.spark.protocol.value_errors import SUM_ADVICE
from tidemark.spark.runtime.confs import SQL_FAST_PATH

__all__ = ["applies", "sql_window", "checked_elements", "columnar_windows", "CONF"]

CONF = SQL_FAST_PATH.name


def columnar_windows(op: WindowOp) -> bool:
    """Whether ``op``'s windows are what a columnar BATCH path computes: event-time
    windows of a fixed layout (tumbling, sliding), each fired once at its end, without
    panes (a Dataflow trigger's results carry them: the engine's operator)."""
    if op.accumulation_mode is not None:
        return False
    if not op.assigner.is_event_time() or op.assigner.aligned_layout() is None:
        return False
    return op.trigger is None or op.trigger.fires_only_at_window_end()


def applies(op: WindowOp, frame: Any, spark: Any) -> bool:
    """Whether a BATCH window operation has the closed form this module computes."""
    function = op.function
    if frame.replay or op.window_function is not None or op.evictor is not None:
        return False
    if not columnar_windows(op):
        return False
    if type(function) not in (agg.Sum, agg.Min, agg.Max, agg.MinBy, agg.MaxBy):
        return False
    if op.key is not None and op.key.function is not None:
        return False
    kind = frame.value_schema[function.field].dataType
    if type(function) is agg.Sum and not isinstance(kind, (IntegralType, DecimalType)):
        return False
    if type(function) is agg.MaxBy and not isinstance(kind, (IntegralType, FractionalType)):
        return False  # the largest first is computed as the smallest negation
    return fast_paths_enabled(spark) and SQL_FAST_PATH.enabled(spark)


def _window_starts(op: WindowOp) -> Any:
    """The start of an element's window (tumbling), or the array of its windows'
    starts (sliding)."""
    assigner: Any = op.assigner  # tumbling or sliding, checked by applies()
    size = assigner.size_ms
    slide = getattr(assigner, "slide_ms", size)
    ts = F.col(TS)
    last = ts - F.pmod(ts - F.lit(assigner.offset_ms), F.lit(slide))
    if slide == size:
        return last  # one window: no array to explode
    count = (size + slide - 1) // slide
    starts = F.sequence(last - F.lit((count - 1) * slide), last, F.lit(slide))
    return F.filter(starts, lambda start: start > ts - F.lit(size))


def _aggregate(op: WindowOp, frame: Any) -> tuple[Any, Any]:
    """``(first-or-chosen element, aggregate or None)`` aggregation expressions. "First"
    is in the engine path's order: by timestamp, then by the frame's tie order."""
    function = op.function
    values = frame.value_schema.fieldNames()
    row = F.struct(*[F.col(f"`{c}`") for c in values])
    field = F.col(f"`{function.field}`")

    def first(*order: Any) -> Any:
        """The row that is smallest in ``order``, then in the tie order."""
        if frame.tie_order == [SEQ]:
            return F.min_by(row, F.struct(*order, F.col(SEQ)))
        # ties by the row itself: one struct holds order and row, so each group keeps
        # the row once (min_by would keep it twice)
        keyed = F.struct(*[o.alias(f"o{i}") for i, o in enumerate(order)], row.alias("row"))
        return F.min(keyed)["row"]

    if isinstance(function, agg.MinBy):
        return first(field.isNull(), field, F.col(TS)), None
    if isinstance(function, agg.MaxBy):
        # the largest field first: its negation, exact in a wider decimal for integers
        kind = frame.value_schema[function.field].dataType
        negated = -(field.cast(DecimalType(20, 0)) if isinstance(kind, IntegralType) else field)
        if isinstance(kind, (FloatType, DoubleType)):  # a NaN is the largest, and -NaN too
            return first(field.isNull(), ~F.isnan(field), negated, F.col(TS)), None
        return first(field.isNull(), negated, F.col(TS)), None
    return first(F.col(TS)), _field_aggregate(op)


def _field_aggregate(op: WindowOp) -> Any:
    """``sum``/``min``/``max`` of the shorthand's field; None for ``min_by``/``max_by``.
    A sum that overflows is null here (``try_sum``, whatever ``spark.sql.ansi.enabled``
    says), and refused by :func:`_checked_sum`."""
    function = op.function
    aggregate = {agg.Sum: F.try_sum, agg.Min: F.min, agg.Max: F.max}.get(type(function))
    return None if aggregate is None else aggregate(F.col(f"`{function.field}`"))


_RAISED_RESULT = "tidemark.errors.WindowResultError: "


def _checked_sum(field: Any, keys: list[str], size: int) -> Any:
    """The window's sum of the integral or decimal ``field`` (a StructField) in its own
    type, or the engine's :class:`~tidemark.errors.WindowResultError` where it does not
    fit (Spark's ``sum`` would fail with ``[ARITHMETIC_OVERFLOW]`` or
    ``[CAST_OVERFLOW]``, or wrap without ANSI): the field, its type, the key, the window."""
    kind = field.dataType
    total = F.col(AGGREGATE)
    low: int | Decimal
    high: int | Decimal
    if isinstance(kind, DecimalType):
        high = Decimal(10) ** (kind.precision - kind.scale) - Decimal(10) ** -kind.scale
        low = -high
    else:
        high = (1 << (8 * _INTEGRAL_BYTES[type(kind).__name__] - 1)) - 1
        low = -high - 1
    beyond = (F.col(COUNTED) > 0) & (total.isNull() | (total < low) | (total > high))
    key = F.to_json(F.struct(*[F.col(f"`{k}`") for k in keys])) if keys else F.lit("None")
    declared = kind.simpleString()
    advice = SUM_ADVICE.format(name=field.name)
    message = F.concat(
        F.lit(
            f"{_RAISED_RESULT}`output_schema` field {field.name!r} is {declared}, but a "
            f"result holds a sum() beyond the {declared} range [{low}, {high}] (key="
        ),
        key,
        F.lit(", window max_timestamp="),
        (F.col(WINDOW_START) + F.lit(size - 1)).cast("string"),
        F.lit(f"). {advice[:1].upper()}{advice[1:]}"),
    )
    return F.when(beyond, F.raise_error(message)).otherwise(total.cast(kind))


_INTEGRAL_BYTES = {"ByteType": 1, "ShortType": 2, "IntegerType": 4, "LongType": 8}


def _first_by_time(op: WindowOp, frame: Any, keys: list[str]) -> list[Any] | None:
    """The first element's other columns as plain aggregates, where the columns make
    that possible: besides the keys and the field, at most the event-time column itself,
    of a type whose order is the time order (the first element's is the smallest).
    Spark then aggregates in its hash aggregate, without the row struct that needs a
    sort-based one. None otherwise."""
    schema = frame.value_schema
    if key_normaliser([type(schema[k].dataType).__name__ for k in keys]) is not None:
        return None  # float, struct, array keys: the first element's value, not the group's
    others = [f for f in schema.fields if f.name not in keys and f.name != op.function.field]
    if not others:
        return []
    (column,) = others if len(others) == 1 else (None,)
    if column is None or column.name != frame.timestamp_column:
        return None
    if not isinstance(column.dataType, (IntegralType, TimestampType, TimestampNTZType, DateType)):
        return None
    return [F.min(F.col(f"`{column.name}`"))]


# How the engine path's InputDataError reads in a worker's traceback, so that
# tidemark.spark.runtime.surfacing raises these as InputDataError too.
_RAISED = "tidemark.errors.InputDataError: "


def _checked_input(df: Any, keys: list[str], values: list[str], ts_column: str | None) -> Any:
    """``df`` failing, as the engine path does, on a null key or a bad timestamp, with the
    column and an example row in the message."""
    example = F.to_json(F.struct(*[F.col(f"`{c}`") for c in values]))
    for key in keys:
        column = F.col(f"`{key}`")
        message = F.concat(
            F.lit(f"{_RAISED}{null_key_message(key)}"),
            example,
            F.lit(f". {NULL_KEY_ADVICE}"),
        )
        df = df.withColumn(key, F.when(column.isNull(), F.raise_error(message)).otherwise(column))
    raw = F.col(f"`{ts_column}`") if ts_column else F.lit(None)
    problem = F.when(raw.isNull(), F.lit(f"{_RAISED}null")).otherwise(
        F.concat(F.lit(f"{_RAISED}unparseable ('"), raw.cast("string"), F.lit("')"))
    )
    advice = F.when(raw.isNull(), F.lit(NULL_TIMESTAMP_ADVICE)).otherwise(UNPARSEABLE_ADVICE)
    message = F.concat(
        problem,
        F.lit(f" timestamp in column {ts_column!r}; example row: "),
        example,
        F.lit(". "),
        advice,
    )
    ts = F.col(TS)
    return df.withColumn(TS, F.when(ts.isNull(), F.raise_error(message)).otherwise(ts))


def _in_range(df: Any, assigner: Any, example: Any) -> Any:
    """``df`` failing, as the engine path does, on an element whose windows would
    overflow a long (:mod:`tidemark.ranges`), with its value and row."""
    low, high = bounds = assigner.timestamp_range()
    ts = F.col(TS)

    def message(above: bool) -> Any:
        text = out_of_range_message(assigner, "\0", bounds, above, "\0")
        before, between, after = text.split("\0")
        parts = [F.lit(_RAISED + before), ts.cast("string"), F.lit(between), example]
        return F.concat(*parts, F.lit(after))

    checked = (
        F.when(ts < F.lit(low), F.raise_error(message(False)))
        .when(ts > F.lit(high), F.raise_error(message(True)))
        .otherwise(ts)
    )
    return df.withColumn(TS, checked)


def checked_elements(op: WindowOp, frame: Any) -> Any:
    """``frame``'s rows failing, as the engine path does, on a null key, a null or
    unparseable timestamp, or one whose windows would overflow a long: the checks a
    columnar path runs where the rows are read, each message naming the column, the
    value, an example row and the fix."""
    values = frame.value_schema.fieldNames()
    keys = list(op.key.columns) if op.key is not None else []
    checked = _checked_input(frame.df, keys, values, frame.timestamp_column)
    example = F.to_json(F.struct(*[F.col(f"`{c}`") for c in values]))
    return _in_range(checked, op.assigner, example)


def sql_window(op: WindowOp, frame: Any) -> Any:
    """The combined output (results only) of the window operation, in Spark SQL."""
    keys = list(op.key.columns) if op.key is not None else []
    checked = checked_elements(op, frame)
    starts = _window_starts(op)
    assigner: Any = op.assigner  # tumbling or sliding, checked by applies()
    sliding = getattr(assigner, "slide_ms", assigner.size_ms) != assigner.size_ms
    exploded = checked.withColumn(WINDOW_START, F.explode(starts) if sliding else starts)
    aggregate = _field_aggregate(op)
    first_columns = _first_by_time(op, frame, keys) if aggregate is not None else None
    if first_columns is None:
        aggregations = [_aggregate(op, frame)[0].alias(FIRST_ROW)]
    else:
        aggregations = [expr.alias(f"{FIRST_ROW}{i}") for i, expr in enumerate(first_columns)]
    if aggregate is not None:
        aggregations.append(aggregate.alias(AGGREGATE))
    summed = isinstance(op.function, agg.Sum)
    if summed:  # a null try_sum over values is an overflow
        aggregations.append(F.count(F.col(f"`{op.function.field}`")).alias(COUNTED))
    groups = [*[F.col(f"`{k}`") for k in keys], F.col(WINDOW_START)]
    grouped = exploded.groupBy(*groups).agg(*aggregations)
    field = op.function.field
    columns, others = [], iter(range(len(first_columns or ())))
    size = getattr(op.assigner, "size_ms")  # noqa: B009 (tumbling or sliding)
    for f in frame.value_schema.fields:
        if summed and f.name == field:
            columns.append(_checked_sum(f, keys, size).alias(f.name))
        elif aggregate is not None and f.name == field:
            columns.append(F.col(AGGREGATE).cast(f.dataType).alias(f.name))
        elif first_columns is None:
            columns.append(F.col(FIRST_ROW)[f.name].alias(f.name))
        elif f.name in keys:
            columns.append(F.col(f"`{f.name}`"))
        else:
            columns.append(F.col(f"{FIRST_ROW}{next(others)}").alias(f.name))
    return grouped.select(
        F.lit(MAIN).alias(OUTPUT),
        (F.col(WINDOW_START) + F.lit(size - 1)).alias(TS),
        *columns,
        F.lit(None).cast(BinaryType()).alias(SIDE),
        F.lit(None).cast(LongType()).alias(DROPPED),
    )
