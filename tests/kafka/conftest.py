"""Fixtures of the Kafka tests: the jars, a real broker on loopback, a session with the
connector, topics and a producer.

The broker is Apache Kafka's own, from its jars, in KRaft mode (``tools/kafka/broker.py``),
started once for the session on a free port. Records are produced with Spark's own Kafka
sink, each partition's in the order given. Without the jars (``make kafka-setup``) these
tests are skipped, except under ``make test-kafka`` (``TIDEMARK_REQUIRE_KAFKA=1``),
where that is a failure.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kafka"))
sys.path.insert(0, str(ROOT / "docs" / "examples"))
import broker as kafka_broker  # noqa: E402  (tools/kafka/broker.py)
import jars as kafka_jars_set  # noqa: E402  (tools/kafka/jars.py)
import kafka_fill  # noqa: E402  (docs/examples/kafka_fill.py)
import kafka_job  # noqa: E402  (the session's settings, shared with the killed job)

REQUIRED = os.environ.get("TIDEMARK_REQUIRE_KAFKA") == "1"
_TOPICS = itertools.count()

# Spark's workers import what these tests define by module name.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p
    for p in (
        str(Path(__file__).parent),
        str(ROOT / "docs" / "examples"),
        os.environ.get("PYTHONPATH"),
    )
    if p
)


def read_keys(spark, bootstrap, name, **kwargs):
    """``read_kafka`` of topic ``name``'s records ``{"key": ..., "ts": ...}``."""
    from tidemark.spark.io.kafka import read_kafka

    return read_kafka(
        spark, bootstrap_servers=bootstrap, topic=name, schema="key string, ts long",
        timestamp="ts", **kwargs,
    )  # fmt: skip


def unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason}; `make test-kafka` needs it")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def kafka_jars() -> list[str]:
    """The connector's jars for ``spark.jars``."""
    if not (kafka_jars_set.fetched("connector") and kafka_jars_set.fetched("broker")):
        unavailable("the Kafka jars are not fetched: run `make kafka-setup`")
    if shutil.which(kafka_broker.java()) is None and not os.environ.get("JAVA_HOME"):
        unavailable("no `java` for the Kafka broker")
    return kafka_jars_set.classpath(["connector"])


@pytest.fixture(scope="session")
def bootstrap(kafka_jars, tmp_path_factory) -> str:
    """A broker for the whole session: its bootstrap address."""
    directory = tmp_path_factory.mktemp("kafka-broker")
    address = kafka_broker.start(directory, kafka_broker.free_port())
    yield address
    kafka_broker.stop(directory)


FORMAT_NAMES = {"delta": "Delta Lake", "iceberg": "Apache Iceberg"}


def require_format(name: str) -> None:
    """Skip a test of table format ``name`` where the installed PySpark's minor has no
    release of it (always: nothing to fetch); where it has one, a missing jar is
    :func:`unavailable` (a failure under ``make test-kafka``)."""
    if name == "parquet":
        return
    if not kafka_jars_set.served(name):
        pytest.skip(
            f"{FORMAT_NAMES[name]} publishes no release for Spark "
            f"{kafka_jars_set.installed_minor()} (tools/versions.env)"
        )
    if not kafka_jars_set.fetched(name):
        unavailable(f"the {name} jars are not fetched: run `python tools/kafka/jars.py`")


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> str:
    """The directory of the sessions' Iceberg catalog ``tmk`` (a Hadoop catalog)."""
    return str(tmp_path_factory.mktemp("iceberg-warehouse"))


@pytest.fixture(scope="session")
def spark(kafka_jars, warehouse):
    """A local[2] session with Spark's Kafka connector on its class path, and the table
    formats whose jars are fetched (``kafka_job.session_conf``)."""
    from pyspark.sql import SparkSession

    from tidemark.spark.runtime.session import get_spark

    active = SparkSession.getActiveSession()
    if active is not None and "spark-sql-kafka" not in active.conf.get("spark.jars", ""):
        unavailable("this session started without the Kafka connector: run these tests alone")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = get_spark(
        master="local[2]",
        app_name="tidemark-kafka-tests",
        conf=kafka_job.session_conf(warehouse),
    )
    yield session
    session.stop()


@pytest.fixture
def topic(bootstrap):
    """``make(partitions) -> name``: a new topic of the session's broker."""

    def make(partitions: int) -> str:
        name = f"t{next(_TOPICS)}-{os.getpid()}"
        kafka_broker.create_topic(bootstrap, name, partitions)
        return name

    return make


@pytest.fixture
def produce(spark, bootstrap):
    """``produce(topic, [(partition, value), ...])``: write records, a dict as JSON and a
    str as it is, each partition's in the order given: ``docs/examples/kafka_fill.py``,
    the way ``docs/kafka.md`` gives."""
    return functools.partial(kafka_fill.produce, spark, bootstrap)
