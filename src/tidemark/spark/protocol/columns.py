"""The internal column protocol: how tidemark's frames carry more than the user's columns.

Every Spark path (BATCH, replay, the SQL fast path, streaming) produces ONE *combined*
frame per window operation, holding its results and every side output, so the operator
runs once however many outputs are read. This module is the only place that names the
internal columns and encodes or decodes what they hold.

The combined schema, in column order::

    __tm_output   string  "main", a side output's tag id, "__late_records_dropped" or
                          "__tm_stats"
    __tm_ts       long    the result's timestamp (window.max_timestamp()), ms
    __tm_order    long    replay only: where the row goes in the stream's arrival order
    __tm_seq      long    replay only: the order of rows emitted at one arrival position
    __tm_wm       long    replay only: the watermark in force before the row
    <results>             the output schema's columns, all nullable (null on other rows)
    __tm_side     binary  a side-output row: the value, cloudpickled; a "__tm_stats" row:
                          its figures as UTF-8 JSON (:mod:`tidemark.spark.protocol.figures`)
    __tm_dropped  long    a "__late_records_dropped" row: late records dropped (a count
                          per task in a bounded run, per key group and batch in
                          streaming; :func:`dropped_counts` sums them)
    __tm_phase    long    streaming, a window feeding a further window only: 0 for a row
                          emitted while the operator advanced to the batch's watermark, 1
                          for one emitted while it processed the batch's elements

A ``"__tm_stats"`` row carries the figures a query is watched by (elements in, late
elements, results, the change in keys and windows held in state, the watermark): one
per key-group call in streaming, one per task in a BATCH or replay run. Every split of
the frame into outputs selects by name, so it never reaches a sink.

A streaming chain of windows runs in one query, and the last window's combined frame
carries every window's side outputs and dropped counts too: an output ``name`` of the
``depth``-th window of the chain (1 = the first) that is not the last is named
:func:`upstream_output_name` ``(depth, name)``, e.g. ``"__tm_window1/late"``.

Values are encoded with ``cloudpickle`` (so instances of classes defined in a driver
script survive the trip to a worker and back) and decoded with ``pickle.loads``. A key
function's keys (checked and normalised by the key rules, :mod:`tidemark.spark.protocol.keys`)
travel in ``__tm_key`` as plain pickles (protocol 4): Spark partitions, groups and keeps
streaming state by those bytes, so equal keys must give equal bytes.

Element frames (the input of a window operation) carry ``__tm_ts`` (event time, long
ms, see :mod:`tidemark.spark.protocol.timestamps`) and, by mode, ``__tm_key``, ``__tm_seq`` (the
BATCH tie order or a replay's), ``__tm_order``, ``__tm_wm`` and ``__tm_pt`` (a replay's
arrival order, recorded watermark and arrival time). Two paths add columns of their own
while they run, named here too: streaming's ``__tm_event_time`` (the column Spark's
watermark is defined on) and the SQL fast path's ``__tm_start``, ``__tm_first``,
``__tm_agg`` and ``__tm_counted``; a pre-aggregated ``window_all``'s partials
(:mod:`tidemark.spark.batch.local_global`) are ``__tm_start``, ``__tm_end`` and
``__tm_partial`` (the contents, cloudpickled).

The columns of one step, named here and used only by the module that adds them:

- a streaming window's lossless input (:mod:`tidemark.spark.protocol.lossless`): ``__tm_nan<i>``
  (float column ``i``'s NaN flag), ``__tm_utc<i>`` (timestamp column ``i``'s
  microseconds) and ``__tm_packed`` (a row's nested values, pickled);
- the deltas layout's packed input (:mod:`tidemark.spark.streaming.worker.packing`):
  ``__tm_key_group`` and ``__tm_key_group_rows`` (one key group's rows of an Arrow batch,
  as an Arrow IPC stream);
- the vectorized pre-aggregation's shuffled partials
  (:mod:`tidemark.spark.batch.columnar_preaggregate`): ``__tm_partial_<name>``;
- a Kafka source's JSON parse (:mod:`tidemark.spark.io.kafka`): ``__tm_corrupt`` (the raw
  text of a value that is not JSON);
- a key's history (:mod:`tidemark.spark.streaming.driver.history`): ``__tm_ts``,
  ``__tm_input``, ``__tm_file`` and ``__tm_position`` (where each row was read).

Names that reach a checkpoint keep their spelling: ``__tm_key_group`` is the streaming
state's grouping key.
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from tidemark.spark.protocol.codec import result_tuple
from tidemark.spark.protocol.column_values import arrow_batch, arrow_column, arrow_rows_and_columns
from tidemark.spark.protocol.keys import function_key

__all__ = [
    "OUTPUT",
    "TS",
    "ORDER",
    "SEQ",
    "WM",
    "PT",
    "KEY",
    "ALL_KEY",
    "SIDE",
    "DROPPED",
    "MAIN",
    "DROPPED_OUTPUT",
    "STATS_OUTPUT",
    "REPLAY_COLUMNS",
    "WATERMARK_TIME",
    "WATERMARK_MARK",
    "KEY_GROUP",
    "WINDOW_START",
    "PHASE",
    "FORWARDED",
    "EARLY",
    "ON_ELEMENTS",
    "upstream_output_name",
    "is_upstream_output",
    "is_dropped_output",
    "FIRST_ROW",
    "AGGREGATE",
    "COUNTED",
    "WINDOW_END",
    "PARTIAL",
    "NAN_FLAG",
    "UTC_MICROS",
    "NESTED_PACKED",
    "KEY_GROUP_ROWS",
    "CORRUPT",
    "HISTORY_INPUT",
    "HISTORY_FILE",
    "HISTORY_POSITION",
    "partial_column",
    "INTERNAL_PREFIX",
    "is_internal",
    "combined_schema",
    "encode_side",
    "decode_side",
    "encode_key",
    "decode_key",
    "with_function_key",
    "main_output",
    "side_output",
    "dropped_counts",
    "num_late_records_dropped",
    "SideDecoder",
]

OUTPUT = "__tm_output"
TS = "__tm_ts"
ORDER = "__tm_order"
SEQ = "__tm_seq"
WM = "__tm_wm"
PT = "__tm_pt"
KEY = "__tm_key"
ALL_KEY = "__tm_all"
KEY_GROUP = "__tm_key_group"  # streaming: the key group a key hashes to
SIDE = "__tm_side"
DROPPED = "__tm_dropped"
PHASE = "__tm_phase"  # streaming: a row's place around the batch's watermark (chains)
FORWARDED = "__tm_forwarded"  # streaming: the watermark an EARLY row follows (chains)
WATERMARK_TIME = "__tm_event_time"  # streaming: what withWatermark is given
WATERMARK_MARK = "__tm_watermark_mark"  # streaming: null, with the watermark's metadata
WINDOW_START, FIRST_ROW, AGGREGATE = "__tm_start", "__tm_first", "__tm_agg"  # SQL path
COUNTED = "__tm_counted"  # SQL path: a sum's non-null values (a null sum of some overflowed)
WINDOW_END, PARTIAL = "__tm_end", "__tm_partial"  # a pre-aggregated window's partials
NAN_FLAG = "__tm_nan"  # lossless input: the prefix of a float column's NaN flag, __tm_nan3
UTC_MICROS = "__tm_utc"  # lossless input: the prefix of a timestamp column's micros, __tm_utc3
NESTED_PACKED = "__tm_packed"  # lossless input: a row's nested values, pickled
KEY_GROUP_ROWS = "__tm_key_group_rows"  # deltas layout: a key group's rows, Arrow IPC
CORRUPT = "__tm_corrupt"  # Kafka: the text of a value that is not JSON
HISTORY_INPUT, HISTORY_FILE = "__tm_input", "__tm_file"  # a key's history: where read
HISTORY_POSITION = "__tm_position"  # a key's history: a row's place in its file
_PARTIAL_PREFIX = "__tm_partial_"

INTERNAL_PREFIX = "__tm_"
"""What every internal column's name starts with (a user's column may not)."""

MAIN = "main"
"""The ``__tm_output`` of a result row."""
DROPPED_OUTPUT = "__late_records_dropped"
"""The ``__tm_output`` of a row counting dropped late records (in ``__tm_dropped``)."""
STATS_OUTPUT = "__tm_stats"
"""The ``__tm_output`` of a row of figures (JSON in ``__tm_side``, :mod:`tidemark.spark.protocol.figures`)."""

REPLAY_COLUMNS = (ORDER, SEQ, WM)
"""A replay's placement columns, between ``__tm_ts`` and the results."""

EARLY, ON_ELEMENTS = 0, 1
"""The ``__tm_phase`` of a row emitted while advancing to the batch's watermark (which a
downstream window must see before that watermark), and of one emitted on the batch's
elements (after it). An ``EARLY`` row also carries, in ``__tm_forwarded``, the engine
watermark the earlier window had forwarded before it (the one Spark presented in the
previous micro-batch; null where the window has not seen one): the later window feeds it
under that watermark, as Flink's downstream operator holds it."""

_UPSTREAM_PREFIX = "__tm_window"


def combined_schema(
    output_schema: StructType, replay: bool = False, phase: bool = False
) -> StructType:
    """The combined frame of a window operation with results of ``output_schema``.

    >>> from pyspark.sql.types import StructType, StructField, LongType
    >>> combined_schema(StructType([StructField("n", LongType(), False)])).fieldNames()
    ['__tm_output', '__tm_ts', 'n', '__tm_side', '__tm_dropped']
    """
    fields = [StructField(OUTPUT, StringType(), False), StructField(TS, LongType(), True)]
    if replay:
        fields += [StructField(n, LongType(), True) for n in REPLAY_COLUMNS]
    fields += [StructField(f.name, f.dataType, True) for f in output_schema.fields]
    fields += [StructField(SIDE, BinaryType(), True), StructField(DROPPED, LongType(), True)]
    if phase:
        fields += [StructField(PHASE, LongType(), True), StructField(FORWARDED, LongType(), True)]
    return StructType(fields)


def is_internal(name: str) -> bool:
    """Whether column ``name`` is one of tidemark's own (case-insensitive, as Spark's
    default resolution is).

    >>> is_internal("__TM_ts"), is_internal("ts")
    (True, False)
    """
    return name.lower().startswith(INTERNAL_PREFIX)


def partial_column(name: str) -> str:
    """The shuffled column of a vectorized pre-aggregation's partial ``name``.

    >>> partial_column("sum")
    '__tm_partial_sum'
    """
    return f"{_PARTIAL_PREFIX}{name}"


def upstream_output_name(depth: int, name: str) -> str:
    """The name in a streaming chain's combined frame of output ``name`` ("main" is not
    carried, a tag id or ``"__late_records_dropped"``) of the chain's ``depth``-th window.

    >>> upstream_output_name(1, "late")
    '__tm_window1/late'
    """
    return f"{_UPSTREAM_PREFIX}{depth}/{name}"


def is_upstream_output(name: str) -> bool:
    """Whether an ``__tm_output`` value names an output of an earlier window of a chain."""
    return name.startswith(_UPSTREAM_PREFIX)


def is_dropped_output(name: str) -> bool:
    """Whether an ``__tm_output`` value names dropped counts (of a window of a chain)."""
    return name == DROPPED_OUTPUT or (
        is_upstream_output(name) and name.endswith("/" + DROPPED_OUTPUT)
    )


def encode_side(value: Any) -> bytes:
    """A side-output value as ``__tm_side`` holds it.

    >>> decode_side(encode_side({"a": 1}))
    {'a': 1}
    """
    return cloudpickle.dumps(value)


def decode_side(blob: bytes) -> Any:
    """The value of a ``__tm_side`` cell."""
    return pickle.loads(blob)


def encode_key(key: Any) -> bytes:
    """A key function's key as ``__tm_key`` holds it (equal keys, equal bytes)."""
    return pickle.dumps(key, protocol=4)


def decode_key(blob: bytes) -> Any:
    """The key of a ``__tm_key`` cell."""
    return pickle.loads(blob)


def with_function_key(df: Any, names: list[str], function: Any, combined: bool = False) -> Any:
    """``df`` with ``__tm_key``: ``function(row)`` of each row's columns ``names``,
    encoded with :func:`encode_key`, so Spark can partition by it (batch and streaming).
    ``combined``: ``df`` is a combined frame; only its results get a key (others null).

    The function sees each Row as the window's functions do (Arrow's values, the
    element codec of every mode), and every column passes through untouched."""
    schema = StructType(df.schema.fields + [StructField(KEY, BinaryType(), combined)])
    return df.mapInArrow(_FunctionKeys(names, function, combined), schema)


class _FunctionKeys:
    """``mapInArrow`` function of :func:`with_function_key`."""

    def __init__(self, names: list[str], function: Any, combined: bool):
        self.names, self.function, self.combined = names, function, combined

    def __call__(self, batches: Any) -> Any:
        function = self.function
        for batch in batches:
            rows, _ = arrow_rows_and_columns(batch, self.names)
            if self.combined:
                results = [name == MAIN for name in arrow_column(batch, OUTPUT)]
                keys = [
                    encode_key(function_key(function, r)) if on else None
                    for r, on in zip(rows, results)
                ]
            else:
                keys = [encode_key(function_key(function, row)) for row in rows]
            yield batch.append_column(KEY, pa.array(keys, type=pa.binary()))


def main_output(combined: Any, output_schema: StructType) -> Any:
    """The results of a combined frame, with the output schema."""
    names = [F.col(f"`{n}`") for n in output_schema.fieldNames()]
    return combined.where(F.col(OUTPUT) == MAIN).select(*names)


def side_output(combined: Any, tag_id: str, schema: StructType) -> Any:
    """The side output ``tag_id`` of a combined frame, decoded into ``schema``."""
    selected = combined.where(F.col(OUTPUT) == F.lit(tag_id)).select(SIDE)
    return selected.mapInArrow(SideDecoder(schema), schema)


def dropped_counts(combined: Any, name: str = DROPPED_OUTPUT) -> Any:
    """The count of late records dropped, as ONE row with column
    ``num_late_records_dropped``: the sum of the combined frame's count rows (``name``:
    those of an earlier window of a streaming chain), 0 when nothing was dropped.

    Flink's ``numLateRecordsDropped`` is a counter; a micro-batch (or a bounded run)
    gives its increment, so the rows of successive batches add up to it. On a streaming
    DataFrame itself (not a micro-batch), where a global aggregation would need output
    mode complete, it is a row per key group and batch that dropped something."""
    rows = combined.where(F.col(OUTPUT) == F.lit(name))
    if combined.isStreaming:
        return rows.select(F.col(DROPPED).alias("num_late_records_dropped"))
    total = F.coalesce(F.sum(DROPPED), F.lit(0)).cast(LongType())
    return rows.agg(total.alias("num_late_records_dropped"))


def num_late_records_dropped(combined: Any) -> int:
    """Late elements that went to no window and no side output (Flink's
    ``numLateRecordsDropped``), summed over all tasks of a bounded run."""
    return sum(row[0] for row in dropped_counts(combined).collect())


class SideDecoder:
    """``mapInArrow`` function: the encoded values of a side output (column
    ``__tm_side``) as rows of ``schema``. Arrow, not pandas: a NaN stays a NaN, a naive
    datetime is UTC whatever the session's time zone (:func:`arrow_batch`)."""

    def __init__(self, schema: StructType):
        self.schema = schema

    def __call__(self, batches: Any) -> Any:
        names = self.schema.fieldNames()
        for batch in batches:
            rows = [result_tuple(decode_side(blob), names) for blob in arrow_column(batch, SIDE)]
            data = list(zip(*rows)) if rows else [()] * len(names)
            yield arrow_batch(dict(zip(names, data)), self.schema)
