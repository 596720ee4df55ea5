"""Windows chained on a stream: a window reading an earlier window's results in the
same query.

Spark 4 runs several stateful operators in one streaming query
(``spark.sql.streaming.statefulOperator.allowMultiple``, on by default), and in a
micro-batch every ``transformWithStateInPandas`` in EventTime mode is given the same
watermark: the query's, from the first window's input (Spark's ``WatermarkPropagator``;
a ``transformWithState`` in EventTime mode forwards its input watermark unchanged). So a
later window is one more ``transformWithStateInPandas`` on the earlier one's combined
frame, without a ``withWatermark`` of its own, and without an event-time column Spark
could filter late rows on: every result the earlier window emits reaches the later
one, which judges lateness by its own window semantics.

Measured on PySpark 4.3.0 (``tests/spark/streaming/test_streaming_chain.py`` asserts it per query): the
query has one stateful operator per window, both are handed the same
``getCurrentWatermarkInMs()`` in every micro-batch, the earlier one's timer firings
reach the later one in the same micro-batch, and ``numRowsDroppedByWatermark`` stays 0.
Spark's sources say why: ``PropagateWatermarkSimulator.getInputWatermark`` returns the
batch's one watermark for every operator, ``TransformWithStateExec.produceOutputWatermark``
passes its input watermark on in EventTime mode, and only an operator whose input has
an event-time column filters late rows. ``eventTimeColumnName`` would add one, and
``UpdateEventTimeColumnExec`` fails the query on a result stamped at or behind the
previous batch's watermark (``EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED``), which
a late firing can be; so tidemark gives none.

What Flink forwards, and in which order: the earlier window emits its firings at a
watermark ``W`` and then forwards ``W``; its results on elements come after ``W``. In
micro-batch ``n`` both windows are presented the same ``W``; the earlier one marks each
result with ``__tm_phase`` (:data:`~tidemark.spark.protocol.columns.EARLY` when it fired on
advancing to ``W``, :data:`~tidemark.spark.protocol.columns.ON_ELEMENTS` on the batch's
elements), and the later one feeds the early results, advances to ``W``, then feeds the
rest (the workers' :mod:`~tidemark.spark.streaming.worker.groups` and
:mod:`~tidemark.spark.streaming.worker.inputs`). The earlier window's side outputs and
dropped counts pass through the later one's processor, renamed by
:func:`~tidemark.spark.protocol.columns.upstream_output_name`, so the last window's combined
frame carries every output of the chain and one query writes them all.

The early results are fed under the key's previous watermark: Spark tells a processor
only the current watermark. A result fired on advancing to ``W`` is stamped with a
window's ``max_timestamp`` above the previous watermark (its timer was not due then), so
it is never late under any earlier watermark, and this gives Flink's results.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidemark.assigners import WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import (
    DROPPED,
    FORWARDED,
    KEY_GROUP,
    MAIN,
    OUTPUT,
    PHASE,
    SIDE,
    TS,
    is_upstream_output,
    upstream_output_name,
)
from tidemark.spark.protocol.timestamps import processor_column
from tidemark.spark.streaming.driver.keygroups import slot_column
from tidemark.spark.streaming.worker.modes import TimeMode

__all__ = ["check_chain_mode", "prepare_upstream", "upstream_schemas"]


def check_chain_mode(
    assigner: WindowAssigner, time_mode: TimeMode, idleness_ms: int | None, upstream: Any
) -> None:
    """Refuse a window of a chain (one that reads, or feeds, another in the same query)
    that is not on event time, or an earlier window not built to feed a later one."""
    if upstream is not None and not upstream.feeds_downstream:
        raise WindowSpecError(
            "`df` must be an earlier window built with feeds_downstream=True to chain a "
            "window on it: its rows then carry the phase a later window needs"
        )
    if time_mode is not TimeMode.EVENT_TIME or idleness_ms is not None:
        raise WindowSpecError(
            "windows chained on a streaming window's results run on the event-time "
            f"watermark the first window forwards: every window of the chain needs event "
            f"time (a timestamp and a WatermarkStrategy, no with_idleness); got "
            f"{assigner!r} in Spark time mode {time_mode.value!r}, idleness={idleness_ms}ms"
        )


def prepare_upstream(
    df: DataFrame, names: list[str], key_columns: list[str], max_parallelism: int
) -> DataFrame:
    """An earlier window's combined frame as a chained processor's input: the columns
    ``names`` (keys, then values), then ``__tm_ts``, ``__tm_output``, ``__tm_side``,
    ``__tm_dropped``, ``__tm_phase`` and the key group's slot (:mod:`.keygroups`).

    No ``withWatermark``: the query's watermark is the first window's. A row of another
    output (side output, dropped count) is spread over the key groups by its value.
    """
    is_main = F.col(OUTPUT) == F.lit(MAIN)
    key_group = slot_column(key_columns, max_parallelism)
    spread = slot_column([TS, SIDE], max_parallelism)
    return df.select(
        *[processor_column(df, c) for c in names],
        # a count row has no timestamp; 0 keeps the column integral for pandas
        F.coalesce(F.col(TS), F.lit(0)).alias(TS),
        F.col(OUTPUT),
        F.col(SIDE),
        F.col(DROPPED),
        F.col(PHASE),
        F.col(FORWARDED),
        F.when(is_main, key_group).otherwise(spread).alias(KEY_GROUP),
    )


def upstream_schemas(upstream: Any) -> dict[str, StructType]:
    """The side-output schemas of the earlier windows of a chain (``upstream``, a
    :class:`~.query.StreamingWindow`, or None), under the names
    their outputs pass by."""
    if upstream is None:
        return {}
    return {
        name if is_upstream_output(name) else upstream_output_name(upstream.depth, name): schema
        for name, schema in upstream.side_schemas.items()
    }
