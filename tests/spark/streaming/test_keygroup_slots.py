"""Key groups land evenly on Spark's state partitions, and their number is decided before
a window is built (see tidemark.spark.streaming.driver.keygroups)."""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import functions as F

from tidemark.errors import WindowSpecError
from tidemark.spark.streaming.driver.checkpoint import (
    GROUPS_FILE,
    check_checkpoint_groups,
    read_records,
)
from tidemark.spark.streaming.driver.keygroups import (
    MAX_PARALLELISM_CONF,
    KeyGroups,
    session_max_parallelism,
    session_state_partitions,
    slot_column,
    slots,
    spark_int_hash,
    state_partitions_cap,
)


def test_python_hash_is_sparks_hash_of_an_int(spark):
    values = [-(2**31), -5, -1, 0, 1, 7, 443_428, 2**31 - 1]
    df = spark.createDataFrame([(v,) for v in values], "v int")
    expected = [r.h for r in df.select(F.hash("v").alias("h")).collect()]
    assert [spark_int_hash(v) for v in values] == expected


@pytest.mark.parametrize("groups", [1, 2, 3, 32, 1000])
def test_each_group_has_one_slot_hashing_to_it(groups):
    found = slots(groups)
    assert len(set(found)) == groups
    assert all(spark_int_hash(s) % groups == g for g, s in enumerate(found))


@pytest.mark.parametrize(("groups", "partitions"), [(2, 2), (8, 2), (32, 2), (32, 8), (128, 32)])
def test_spark_places_group_g_in_partition_g_mod_p(spark, groups, partitions):
    keys = spark.range(5000).select(F.concat(F.lit("k"), F.col("id")).alias("key"))
    placed = keys.select(
        F.pmod(F.hash("key"), F.lit(groups)).alias("group"),
        F.pmod(F.hash(slot_column(["key"], groups)), F.lit(partitions)).alias("partition"),
    ).distinct()
    pairs = [(r.group, r.partition) for r in placed.collect()]
    assert sorted(pairs) == [(g, g % partitions) for g in range(groups)]
    assert set(Counter(p for _, p in pairs).values()) == {groups // partitions}


def test_the_checkpoint_keeps_its_number_of_key_groups(spark, tmp_path):
    checkpoint = str(tmp_path / "checkpoint")
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 4)  # first start: recorded
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 4)  # same: starts
    with pytest.raises(WindowSpecError, match=r"has 4 key groups, this query 3.*maxParallelism=4"):
        check_checkpoint_groups(spark, read_records(spark, checkpoint), 3)
    # written with the JVM's file system, read as Spark writes text (and Connect reads it)
    assert [r.value for r in spark.read.text(f"{checkpoint}/{GROUPS_FILE}").collect()] == ["4"]


def test_a_marker_spark_wrote_is_read(spark, tmp_path):
    """Over Connect Spark's text writer writes the marker, as it did on every session before."""
    checkpoint = str(tmp_path / "checkpoint")
    marker = spark.createDataFrame([("6",)], "value string")
    marker.coalesce(1).write.text(f"{checkpoint}/{GROUPS_FILE}")
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 6)
    with pytest.raises(WindowSpecError, match=r"has 6 key groups, this query 8"):
        check_checkpoint_groups(spark, read_records(spark, checkpoint), 8)


def test_the_default_state_partitions_follow_the_cores_and_the_shuffle_partitions(spark):
    """min(shuffle partitions, cores, 32) state partitions, 4 key groups each: Spark's
    default 200 shuffle partitions on this 2-core session give 2, not 200 (or 32)."""
    conf = spark.conf
    before = conf.get("spark.sql.shuffle.partitions")
    assert spark.sparkContext.defaultParallelism == 2
    try:
        for partitions, cap in (("2", 2), ("200", 2), ("1", 1)):
            conf.set("spark.sql.shuffle.partitions", partitions)
            assert session_state_partitions(spark) == cap
            assert session_max_parallelism(spark) == 4 * cap
            assert state_partitions_cap(spark, None) == cap
            assert state_partitions_cap(spark, 6) == 6  # given: one partition per group
        conf.set(MAX_PARALLELISM_CONF, "64")
        assert session_max_parallelism(spark) == 64
        assert state_partitions_cap(spark, None) == 64
    finally:
        conf.unset(MAX_PARALLELISM_CONF)
        conf.set("spark.sql.shuffle.partitions", before)
        conf.unset(MAX_PARALLELISM_CONF)


@pytest.mark.parametrize(
    ("given", "session", "recorded", "decided"),
    [
        pytest.param(None, None, None, KeyGroups(8, 2), id="default"),
        pytest.param(None, None, 8, KeyGroups(8, 2), id="restart-on-the-default"),
        pytest.param(None, None, 3, KeyGroups(3, 3), id="restart-keeps-the-recorded"),
        pytest.param(6, None, None, KeyGroups(6, 6), id="given"),
        pytest.param(6, None, 3, KeyGroups(6, 6), id="given-beats-the-record"),
        pytest.param(None, "5", 3, KeyGroups(5, 5), id="session-beats-the-record"),
    ],
)
def test_the_number_of_key_groups_is_decided_from_what_is_known_first(
    spark, given, session, recorded, decided
):
    """Given (here or by the session) a number is kept, and a restart with another
    record is refused when the query starts; the session's default gives way to the
    number a checkpoint recorded (2 state partitions here, 4 groups each)."""
    if session is not None:
        spark.conf.set(MAX_PARALLELISM_CONF, session)
    try:
        assert KeyGroups.decide(spark, given, recorded) == decided
    finally:
        spark.conf.unset(MAX_PARALLELISM_CONF)
