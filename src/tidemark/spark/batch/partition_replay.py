"""A replay's per-partition watermarks: every row's watermark as Flink's Kafka source made it.

A recorded topic replayed in its arrival order (``order_by``) with ``partition_column``:
each row gets ``__tm_wm``, the watermark in force when it arrived, from
:class:`~tidemark.watermarks.PartitionWatermarks` fed every row before it, in order
(idleness judged at each arrival, from ``processing_time``). The replay then runs these
as recorded watermarks (:mod:`.replay`), so everything it does with a recorded
watermark (timers fired at the watermark that first reached them, the processing-time
clock in step) holds here too.

The rule is sequential, a running minimum over partitions, so it runs in one task over
the rows in arrival order, as a Flink source reads its partitions; its cost is a sort
and one pass of a few Python operations per row. The partitions are the ones given, or
the values the rows hold (one small Spark job).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from tidemark.spark.plan import Source
from tidemark.spark.protocol.columns import PT, TS, WM
from tidemark.watermarks import PartitionWatermarks, WatermarkStrategy

__all__ = ["with_partition_watermarks"]


def with_partition_watermarks(frame: Any, source: Source, spark: Any) -> Any:
    """``frame`` (the source's columns, ``__tm_ts`` and, with a ``processing_time``,
    ``__tm_pt``) with ``__tm_wm``: each row's per-partition watermark on arrival."""
    assert source.partitions is not None and source.order_by is not None
    column = source.partitions.column
    values = source.partitions.values
    if values is None:
        rows = frame.select(column).distinct().collect()
        values = tuple(sorted((r[0] for r in rows if r[0] is not None), key=repr))
    by = [F.col(f"`{name}`") for name in source.order_by]
    ordered = frame.repartition(1).sortWithinPartitions(*by)
    schema = StructType(frame.schema.fields + [StructField(WM, LongType(), False)])
    arrival = PT if PT in frame.columns else None
    stamp = _Stamp(source.strategy, values, column, arrival)
    return ordered.mapInPandas(stamp, schema)


class _Stamp:
    """mapInPandas function: the one task's rows, in arrival order, with ``__tm_wm``."""

    def __init__(
        self,
        strategy: WatermarkStrategy,
        partitions: tuple[Hashable, ...],
        column: str,
        arrival: str | None,
    ):
        self._strategy = strategy
        self._partitions = partitions
        self._column = column
        self._arrival = arrival

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        watermarks = PartitionWatermarks(self._strategy, self._partitions)
        for pdf in batches:
            partitions = pdf[self._column].tolist()
            timestamps = pdf[TS].tolist()
            arrivals = pdf[self._arrival].tolist() if self._arrival else [None] * len(pdf)
            stamped = []
            for partition, ts, arrival in zip(partitions, timestamps, arrivals):
                arrival = _plain(arrival)
                stamped.append(watermarks.watermark_at(arrival))
                watermarks.on_event(_plain(partition), _plain(ts), arrival)
            yield pdf.assign(**{WM: stamped})


def _plain(value: Any) -> Any:
    """A pandas cell as a Python value: NaN and None as None, NumPy ints as int."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value.item() if hasattr(value, "item") else value
