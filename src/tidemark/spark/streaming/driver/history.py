"""A key's elements per retained micro-batch, read again from the source as Spark's logs
say each micro-batch read it.

A query's checkpoint logs what each micro-batch read: ``offsets/<batch>`` the source's
end offsets, and a file source's ``sources/0/<batch>`` the files it took. Spark re-runs a
logged micro-batch that was not committed with exactly those offsets. So
:func:`read_key_history` starts a small stateless query of the pipeline's source
(filtered to the key) on a copy of those logs in a temporary directory, where
``offsets`` says that one micro-batch reads from the end of batch ``first - 1`` to the
end of ``last``: Spark reads the same files again, through the same transformations of
the source, once. The query's own checkpoint is not touched. Each row then goes back to
its micro-batch: a file source's by the file it came from (its log names each file's
batch), Kafka's (``read_kafka``) by its partition and offset (``offsets/<batch>`` holds
each batch's end offsets).

Supported: file sources and Kafka (one or several inputs, as per-partition watermarks
read them), keys of columns, an event-time column. Not supported
(:class:`HistoryUnavailable` says why, and an explanation starts from the state
instead): other sources, Kafka rows without their ``partition`` and ``offset`` columns,
``key_by`` functions, timestamps in other units than ms; micro-batches whose logs Spark
no longer retains (``spark.sql.streaming.minBatchesToRetain``).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from tidemark.spark.protocol.columns import HISTORY_FILE, HISTORY_INPUT, HISTORY_POSITION, TS
from tidemark.spark.streaming.driver.checkpoint import _local_directory
from tidemark.spark.streaming.driver.query import stream_timestamp_ms

__all__ = ["HistorySource", "HistoryUnavailable", "KeyRow", "read_key_history", "logged_batches"]


class HistoryUnavailable(Exception):
    """The key's elements cannot be read again; the message says why (not an error of
    the user's: the explanation says it and starts from the state)."""


@dataclass(frozen=True)
class HistorySource:
    """What reading a pipeline's input again needs: its source DataFrame, the key's
    columns, the event-time column (long ms, or a timestamp), and with per-partition
    watermarks the partition column and the partitions (one input each)."""

    df: DataFrame
    key_columns: tuple[str, ...]
    timestamp: str
    partition_column: str | None = None
    partitions: tuple[Any, ...] = (None,)


@dataclass(frozen=True)
class KeyRow:
    """One element of the key as a micro-batch read it."""

    batch: int
    value: Any  # the Row the window's functions get
    timestamp: int


def logged_batches(checkpoint: str) -> list[int]:
    """The micro-batches whose offsets the checkpoint still logs (the driver's disk)."""
    directory = os.path.join(_local_path(checkpoint), "offsets")
    if not os.path.isdir(directory):
        return []
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit())


def _local_path(checkpoint: str) -> str:
    path = checkpoint[len("file:") :] if checkpoint.startswith("file:") else checkpoint
    return path.rstrip("/") if path.startswith("/") else os.path.abspath(path)


def read_key_history(
    spark: Any, checkpoint: str, source: HistorySource, key: Any, first: int, last: int
) -> list[KeyRow]:
    """The elements of ``key`` that micro-batches ``first`` to ``last`` read, in the order
    the window saw them within each (by input, then by position in the file).

    Raises
    ------
    HistoryUnavailable
        The source, the checkpoint's file system or the logs do not allow it.
    """
    if _local_directory(spark, checkpoint) is None:
        raise HistoryUnavailable("the checkpoint is not on the driver's disk")
    root = _local_path(checkpoint)
    batches = logged_batches(checkpoint)
    if last not in batches or (first > 0 and first - 1 not in batches):
        raise HistoryUnavailable(
            f"Spark no longer logs micro-batches {first}..{last} (it keeps {batches[:1]}"
            f"..{batches[-1:]}, spark.sql.streaming.minBatchesToRetain)"
        )
    batch_of = _batch_of_row(root, source, first, last)
    work = tempfile.mkdtemp(prefix="tidemark-history-")
    try:
        _logs_for_one_batch(root, work, first, last)
        rows = _run_once(spark, work, source, key)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    found = []
    for row in rows:
        batch = batch_of(row)
        if batch is not None and first <= batch <= last:
            found.append((batch, row[HISTORY_INPUT], row[HISTORY_POSITION], row))
    found.sort(key=lambda item: item[:3])
    names = list(source.df.columns)
    return [KeyRow(b, Row(**{n: r[n] for n in names}), int(r[TS])) for b, _, _, r in found]


def _batch_of_row(root: str, source: HistorySource, first: int, last: int) -> Any:
    """``row -> the micro-batch that read it``: by its file (a file source's log names
    each file's batch), or by its Kafka partition and offset (``offsets/<batch>`` gives
    each batch's end offsets)."""
    logged = [_kafka_offsets(root, batch) for batch in range(first, last + 1)]
    ends = [end for end in logged if end is not None]
    if len(ends) == len(logged):
        if not {"partition", "offset"} <= set(source.df.columns):
            raise HistoryUnavailable("the Kafka rows lost their partition and offset columns")
        return functools.partial(_kafka_batch, first, ends)
    files = _file_batches(root)
    return lambda row: files.get(row[HISTORY_FILE])


def _kafka_offsets(root: str, batch: int) -> dict[str, int] | None:
    """Partition -> end offset of micro-batch ``batch``'s first Kafka source (None: not
    a Kafka source's log, or no log)."""
    path = os.path.join(root, "offsets", str(batch))
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as log:
        lines = log.read().splitlines()
    try:
        offsets = json.loads(lines[2])
    except (IndexError, ValueError):
        return None
    if not isinstance(offsets, dict) or len(offsets) != 1 or "logOffset" in offsets:
        return None
    (partitions,) = offsets.values()
    return {str(p): int(o) for p, o in partitions.items()} if isinstance(partitions, dict) else None


def _kafka_batch(first: int, ends: list[dict[str, int]], row: Any) -> int | None:
    """The first micro-batch whose end offset of the row's partition is past its offset."""
    for number, end in enumerate(ends, start=first):
        if row["offset"] < end.get(str(row["partition"]), -1):
            return number
    return None


def _file_batches(root: str) -> dict[str, int]:
    """The file source's log: each file read, and the micro-batch that read it."""
    directory = os.path.join(root, "sources", "0")
    if not os.path.isdir(directory):
        raise HistoryUnavailable("the source logs no files (it is not a file source)")
    files: dict[str, int] = {}
    for name in os.listdir(directory):
        if name.startswith("."):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as log:
            for line in log.read().splitlines()[1:]:
                entry = json.loads(line) if line.startswith("{") else None
                if entry and "path" in entry and "batchId" in entry:
                    files[entry["path"]] = int(entry["batchId"])
    if not files:
        raise HistoryUnavailable("the source logs no files (it is not a file source)")
    return files


def _logs_for_one_batch(root: str, work: str, first: int, last: int) -> None:
    """Spark's logs in ``work`` such that its next micro-batch re-reads ``first..last``."""
    # a query id of its own: the query may be running in this very session
    with open(os.path.join(work, "metadata"), "w", encoding="utf-8") as metadata:
        metadata.write(json.dumps({"id": str(uuid.uuid4())}))
    shutil.copytree(os.path.join(root, "sources"), os.path.join(work, "sources"))
    for name in ("offsets", "commits"):
        os.makedirs(os.path.join(work, name))
    with open(os.path.join(root, "offsets", str(last)), encoding="utf-8") as log:
        end = log.read()
    if first > 0:
        before = str(first - 1)
        shutil.copy(os.path.join(root, "offsets", before), os.path.join(work, "offsets", before))
        committed = os.path.join(root, "commits", before)
        if not os.path.exists(committed):
            raise HistoryUnavailable(f"micro-batch {before} was not committed")
        shutil.copy(committed, os.path.join(work, "commits", before))
    with open(os.path.join(work, "offsets", str(first)), "w", encoding="utf-8") as log:
        log.write(end)


def _run_once(spark: Any, work: str, source: HistorySource, key: Any) -> list[Any]:
    """Run the one logged micro-batch of ``work``: the key's rows, each with its input,
    file and position."""
    values = key if len(source.key_columns) > 1 else (key,)
    matches = reduce(
        lambda a, b: a & b,
        [F.col(f"`{c}`") == F.lit(v) for c, v in zip(source.key_columns, values)],
    )
    timestamp = stream_timestamp_ms(source.df.schema, source.timestamp)
    branches = []
    for index, partition in enumerate(source.partitions):
        rows = source.df
        if source.partition_column is not None:
            rows = rows.where(F.col(f"`{source.partition_column}`") == F.lit(partition))
        branches.append(
            rows.where(matches).select(
                "*",
                timestamp.alias(TS),
                F.lit(index).alias(HISTORY_INPUT),
                F.input_file_name().alias(HISTORY_FILE),
            )
        )
    collected: list[Any] = []

    def collect(batch: DataFrame, _: int) -> None:
        # a row's place in its file (a file is read in order, in one task)
        collected.extend(
            batch.withColumn(HISTORY_POSITION, F.monotonically_increasing_id()).collect()
        )

    query = (
        reduce(DataFrame.unionByName, branches)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", work)
        .trigger(once=True)
        .start()
    )
    query.awaitTermination()
    return collected
