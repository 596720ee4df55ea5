"""A streaming query's key-group state, read back from its checkpoint with Spark's state
data source (``spark.read.format("statestore")``), in either state layout
(:mod:`~..worker.deltas`): for inspection and tests, not on a query's path."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Row

from tidemark.spark.streaming.driver.checkpoint import stored_layout
from tidemark.spark.streaming.worker.deltas import stored_keys
from tidemark.spark.streaming.worker.state import dump_keys
from tidemark.spark.streaming.worker.variables import (
    BASE_NAME,
    DELTAS,
    DELTAS_NAME,
    META_NAME,
    STATE_NAME,
)

__all__ = ["read_group_rows"]


def read_group_rows(spark: Any, checkpoint: str) -> list[Any]:
    """The key-group rows a query holds in its state store: Rows with the fields of
    :data:`~..worker.variables.STATE_SCHEMA` (``keys``: the group's keys, which
    :func:`~..worker.state.load_keys` reads). Either Spark operator a window runs in is
    read (``applyInPandasWithState``, or ``transformWithStateInPandas`` in a chain or the
    deltas layout: then the first window's); in the deltas layout each group's keys are
    its base and deltas applied."""
    operators = spark.read.format("state-metadata").load(checkpoint).collect()
    first = min(operators, key=lambda o: o.operatorId)
    reader = spark.read.format("statestore").option("path", checkpoint)
    reader = reader.option("operatorId", first.operatorId)
    if stored_layout(spark, checkpoint) == DELTAS:
        return _delta_rows(reader)
    if "transformWithState" in first.operatorName:
        return [row.value for row in reader.option("stateVarName", STATE_NAME).load().collect()]
    return [row.value.groupState for row in reader.load().collect()]


def _delta_rows(reader: Any) -> list[Any]:
    """Each group's ``meta``, base and deltas, composed into the row layout's row."""
    metas = {row.key: row.value for row in _variable(reader, META_NAME)}
    bases: dict[Any, list[tuple[int, bytes]]] = {}
    for row in _variable(reader, BASE_NAME):
        bases.setdefault(row.key, []).append((row.user_map_key[0], row.user_map_value[0]))
    deltas: dict[Any, list[tuple[int, int, int, bytes]]] = {}
    for row in _variable(reader, DELTAS_NAME):
        deltas.setdefault(row.key, []).append((row.user_map_key[0], *row.user_map_value))
    rows = []
    for group, meta in metas.items():
        base = [data for _, data in sorted(bases.get(group, []))]
        after = [d for d in deltas.get(group, []) if d[0] > meta.base_version]
        keys = stored_keys(base, after)
        rows.append(
            Row(
                max_parallelism=meta.max_parallelism,
                keys=dump_keys(keys),
                event_timer=meta.event_timer,
                processing_timer=meta.processing_timer,
                watermark=meta.watermark,
            )
        )
    return rows


def _variable(reader: Any, name: str) -> list[Any]:
    return reader.option("stateVarName", name).load().collect()
