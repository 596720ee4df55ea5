"""BATCH and replay choose their partitions from the session's cores, not from
``spark.sql.shuffle.partitions`` alone: Spark's default of 200 made a small BATCH run
200 Python tasks (7-11 s where 2 partitions took about 1 s)."""

from __future__ import annotations

import contextlib

import pytest

import tidemark as tm
from tidemark.spark.batch.run import PARTITIONS_PER_CORE, engine_partitions

pytestmark = pytest.mark.spark

SHUFFLE = "spark.sql.shuffle.partitions"


@contextlib.contextmanager
def _shuffle_partitions(spark, value: str):
    before = spark.conf.get(SHUFFLE)
    spark.conf.set(SHUFFLE, value)
    try:
        yield
    finally:
        spark.conf.set(SHUFFLE, before)


def test_partitions_are_a_few_per_core_up_to_the_shuffle_partitions(spark):
    cores = spark.sparkContext.defaultParallelism  # 2 in the test session
    with _shuffle_partitions(spark, "200"):
        assert engine_partitions(spark) == PARTITIONS_PER_CORE * cores
    with _shuffle_partitions(spark, "3"):
        assert engine_partitions(spark) == 3  # a lower setting is kept


@pytest.mark.parametrize("order_by", [None, "arrival"], ids=["batch", "replay"])
def test_a_run_on_a_session_with_200_shuffle_partitions_runs_a_few_tasks(spark, order_by):
    rows = [(f"k{i % 7}", i * 100, i) for i in range(200)]
    df = spark.createDataFrame(rows, "k string, ts long, arrival long")
    with _shuffle_partitions(spark, "200"):
        result = (
            tm.from_dataframe(df, timestamp="ts", order_by=order_by)
            .key_by("k")
            .window(tm.TumblingEventTimeWindows.of(1000))
            .reduce(lambda a, b: a)
        )
        combined = result.combined_dataframe()
        assert combined.rdd.getNumPartitions() == engine_partitions(spark) < 200
        assert result.to_dataframe().count() == 7 * 20
    result.unpersist()
