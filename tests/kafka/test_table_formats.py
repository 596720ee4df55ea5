"""``delta_table`` and ``iceberg_table`` on a session with their jars: a replayed batch is
skipped by the format (Delta's ``txnAppId``/``txnVersion``, Iceberg's snapshot summary),
an empty batch counts as written, and the table belongs to one output of one query.

Here with the Kafka tests, whose session carries the formats' jars (``make kafka-setup``
fetches them where the installed PySpark's minor has a release); a minor without one
skips them. The kill -9 test (``test_kafka_exactly_once.py``) runs both for real.
"""

from __future__ import annotations

import pytest
from conftest import require_format

from tidemark.errors import WindowSpecError
from tidemark.spark.io.sinks import BATCH_ID, QUERY_OUTPUT, delta_table, iceberg_table
from tidemark.spark.streaming.driver.tables import owner_of

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SCHEMA = "k string, v long"


def _sink(spark, fmt, where, checkpoint, output="main"):
    sink = delta_table(where) if fmt == "delta" else iceberg_table(where)
    schema = spark.createDataFrame([], SCHEMA).schema
    sink.claim(spark, owner_of(spark, checkpoint, output), schema)
    return sink


def _read(spark, fmt, where):
    frame = spark.read.format("delta").load(where) if fmt == "delta" else spark.table(where)
    return sorted(tuple(r) for r in frame.collect())


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_replayed_batch_is_written_once(spark, tmp_path, fmt):
    require_format(fmt)
    where = str(tmp_path / "t") if fmt == "delta" else f"tmk.db.replay_{tmp_path.name}"
    checkpoint = str(tmp_path / "ck")
    sink = _sink(spark, fmt, where, checkpoint)
    sink(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    sink(spark.createDataFrame([("b", 2)], SCHEMA), 1)
    sink(spark.createDataFrame([], SCHEMA), 2)
    restarted = _sink(spark, fmt, where, checkpoint)  # a new driver, the same query
    restarted(spark.createDataFrame([("b", 2)], SCHEMA), 1)  # replays: skipped
    restarted(spark.createDataFrame([], SCHEMA), 2)
    restarted(spark.createDataFrame([("c", 3)], SCHEMA), 3)
    assert _read(spark, fmt, where) == [("a", 1), ("b", 2), ("c", 3)]
    if fmt == "iceberg":
        summaries = [r.summary for r in spark.table(f"{where}.snapshots").collect()]
        ours = [s for s in summaries if s.get(QUERY_OUTPUT) == restarted.owner().id]
        batches = [int(s[BATCH_ID]) for s in ours]
        assert len(batches) == len(set(batches)) and {0, 1, 3} <= set(batches)
    with pytest.raises(WindowSpecError, match="belongs to output 'main' of the query"):
        _sink(spark, fmt, where, str(tmp_path / "ck2"))
