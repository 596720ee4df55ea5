"""Starting a streaming query costs few round trips to the JVM: the expressions built
for every query (each row's key-group slot, the figures observed in every micro-batch)
are parsed by Spark from one SQL text each, not assembled call by call (each call of
PySpark's column functions is a socket round trip, ~1 ms on a busy machine)."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
from py4j import protocol as proto
from py4j.clientserver import ClientServerConnection
from pyspark.sql import functions as F

from tidemark.spark.protocol.figures import figure_columns
from tidemark.spark.streaming.driver.keygroups import slot_column, slots


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many commands the driver sent the JVM since the fixture started (one item
    per command). Py4J's own releases of Java objects that Python's garbage collector
    freed are not the code's round trips: they are left out, and earlier garbage is
    collected first. Only the test's own thread counts: a listener or query thread left
    by an earlier test in the session talks to the JVM on its own connection."""
    sent: list[int] = []
    original = ClientServerConnection.send_command
    release = proto.MEMORY_COMMAND_NAME + proto.MEMORY_DEL_SUBCOMMAND_NAME
    caller = threading.get_ident()
    gc.collect()

    def counted(self: Any, command: str) -> Any:
        if threading.get_ident() == caller and not command.startswith(release):
            sent.append(1)
        return original(self, command)

    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    return sent


@pytest.mark.spark
def test_the_observed_figures_are_built_in_few_round_trips(spark, round_trips):
    figure_columns()
    assert len(round_trips) <= 30


@pytest.mark.spark
@pytest.mark.parametrize("groups", [1, 8])
def test_the_slot_column_is_built_in_few_round_trips_and_gives_each_group_its_slot(
    spark, round_trips, groups
):
    column = slot_column(["a", "b"], groups)
    assert len(round_trips) <= 3
    df = spark.range(200).select(
        (F.col("id") % 7).alias("a"), F.concat(F.lit("k"), F.col("id")).alias("b")
    )
    got = df.select(column.alias("slot"), F.pmod(F.hash("a", "b"), F.lit(groups)).alias("g"))
    table = slots(groups)
    rows = got.collect()
    assert rows and all(r.slot == (r.g if groups == 1 else table[r.g]) for r in rows)
    assert dict(got.dtypes)["slot"] == "int"
