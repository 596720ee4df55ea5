"""Per-partition watermarks on Spark: a source read in partitions, as Flink's Kafka source.

``from_dataframe(df, ..., partition_column="partition", partitions=4)`` says which column
holds the source partition of each row (Kafka's ``partition``, or any column of a file
stream) and which partitions there are. The watermark is then the minimum over the
partitions of each one's own ``max_ts(p) - out_of_orderness - 1``
(:class:`~tidemark.watermarks.PartitionWatermarks`), in each mode:

* streaming (:func:`union_by_partition`): one branch of the stream per partition, each
  with its own Spark watermark, unioned before the window operator; Spark keeps one
  watermark per ``withWatermark`` and the query's is their minimum
  (``spark.sql.streaming.multipleWatermarkPolicy``, by default ``min``, which
  :func:`check_watermark_policy` insists on). A branch without data yet holds it at
  "none", as a Flink partition does. Each branch is a scan of the source filtered to
  its partition: Spark reads the source once per partition in every micro-batch;
* replay (:mod:`tidemark.spark.batch.partition_replay`): every row's watermark computed
  in arrival order by :class:`~tidemark.watermarks.PartitionWatermarks`, idleness
  included, then replayed as recorded watermarks;
* BATCH: no watermarks, nothing changes.

A row of a partition that is not listed (or of none) is an
:class:`~tidemark.errors.InputDataError` naming the value, never dropped. The statement
of what streaming computes, and where idleness differs from Flink's: ``docs/kafka.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidemark.errors import InputDataError, WindowSpecError
from tidemark.spark.plan import SourcePartitions
from tidemark.spark.runtime.surfacing import raise_error_column
from tidemark.time import exact_int

__all__ = [
    "source_partitions",
    "union_by_partition",
    "check_watermark_policy",
    "check_partitions",
    "WATERMARK_POLICY_CONF",
    "PARTITION_COUNT",
    "PARTITION_SOURCE",
]

WATERMARK_POLICY_CONF = "spark.sql.streaming.multipleWatermarkPolicy"

PARTITION_COUNT = "tidemark.partitions"
"""Metadata of a partition column whose source knows its partitions (``read_kafka``:
the topic's count when it was read, values ``0 .. n-1``): ``partitions`` must be them."""
PARTITION_SOURCE = "tidemark.partitions.source"
"""Metadata naming that source for messages (``topic 'clicks'``)."""

_KINDS = ("IntegerType", "LongType", "ShortType", "ByteType", "StringType")


def source_partitions(
    df: Any, column: Any, partitions: Any, *, streaming: bool
) -> SourcePartitions | None:
    """``from_dataframe``'s ``partition_column`` and ``partitions``, checked now."""
    if column is None:
        if partitions is not None:
            raise WindowSpecError(
                "`partitions` lists the values of `partition_column`: give "
                "partition_column='partition' (the column holding each row's partition) too"
            )
        return None
    if not isinstance(column, str) or column not in df.columns:
        raise WindowSpecError(
            f"`partition_column` must name a column of `df`; got {column!r}; columns: {df.columns}"
        )
    kind = type(df.schema[column].dataType).__name__
    if kind not in _KINDS:
        raise WindowSpecError(
            f"`partition_column` {column!r} must be an integer or string column (a "
            f"partition number or name); got type {df.schema[column].dataType.simpleString()}"
        )
    values = _values(partitions)
    if values is None and streaming:
        raise WindowSpecError(
            "`partitions` is required on a stream: a query's per-partition watermarks are "
            "fixed when it starts; give the number of Kafka partitions (partitions=4 for "
            "0..3) or the list of values of `partition_column`"
        )
    if values is not None:
        _check_known(df.schema[column].metadata or {}, values)
    return SourcePartitions(column, values)


def _check_known(metadata: dict[str, Any], values: tuple[Hashable, ...]) -> None:
    """Refuse ``partitions`` other than those the source has: a listed partition without
    rows would hold the watermark at its minimum for ever, so no window would fire."""
    count = metadata.get(PARTITION_COUNT)
    if count is None or set(values) == set(range(count)):
        return
    source = metadata.get(PARTITION_SOURCE, "the source")
    extra = sorted(set(values) - set(range(count)), key=str)
    missing = sorted(set(range(count)) - set(values))
    problems = []
    if extra:
        problems.append(
            f"{extra} it does not have (they would never hold a row, so the watermark, "
            "their minimum, would never rise and no window would fire)"
        )
    if missing:
        problems.append(f"not its {missing} (their rows would fail the query)")
    raise WindowSpecError(
        f"`partitions` must be the partitions {source} has, 0..{count - 1}; got "
        f"partitions={list(values)}, which lists {' and '.join(problems)}: give "
        f"partitions={count}"
    )


def _values(partitions: Any) -> tuple[Hashable, ...] | None:
    if partitions is None:
        return None
    count = exact_int(partitions)
    if count is not None:
        if count < 1:
            raise WindowSpecError(f"`partitions` must be >= 1; got partitions={partitions}")
        return tuple(range(count))
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, (Sequence, range)):
        raise WindowSpecError(
            f"`partitions` must be a number of partitions (0..n-1) or a list of the "
            f"partition column's values; got {partitions!r}"
        )
    values = tuple(partitions)
    if not values or len(set(values)) != len(values):
        raise WindowSpecError(
            f"`partitions` must list distinct values, at least one; got {list(values)}"
        )
    if not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in values):
        raise WindowSpecError(
            f"`partitions` must hold ints or strs (the partition column's values); "
            f"got {list(values)}"
        )
    return values


def check_watermark_policy(spark: Any) -> None:
    """Refuse a session whose queries take the maximum of their watermarks: per-partition
    watermarks are their minimum."""
    policy = str(spark.conf.get(WATERMARK_POLICY_CONF, "min")).lower()
    if policy != "min":
        raise WindowSpecError(
            f"per-partition watermarks need {WATERMARK_POLICY_CONF}=min (Spark's default; "
            f"the minimum over partitions); got {policy!r}: unset it for this query"
        )


def check_partitions(partitions: SourcePartitions | None, time_mode: str) -> None:
    """Refuse per-partition watermarks on a window that uses no event time."""
    if partitions is not None and "EventTime" not in time_mode:
        raise WindowSpecError(
            f"`partition_column` gives per-partition watermarks, and this window uses no "
            f"event time (time_mode={time_mode!r}); drop partition_column and partitions"
        )


def union_by_partition(
    df: DataFrame,
    partitions: SourcePartitions,
    timestamp_ms: Any,
    marker: Any,
    watermarked: Callable[[DataFrame, int], DataFrame],
) -> DataFrame:
    """The stream ``df`` as a union of one branch per partition, each given its own
    watermark by ``watermarked`` (a branch and its index -> the branch with
    ``withWatermark``).

    ``timestamp_ms`` is the rows' event time (long ms), ``marker`` the condition of an
    end-of-input row: such a row goes to every branch, so it ends every partition. The
    first branch also takes every row of an unlisted partition and fails the query on
    it, naming the value.
    """
    assert partitions.values is not None
    check_watermark_policy(df.sparkSession)
    column = F.col(f"`{partitions.column}`")
    branches = []
    for index, value in enumerate(partitions.values):
        mine = (column == F.lit(value)) | marker
        if index == 0:
            mine = mine | _refuse_unlisted(column, partitions, timestamp_ms, marker)
        branches.append(watermarked(df.where(mine), index))
    return reduce(DataFrame.unionByName, branches)


def _refuse_unlisted(column: Any, partitions: SourcePartitions, timestamp_ms: Any, marker: Any):
    """A condition that is false for a listed partition and fails the query for any
    other row: Spark's ``raise_error``, which tidemark reads back as its own error."""
    assert partitions.values is not None
    listed = column.isin(list(partitions.values))
    unlisted = (column.isNull() | ~listed) & ~marker
    message = F.concat(
        F.lit("a row of partition "),
        F.coalesce(column.cast("string"), F.lit("null")),
        F.lit(f" (column {partitions.column!r}, timestamp="),
        F.coalesce(timestamp_ms.cast("string"), F.lit("null")),
        F.lit(
            f"ms) is not one of the stream's partitions {list(partitions.values)}: a "
            "partition was added or the column holds something else; restart the query "
            "with every partition in `partitions`"
        ),
    )
    return F.when(unlisted, raise_error_column(InputDataError, message)).otherwise(F.lit(False))
