"""Sinks for ``write_outputs``: where each output of a micro-batch goes.

A streaming query's sink is a function ``sink(batch_df, batch_id)``. Spark runs a
micro-batch again after a failure when its end was not yet recorded in the checkpoint,
with the same input, state and ``batch_id``, so a sink that writes *by batch id*,
replacing what that batch wrote before, holds every result exactly once whatever
restarts happen:

* :func:`parquet_table`: a Parquet table partitioned by ``batch_id``; each call replaces
  its batch's partition (Spark's dynamic partition overwrite). Exactly once.
* :func:`kafka_sink`: rows as JSON records to a Kafka topic with Spark's Kafka sink. A
  batch run again is written again: at least once, as Spark's Kafka sink is; each record
  carries its batch id in the header ``tidemark-batch-id`` for readers that deduplicate.

Delta Lake's idempotent writes (``txnAppId`` / ``txnVersion``) do the same as
:func:`parquet_table` where a Delta release runs on the session's Spark (none served for
Spark 4.3: ``docs/kafka.md``). The guide: ``docs/kafka.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidemark.errors import WindowSpecError

__all__ = ["parquet_table", "ParquetTable", "kafka_sink", "KafkaSink", "BATCH_HEADER"]

BATCH_HEADER = "tidemark-batch-id"
"""The Kafka header holding the batch id of a record :func:`kafka_sink` wrote."""

_NOT_THERE = ("PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA")


def parquet_table(path: str, batch_column: str = "batch_id") -> ParquetTable:
    """A sink writing each micro-batch's rows to ``path``, partitioned by ``batch_column``.

    Parameters
    ----------
    path : str
        The table's directory (any file system Spark writes Parquet to). One table per
        output and per query: its batches belong to one checkpoint.
    batch_column : str
        The partition column holding the batch id; read the table with
        ``spark.read.parquet(path)``.

    Returns
    -------
    ParquetTable
        ``sink(batch_df, batch_id)``: replaces partition ``batch_id`` with the rows.
        Its first call refuses a table holding a later batch than the one it writes: a
        later batch was written by another query (a new checkpoint starts again at batch
        0, and would overwrite it).
    """
    if not isinstance(path, str) or not path:
        raise WindowSpecError(f"`path` must be a directory path (str); got {path!r}")
    return ParquetTable(path, batch_column)


class ParquetTable:
    """The sink :func:`parquet_table` returns."""

    def __init__(self, path: str, batch_column: str = "batch_id"):
        self.path = path
        self.batch_column = batch_column
        self._checked = False

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self.batch_column in df.columns:
            raise WindowSpecError(
                f"the output has a column {self.batch_column!r}, the table's batch column: "
                f"give parquet_table(..., batch_column=...) another name"
            )
        if not self._checked:
            self._refuse_later_batches(df.sparkSession, batch_id)
            self._checked = True
        (
            df.withColumn(self.batch_column, F.lit(batch_id).cast("long"))
            .write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy(self.batch_column)
            .parquet(self.path)
        )

    def batches(self, spark: Any) -> list[int]:
        """The batch ids the table holds (a listing of its files, no job)."""
        try:
            files = spark.read.parquet(self.path).inputFiles()
        except AnalysisException as exc:
            if any(reason in str(exc) for reason in _NOT_THERE):
                return []
            raise
        found = re.compile(rf"/{re.escape(self.batch_column)}=(\d+)/")
        return sorted({int(m.group(1)) for f in files if (m := found.search(f))})

    def _refuse_later_batches(self, spark: Any, batch_id: int) -> None:
        later = [b for b in self.batches(spark) if b > batch_id]
        if later:
            raise WindowSpecError(
                f"parquet table {self.path!r} holds batch {max(later)}, later than batch "
                f"{batch_id} this query writes: another query (another checkpoint) wrote "
                "it, and this one would overwrite its batches. Give this query a new "
                "table path, or delete the table with its old checkpoint"
            )


def kafka_sink(
    bootstrap_servers: str,
    topic: str,
    *,
    key: str | Sequence[str] | None = None,
    options: dict[str, str] | None = None,
) -> KafkaSink:
    """A sink writing each row as a JSON record to a Kafka topic (at least once).

    Parameters
    ----------
    bootstrap_servers : str
        ``host:port,...`` of the brokers.
    topic : str
    key : str or list of str, optional
        The column (its value as a string) or columns (a JSON object of them) that make
        the record's key; Kafka places equal keys in one partition. None: no key.
    options : dict, optional
        More options of Spark's Kafka sink (``kafka.``-prefixed producer settings).
    """
    if not isinstance(bootstrap_servers, str) or not isinstance(topic, str):
        raise WindowSpecError(
            f"`bootstrap_servers` and `topic` must be strs; got {bootstrap_servers!r}, {topic!r}"
        )
    columns = (key,) if isinstance(key, str) else tuple(key or ())
    return KafkaSink(bootstrap_servers, topic, columns, dict(options or {}))


class KafkaSink:
    """The sink :func:`kafka_sink` returns."""

    def __init__(
        self, bootstrap_servers: str, topic: str, key: tuple[str, ...], options: dict[str, str]
    ):
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.key = key
        self.options = options

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        missing = [c for c in self.key if c not in df.columns]
        if missing:
            raise WindowSpecError(
                f"`key` names columns the output does not have: {missing}; columns: {df.columns}"
            )
        header = F.struct(
            F.lit(BATCH_HEADER).alias("key"), F.lit(str(batch_id)).cast("binary").alias("value")
        )
        records = df.select(
            self._key_column(),
            F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns])).alias("value"),
            F.array(header).alias("headers"),
        )
        writer = records.write.format("kafka")
        for name, value in {"kafka.bootstrap.servers": self.bootstrap_servers,
                            **self.options, "topic": self.topic}.items():  # fmt: skip
            writer = writer.option(name, value)
        writer.save()

    def _key_column(self) -> Any:
        if not self.key:
            return F.lit(None).cast("string").alias("key")
        if len(self.key) == 1:
            return F.col(f"`{self.key[0]}`").cast("string").alias("key")
        return F.to_json(F.struct(*[F.col(f"`{c}`") for c in self.key])).alias("key")
