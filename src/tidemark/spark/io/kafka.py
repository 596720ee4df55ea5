"""Reading a Kafka topic of JSON records: :func:`read_kafka`, a source for ``from_dataframe``.

Spark's own Kafka connector reads the topic (tidemark speaks no Kafka); this module
parses each record's value as a JSON object of the given schema and keeps Kafka's
``partition``, ``offset`` and record timestamp beside the fields, so that the stream can
carry per-partition watermarks (``from_dataframe(..., partition_column="partition")``)
and a replay of a recorded topic can order rows as they arrived.

A record is *malformed* when its value is missing, is not a JSON object of the schema
(bad JSON, or a field of the wrong type: a JSON number or object in a string field too,
which Spark's ``from_json`` would read as its text), or lacks the event-time field. By default a
malformed record fails the job with :class:`~tidemark.errors.InputDataError` naming its
topic, partition and offset; with ``on_malformed="side_output"`` it goes to
:attr:`KafkaRecords.malformed` instead. It is never skipped silently.

The guide, with the set-up of the connector's jars: ``docs/kafka.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from tidemark.errors import InputDataError, SessionSetupError, WindowSpecError
from tidemark.spark.protocol.columns import CORRUPT
from tidemark.spark.protocol.schemas import parse_schema
from tidemark.spark.protocol.source_partitions import PARTITION_COUNT, PARTITION_SOURCE
from tidemark.spark.runtime.session import is_connect
from tidemark.spark.runtime.surfacing import raise_error_column, surface_tidemark_errors

__all__ = [
    "read_kafka",
    "topic_partitions",
    "KafkaRecords",
    "KAFKA_COLUMNS",
    "MALFORMED_SCHEMA",
    "CONNECTOR",
]

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
"""Spark's Kafka connector (Maven coordinates without the version: the session's Spark's)."""

KAFKA_COLUMNS = ("partition", "offset", "kafka_timestamp")
"""The columns :attr:`KafkaRecords.rows` adds to the schema's fields."""

MALFORMED_SCHEMA = (
    "topic string, partition int, offset long, kafka_timestamp timestamp, "
    "key string, value string, error string"
)
"""The columns of :attr:`KafkaRecords.malformed`."""

_ON_MALFORMED = ("fail", "side_output")


@dataclass(frozen=True)
class KafkaRecords:
    """A topic's records, parsed.

    Attributes
    ----------
    rows : DataFrame
        The schema's fields, then ``partition`` (int), ``offset`` (long) and
        ``kafka_timestamp`` (the record's timestamp). Streaming or bounded, as read.
    malformed : DataFrame
        The malformed records (:data:`MALFORMED_SCHEMA`; ``error`` says what is wrong).
        With ``on_malformed="fail"`` they fail ``rows`` instead; read this to look.
    """

    rows: DataFrame
    malformed: DataFrame


def read_kafka(
    spark: Any,
    *,
    bootstrap_servers: str,
    topic: str,
    schema: StructType | str,
    timestamp: str,
    on_malformed: str = "fail",
    streaming: bool = True,
    options: dict[str, str] | None = None,
) -> KafkaRecords:
    """Read ``topic``'s JSON records with Spark's Kafka connector.

    Parameters
    ----------
    spark : SparkSession
        With Spark's Kafka connector on its class path (``docs/kafka.md``).
    bootstrap_servers : str
        ``host:port,...`` of the brokers.
    topic : str
    schema : StructType or str
        The fields of a record's JSON object (a DDL string such as
        ``"user string, ts long"``); fields it does not name are ignored.
    timestamp : str
        The field holding event time: a record without it is malformed.
    on_malformed : {"fail", "side_output"}
        What a malformed record does: fail the job naming its partition and offset, or
        go to :attr:`KafkaRecords.malformed`.
    streaming : bool
        A streaming DataFrame (``readStream``), else the topic's records up to now.
    options : dict, optional
        More options of Spark's Kafka source; ``startingOffsets`` defaults to
        ``"earliest"`` (every record the topic holds). The ``kafka.*`` ones also serve
        the look-up of the topic's partitions (:func:`topic_partitions`), which waits
        ``kafka.default.api.timeout.ms`` (default 60 s) at most.

    Returns
    -------
    KafkaRecords
        Its ``partition`` column records the topic's partition count (metadata), which
        ``from_dataframe(..., partitions=)`` must equal.

    Raises
    ------
    WindowSpecError
        The topic does not exist.
    InputDataError
        The brokers did not answer within the time limit.
    """
    surface_tidemark_errors()  # a malformed record fails a plain action as tidemark's
    fields = _schema(schema, spark)
    _check(fields, timestamp, on_malformed)
    raw = _load(spark, bootstrap_servers, topic, streaming, options or {})
    count = topic_partitions(spark, bootstrap_servers, topic, options or {})
    parsed = raw.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast(StringType()).alias("key"),
        F.col("value").cast(StringType()).alias("value"),
    ).withColumn("json", F.from_json("value", _with_corrupt(fields), _PERMISSIVE))
    error = _error(timestamp, fields)
    values = [F.col(f"json.`{f.name}`").alias(f.name) for f in fields.fields]
    # the topic's partitions, for from_dataframe to check `partitions` against
    counted = (
        {} if count is None else {PARTITION_COUNT: count, PARTITION_SOURCE: f"topic {topic!r}"}
    )
    partition = F.col("partition").alias("partition", metadata=counted)
    kafka = [partition, F.col("offset"), F.col("kafka_timestamp")]
    good = parsed.where(_failing(error) if on_malformed == "fail" else error.isNull())
    malformed = parsed.where(error.isNotNull()).select(
        "topic", "partition", "offset", "kafka_timestamp", "key", "value", error.alias("error")
    )
    return KafkaRecords(good.select(*values, *kafka), malformed)


_PERMISSIVE = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


def _schema(schema: Any, spark: Any) -> StructType:
    fields = parse_schema(schema, spark) if isinstance(schema, str) else schema
    if not isinstance(fields, StructType):
        raise WindowSpecError(f"`schema` must be a StructType or a DDL string; got {schema!r}")
    return fields


def _check(fields: StructType, timestamp: str, on_malformed: str) -> None:
    names = fields.fieldNames()
    if timestamp not in names:
        raise WindowSpecError(
            f"`timestamp` must name a field of `schema`; got {timestamp!r}; fields: {names}"
        )
    clash = [n for n in names if n in KAFKA_COLUMNS or n == CORRUPT]
    if clash:
        raise WindowSpecError(
            f"`schema` fields {clash} clash with the columns read_kafka adds "
            f"{list(KAFKA_COLUMNS)}: rename them in the schema"
        )
    if on_malformed not in _ON_MALFORMED:
        raise WindowSpecError(
            f"`on_malformed` must be one of {list(_ON_MALFORMED)}; got {on_malformed!r}"
        )


def _load(spark: Any, servers: str, topic: str, streaming: bool, options: dict[str, str]) -> Any:
    reader = (spark.readStream if streaming else spark.read).format("kafka")
    settings = {"startingOffsets": "earliest", **options}
    settings.update({"kafka.bootstrap.servers": servers, "subscribe": topic})
    for name, value in settings.items():
        reader = reader.option(name, value)
    try:
        return reader.load()
    except AnalysisException as exc:
        if "DATA_SOURCE_NOT_FOUND" not in str(exc) and "Failed to find data source" not in str(exc):
            raise
        raise SessionSetupError(
            "Spark's Kafka connector is not on the session's class path: start the "
            f"session with spark.jars.packages={CONNECTOR}:<your Spark's version> (or "
            "spark.jars listing its jars; `make kafka-setup` caches them in "
            "tools/kafka/.jars/connector)"
        ) from exc


def topic_partitions(spark: Any, servers: str, topic: str, options: dict[str, str]) -> int | None:
    """The number of partitions ``topic`` has now, asked of the brokers with Kafka's own
    client (the connector's) on the driver; None over Spark Connect (no driver JVM).

    Raises
    ------
    WindowSpecError
        The topic does not exist (Spark would fail later with its whole plan, never
        naming the topic).
    InputDataError
        The brokers did not answer within ``kafka.default.api.timeout.ms`` (default
        60 s): Spark's own source would wait without end (``availableNow`` included).
    """
    if is_connect(spark):
        return None
    jvm = spark._jvm
    settings = jvm.java.util.Properties()
    for name, value in options.items():
        if name.startswith("kafka."):  # the client's own settings (security, timeouts)
            settings.put(name[len("kafka.") :], str(value))
    settings.put("bootstrap.servers", servers)
    for name in ("key.deserializer", "value.deserializer"):
        settings.put(name, "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    timeout_ms = int(options.get("kafka.default.api.timeout.ms", _LOOKUP_TIMEOUT_MS))
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(settings)
    try:
        found = consumer.partitionsFor(topic, jvm.java.time.Duration.ofMillis(timeout_ms))
    except Py4JJavaError as exc:
        if "TimeoutException" not in str(exc):
            raise
        raise InputDataError(
            f"Kafka's brokers at {servers} did not answer within {timeout_ms}ms when asked "
            f"for topic {topic!r}: check `bootstrap_servers` and that the brokers are up "
            "(the limit is option kafka.default.api.timeout.ms)"
        ) from None
    finally:
        consumer.close()
    if found is None or found.isEmpty():
        raise WindowSpecError(
            f"`topic` {topic!r} does not exist on the brokers at {servers}: create it, or "
            "name a topic that exists"
        )
    return int(found.size())


_LOOKUP_TIMEOUT_MS = 60_000


def _with_corrupt(fields: StructType) -> StructType:
    return StructType([*fields.fields, StructField(CORRUPT, StringType())])


def _error(timestamp: str, fields: StructType) -> Any:
    """What is wrong with a record (null when nothing is)."""
    error = (
        F.when(F.col("json").isNull(), F.lit("it has no value (a null or empty record)"))
        .when(
            F.col(f"json.{CORRUPT}").isNotNull(),
            F.lit(
                "its value is not a JSON object of the schema (bad JSON, or a field of "
                "the wrong type)"
            ),  # fmt: skip
        )
        .when(
            F.col(f"json.`{timestamp}`").isNull(),
            F.lit(f"it has no event time: field {timestamp!r} is missing or null"),
        )
    )
    not_strings = _not_strings(fields)
    return error if not_strings is None else F.coalesce(error, not_strings)


def _not_strings(fields: StructType) -> Any:
    """The first string field of the schema (nested in structs too) whose JSON value is
    not a JSON string, named with what it is; null when there is none.

    Spark's ``from_json`` reads any JSON value into a string field (``123`` as
    ``"123"``, an object as its text); the value is read again as a variant to tell."""
    paths = _string_paths(fields, "$", ())
    if not paths:
        return None
    variant = F.try_parse_json(F.col("value"))
    wrong = []
    for path, name in paths:
        kind = F.schema_of_variant(F.try_variant_get(variant, path, "variant"))
        message = F.concat(
            F.lit(f"its field {name!r} is a string in the schema and a JSON "),
            kind,
            F.lit(" in the value"),
        )
        wrong.append(F.when(kind.isNotNull() & ~kind.isin("STRING", "VOID"), message))
    return F.coalesce(*wrong)


def _string_paths(fields: StructType, path: str, names: tuple[str, ...]) -> list[tuple[str, str]]:
    """(variant path, dotted name) of each string field, nested in structs too."""
    found = []
    for field in fields.fields:
        inner = f"{path}['{field.name}']" if "'" not in field.name else None
        if inner is None:
            continue  # a name the variant path cannot quote: left to from_json
        dotted = (*names, field.name)
        if isinstance(field.dataType, StringType):
            found.append((inner, ".".join(dotted)))
        elif isinstance(field.dataType, StructType):
            found.extend(_string_paths(field.dataType, inner, dotted))
    return found


def _failing(error: Any) -> Any:
    """A filter condition that is true for a good record and fails the job on a
    malformed one, naming it (Spark's ``raise_error``, read back as tidemark's error)."""
    return F.when(error.isNotNull(), raise_error_column(InputDataError, _message(error))).otherwise(
        F.lit(True)
    )


def _message(error: Any) -> Any:
    value = F.coalesce(F.substring(F.col("value"), 1, 200), F.lit("null"))
    return F.concat(
        F.lit("a Kafka record of topic "),
        F.col("topic"),
        F.lit(" at partition="),
        F.col("partition").cast(StringType()),
        F.lit(", offset="),
        F.col("offset").cast(StringType()),
        F.lit(" is malformed: "),
        error,
        F.lit("; value: "),
        value,
        F.lit(
            ". Fix the producer, or read the topic with on_malformed='side_output' to send "
            "such records to KafkaRecords.malformed"
        ),
    )
