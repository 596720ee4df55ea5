"""Sinks for ``write_outputs``: where each output of a micro-batch goes.

A streaming query's sink is a function ``sink(batch_df, batch_id)``. Spark runs a
micro-batch again after a failure when its end was not yet recorded in the checkpoint,
with the same input, state and ``batch_id``, so a sink that writes *by batch id* holds
every result exactly once whatever restarts happen:

* :func:`parquet_table`: a Parquet table partitioned by ``batch_id``; each call replaces
  its batch's partition (an empty batch too). Exactly once.
* :func:`delta_table`: a Delta Lake table; each batch appended with Delta's idempotent
  writes (``txnAppId`` the query and output, ``txnVersion`` the batch id), so Delta skips
  a batch it already holds. Exactly once, on Spark 4.0, 4.1 and 4.2.
* :func:`iceberg_table`: an Apache Iceberg table; each batch appended with its query,
  output and batch id in the snapshot's summary, and skipped when a snapshot holds it.
  Exactly once, on Spark 4.0 and 4.1.
* :func:`kafka_sink`: rows as JSON records to a Kafka topic with Spark's Kafka sink. A
  batch run again is written again: at least once, as Spark's Kafka sink is; each record
  carries its batch id in the header ``tidemark-batch-id`` for readers that deduplicate.

Every table sink follows one rule (:mod:`tidemark.spark.streaming.driver.tables`): a table belongs to one
output of one query. ``write_outputs`` refuses two outputs naming one table, and claims
each table for its query (its checkpoint) and output before the query starts, refusing a
table another query or output holds. The guide: ``docs/kafka.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidemark.errors import SessionSetupError, WindowSpecError
from tidemark.spark.runtime.session import is_connect
from tidemark.spark.streaming.driver.checkpoint import qualified
from tidemark.spark.streaming.driver.tables import Owner, claim_location

__all__ = [
    "parquet_table",
    "ParquetTable",
    "delta_table",
    "DeltaTable",
    "iceberg_table",
    "IcebergTable",
    "kafka_sink",
    "KafkaSink",
    "BATCH_HEADER",
    "DELTA_SPARK",
    "ICEBERG_SPARK",
    "check_delta",
    "check_iceberg",
]

BATCH_HEADER = "tidemark-batch-id"
"""The Kafka header holding the batch id of a record :func:`kafka_sink` wrote."""

DELTA_SPARK = ("4.0", "4.1", "4.2")
"""The Spark minors Delta Lake publishes ``delta-spark_<minor>_2.13`` for (4.4.0, pinned
in ``tools/versions.env``); none for 4.3, where 4.4.0 fails at its first write."""

ICEBERG_SPARK = ("4.0", "4.1")
"""The Spark minors Apache Iceberg publishes ``iceberg-spark-runtime-<minor>_2.13`` for
(``tools/versions.env``); none for 4.2 or 4.3."""

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
QUERY_OUTPUT = "tidemark.query-output"
"""Iceberg snapshot property: the id of the query and output that committed it."""
BATCH_ID = "tidemark.batch-id"
"""Iceberg snapshot property: the batch id the snapshot appended."""

_NOT_THERE = ("PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA")


def parquet_table(path: str, batch_column: str = "batch_id") -> ParquetTable:
    """A sink writing each micro-batch's rows to ``path``, partitioned by ``batch_column``.

    Parameters
    ----------
    path : str
        The table's directory (any file system Spark writes Parquet to). It belongs to
        one output of one query (:mod:`tidemark.spark.streaming.driver.tables`).
    batch_column : str
        The partition column holding the batch id; read the table with
        ``spark.read.parquet(path)``.

    Returns
    -------
    ParquetTable
        ``sink(batch_df, batch_id)``: replaces partition ``batch_id`` with the rows (with
        none, an empty file that keeps the schema readable). Its first call also refuses
        a table holding a later batch than the one it writes, written before tables had
        owner records by another query (a new checkpoint starts again at batch 0).
    """
    if not isinstance(path, str) or not path:
        raise WindowSpecError(f"`path` must be a directory path (str); got {path!r}")
    return ParquetTable(path, batch_column)


class _Claimed:
    """What every table sink shares: the owner ``write_outputs`` claimed the table for."""

    _owner: Owner | None = None

    def owner(self) -> Owner:
        if self._owner is None:
            raise WindowSpecError(
                f"{self!r} writes only for the query that claimed its table: give it to "
                "write_outputs (which claims each table before the query starts), or call "
                "its claim(spark, tidemark.spark.streaming.driver.tables.owner_of(spark, checkpoint, "
                "output), schema) first"
            )
        return self._owner


class ParquetTable(_Claimed):
    """The sink :func:`parquet_table` returns."""

    def __init__(self, path: str, batch_column: str = "batch_id"):
        self.path = path
        self.batch_column = batch_column
        self._checked = False

    def __repr__(self) -> str:
        return f"parquet_table({self.path!r})"

    def table_key(self, spark: Any) -> str:
        return qualified(spark, self.path)

    def claim(self, spark: Any, owner: Owner, schema: StructType) -> None:
        self._check_columns(schema.fieldNames())
        claim_location(spark, self.path, f"parquet table {self.path!r}", owner)
        self._owner = owner

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.owner()
        self._check_columns(df.columns)
        if not self._checked:
            self._refuse_later_batches(df.sparkSession, batch_id)
            self._checked = True
        # The batch's partition directory overwritten whole: rows of an earlier attempt
        # go even when this one has none, and an empty batch leaves a file with the schema
        df.write.mode("overwrite").parquet(
            f"{self.path.rstrip('/')}/{self.batch_column}={batch_id}"
        )

    def _check_columns(self, columns: list[str]) -> None:
        if self.batch_column in columns:
            raise WindowSpecError(
                f"the output has a column {self.batch_column!r}, the table's batch column: "
                f"give parquet_table(..., batch_column=...) another name"
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


def delta_table(path: str) -> DeltaTable:
    """A sink appending each micro-batch's rows to the Delta Lake table at ``path``,
    exactly once.

    Each batch is appended with Delta's idempotent writes: ``txnAppId`` names the query
    (its checkpoint) and output, ``txnVersion`` is the batch id, and Delta skips a write
    whose version it already committed for that id. Read the table with
    ``spark.read.format("delta").load(path)``.

    Parameters
    ----------
    path : str
        The table's directory. It belongs to one output of one query
        (:mod:`tidemark.spark.streaming.driver.tables`).

    Notes
    -----
    Needs Delta Lake on the session (``write_outputs`` checks before the query starts):
    ``io.delta:delta-spark_<Spark minor>_2.13`` on its class path (Spark 4.0, 4.1 or 4.2,
    :data:`DELTA_SPARK`), ``spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension``
    and ``spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog``.
    """
    if not isinstance(path, str) or not path:
        raise WindowSpecError(f"`path` must be a directory path (str); got {path!r}")
    return DeltaTable(path)


class DeltaTable(_Claimed):
    """The sink :func:`delta_table` returns."""

    def __init__(self, path: str):
        self.path = path

    def __repr__(self) -> str:
        return f"delta_table({self.path!r})"

    def table_key(self, spark: Any) -> str:
        return qualified(spark, self.path)

    def claim(self, spark: Any, owner: Owner, schema: StructType) -> None:
        check_delta(spark)
        claim_location(spark, self.path, f"Delta table {self.path!r}", owner)
        self._owner = owner

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", self.owner().id)
            .option("txnVersion", str(batch_id))
            .save(self.path)
        )


def iceberg_table(name: str) -> IcebergTable:
    """A sink appending each micro-batch's rows to the Apache Iceberg table ``name``,
    exactly once.

    Each batch is appended with two snapshot properties, ``tidemark.query-output`` (the
    query, by its checkpoint, and the output) and ``tidemark.batch-id``; a batch that a
    snapshot of the table already holds is skipped (its first call reads the table's
    ``snapshots``, the later ones remember what they committed). The table is created
    with the output's columns before the query starts if it does not exist.

    Parameters
    ----------
    name : str
        The table's name in an Iceberg catalog of the session, e.g. ``"lake.db.sessions"``.
        It belongs to one output of one query (:mod:`tidemark.spark.streaming.driver.tables`).

    Notes
    -----
    Needs Iceberg on the session (``write_outputs`` checks before the query starts):
    ``org.apache.iceberg:iceberg-spark-runtime-<Spark minor>_2.13`` on its class path
    (Spark 4.0 or 4.1, :data:`ICEBERG_SPARK`) and the catalog, e.g.
    ``spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog`` with its
    ``.type`` and ``.warehouse``. An expired snapshot takes its properties with it:
    keep the latest one the query committed (``expire_snapshots`` with ``retain_last``),
    above all between a failure and its restart.
    """
    if not isinstance(name, str) or not name:
        raise WindowSpecError(f"`name` must be a table name (str); got {name!r}")
    return IcebergTable(name)


class IcebergTable(_Claimed):
    """The sink :func:`iceberg_table` returns."""

    def __init__(self, name: str):
        self.name = name
        self._committed: int | None = None

    def __repr__(self) -> str:
        return f"iceberg_table({self.name!r})"

    def table_key(self, spark: Any) -> str:
        return self.name.lower()

    def claim(self, spark: Any, owner: Owner, schema: StructType) -> None:
        check_iceberg(spark, self.name)
        if not spark.catalog.tableExists(self.name):
            try:
                spark.createDataFrame([], schema).writeTo(self.name).create()
            except AnalysisException as exc:  # another query created it first
                if "ALREADY_EXISTS" not in str(exc):
                    raise
        location = (
            spark.sql(f"DESCRIBE TABLE EXTENDED {self.name}")
            .where(F.col("col_name") == "Location")
            .first()
        )
        claim_location(spark, location.data_type, f"Iceberg table {self.name!r}", owner)
        self._owner = owner
        self._committed = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        marker = self.owner().id
        if self._committed is None:
            self._committed = self._last_committed(df.sparkSession, marker)
        if batch_id <= self._committed:
            return  # a replayed batch a snapshot already holds
        (
            df.writeTo(self.name)
            .option(f"snapshot-property.{QUERY_OUTPUT}", marker)
            .option(f"snapshot-property.{BATCH_ID}", str(batch_id))
            .append()
        )
        self._committed = batch_id

    def _last_committed(self, spark: Any, marker: str) -> int:
        """The largest batch id a snapshot of the table holds for ``marker``; -1 for none."""
        summary = F.col("summary")
        found = (
            spark.table(f"{self.name}.snapshots")
            .where(summary[QUERY_OUTPUT] == F.lit(marker))
            .agg(F.max(summary[BATCH_ID].cast("long")))
            .first()[0]
        )
        return -1 if found is None else int(found)


def _minor(spark: Any) -> str:
    return ".".join(str(spark.version).split(".")[:2])


def check_delta(spark: Any) -> None:
    """Refuse a session that cannot write Delta tables: a Spark without a Delta Lake
    release, or one started without Delta's jars or settings."""
    if _minor(spark) not in DELTA_SPARK:
        raise SessionSetupError(
            f"delta_table needs Delta Lake, which has no release for Spark {spark.version}: "
            f"delta-spark 4.4 runs on Spark {', '.join(DELTA_SPARK)} only "
            f"(io.delta:delta-spark_<minor>_2.13). Use parquet_table, or a PySpark of those"
        )
    conf = spark.conf
    extensions = conf.get("spark.sql.extensions", "") or ""
    catalog = conf.get("spark.sql.catalog.spark_catalog", "") or ""
    if (
        DELTA_EXTENSION not in extensions
        or catalog != DELTA_CATALOG
        or not _has_class(spark, DELTA_CATALOG)
    ):
        raise SessionSetupError(
            f"delta_table needs Delta Lake on the session: start it with the jars of "
            f"io.delta:delta-spark_{_minor(spark)}_2.13:4.4.0 (spark.jars.packages, or "
            "`python tools/kafka/jars.py --classpath delta` in this repository) and "
            f"spark.sql.extensions={DELTA_EXTENSION}, "
            f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}; got extensions="
            f"{extensions!r}, catalog={catalog!r}"
        )


def check_iceberg(spark: Any, name: str) -> None:
    """Refuse a session that cannot write Iceberg table ``name``: a Spark without an
    Iceberg runtime, or one without Iceberg's jars or a catalog for the table."""
    if _minor(spark) not in ICEBERG_SPARK:
        raise SessionSetupError(
            f"iceberg_table needs Apache Iceberg, which has no runtime for Spark "
            f"{spark.version}: iceberg-spark-runtime-<minor>_2.13 is published for Spark "
            f"{', '.join(ICEBERG_SPARK)} only. Use parquet_table, or a PySpark of those"
        )
    catalog = name.split(".")[0] if name.count(".") >= 2 else "spark_catalog"
    kind = spark.conf.get(f"spark.sql.catalog.{catalog}", "") or ""
    if "iceberg" not in kind.lower() or not _has_class(spark, ICEBERG_CATALOG):
        raise SessionSetupError(
            f"iceberg_table({name!r}) needs Apache Iceberg on the session: start it with "
            f"org.apache.iceberg:iceberg-spark-runtime-{_minor(spark)}_2.13 (spark.jars."
            "packages, or `python tools/kafka/jars.py --classpath iceberg` in this "
            f"repository) and the table's catalog, spark.sql.catalog.{catalog}="
            f"{ICEBERG_CATALOG} with its .type and .warehouse; got "
            f"spark.sql.catalog.{catalog}={kind!r}"
        )


def _has_class(spark: Any, name: str) -> bool:
    """Whether the driver's JVM loads class ``name`` (True over Spark Connect, which
    cannot tell: the server's first write will)."""
    if is_connect(spark):
        return True
    jvm = spark.sparkContext._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(name, False, loader)
    except Exception:
        return False
    return True


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
