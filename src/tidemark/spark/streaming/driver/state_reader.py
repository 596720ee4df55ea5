"""A streaming query's key-group state, read back from its checkpoint with Spark's state
data source (``spark.read.format("statestore")``), in either state layout
(:mod:`~..worker.deltas`): for inspection, explanations (``docs/why-no-result.md``) and
tests, never on a query's path. Spark's data source reads a committed version of the
state store beside a running query without taking its lock or writing anything.

:func:`read_group_rows` reads every group; :func:`read_key_state` one key's
:class:`~tidemark._engine.keystate.KeyState`, reading only its key group's rows (the
group's slot, :mod:`.keygroups`, computed by Spark from the key's columns), at the
latest committed micro-batch or a given one (the data source's ``batchId``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql import functions as F

from tidemark._engine.keystate import KeyState
from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import KEY_GROUP
from tidemark.spark.streaming.driver.checkpoint import read_records
from tidemark.spark.streaming.driver.keygroups import slot_column
from tidemark.spark.streaming.worker.deltas import stored_keys
from tidemark.spark.streaming.worker.state import StoredKey, dump_keys, load_keys
from tidemark.spark.streaming.worker.variables import (
    BASE_NAME,
    DELTAS,
    DELTAS_NAME,
    META_NAME,
    STATE_NAME,
)

__all__ = [
    "read_group_rows",
    "read_groups",
    "read_key_state",
    "KeyStateRead",
    "state_batches",
    "key_slot",
]


def read_group_rows(
    spark: Any, checkpoint: str, batch_id: int | None = None, slot: int | None = None
) -> list[Any]:
    """:func:`read_groups`' rows, without their slots (the first window's)."""
    return [row for _, row in read_groups(spark, checkpoint, batch_id, slot)]


def read_groups(
    spark: Any,
    checkpoint: str,
    batch_id: int | None = None,
    slot: int | None = None,
    last_window: bool = False,
) -> list[tuple[int, Any]]:
    """The key-group rows a query holds in its state store: Rows with the fields of
    :data:`~..worker.variables.STATE_SCHEMA` (``keys``: the group's keys, which
    :func:`~..worker.state.load_keys` reads). Either Spark operator a window runs in is
    read (``applyInPandasWithState``, or ``transformWithStateInPandas`` in a chain or the
    deltas layout: then the first window's); in the deltas layout each group's keys are
    its base and deltas applied. ``batch_id``: the state as that micro-batch left it
    (default: the latest committed); ``slot``: only the key group of that slot;
    ``last_window``: a chain's last window's (default: its first's). Each row comes with
    its group's slot."""
    first = _operator(spark, checkpoint, last_window)
    reader = spark.read.format("statestore").option("path", checkpoint)
    reader = reader.option("operatorId", first.operatorId)
    if batch_id is not None:
        reader = reader.option("batchId", batch_id)
    where = None if slot is None else F.col(f"key.`{KEY_GROUP}`") == F.lit(slot)
    if read_records(spark, checkpoint).layout == DELTAS:
        return _delta_rows(reader, where)
    if "transformWithState" in first.operatorName:
        reader = reader.option("stateVarName", STATE_NAME)
        return [(_slot_of(row.key), row.value) for row in _rows(reader, where)]
    return [(_slot_of(row.key), row.value.groupState) for row in _rows(reader, where)]


def _slot_of(key: Any) -> int:
    return int(key[KEY_GROUP])


def _operator(spark: Any, checkpoint: str, last: bool = False) -> Any:
    operators = spark.read.format("state-metadata").load(checkpoint).collect()
    if not operators:
        raise WindowSpecError(
            f"`checkpoint` must be a streaming query's checkpoint holding state; got "
            f"{checkpoint!r}, where Spark's state metadata lists no stateful operator: "
            "give the checkpoint location the query was started with, after its first "
            "micro-batch"
        )
    choose = max if last else min
    return choose(operators, key=lambda o: o.operatorId)


def state_batches(spark: Any, checkpoint: str) -> tuple[int, int]:
    """The first and last micro-batch whose state the checkpoint still holds."""
    first = _operator(spark, checkpoint)
    return int(first.minBatchId), int(first.maxBatchId)


def _rows(reader: Any, where: Any) -> list[Any]:
    frame = reader.load()
    return (frame if where is None else frame.where(where)).collect()


def _delta_rows(reader: Any, where: Any = None) -> list[tuple[int, Any]]:
    """Each group's ``meta``, base and deltas, composed into the row layout's row."""
    metas = {row.key: row.value for row in _variable(reader, META_NAME, where)}
    bases: dict[Any, list[tuple[int, bytes]]] = {}
    for row in _variable(reader, BASE_NAME, where):
        bases.setdefault(row.key, []).append((row.user_map_key[0], row.user_map_value[0]))
    deltas: dict[Any, list[tuple[int, int, int, bytes]]] = {}
    for row in _variable(reader, DELTAS_NAME, where):
        deltas.setdefault(row.key, []).append((row.user_map_key[0], *row.user_map_value))
    rows = []
    for group, meta in metas.items():
        base = [data for _, data in sorted(bases.get(group, []))]
        after = [d for d in deltas.get(group, []) if d[0] > meta.base_version]
        keys = stored_keys(base, after)
        rows.append(
            (
                _slot_of(group),
                Row(
                    max_parallelism=meta.max_parallelism,
                    keys=dump_keys(keys),
                    event_timer=meta.event_timer,
                    processing_timer=meta.processing_timer,
                    watermark=meta.watermark,
                ),
            )
        )
    return rows


def _variable(reader: Any, name: str, where: Any = None) -> list[Any]:
    return _rows(reader.option("stateVarName", name), where)


@dataclass(frozen=True)
class KeyStateRead:
    """One key's state as a micro-batch left it in the checkpoint.

    Attributes
    ----------
    key : object
        The engine's key.
    batch_id : int
        The micro-batch whose committed state was read.
    stored : StoredKey or None
        What its key group holds for it (its clocks and Spark timers); None: the key
        holds no state (never seen, or every window of it fired and was cleaned).
    state : KeyState or None
        Its window contents, trigger state, merging windows and timers.
    """

    key: Any
    batch_id: int
    stored: StoredKey | None
    state: KeyState | None


def read_key_state(
    spark: Any, checkpoint: str, key: Any, slot: int | None, batch_id: int | None = None
) -> KeyStateRead:
    """The state of ``key`` (the engine's: a column's value, or the tuple of the
    columns') in ``checkpoint`` as micro-batch ``batch_id`` (default: the latest
    committed) left it, read from the key group of ``slot`` (:func:`key_slot`; None:
    every group, for a key Spark cannot hash from its value, a ``key_by`` function's)."""
    if batch_id is None:
        batch_id = state_batches(spark, checkpoint)[1]
    found: StoredKey | None = None
    for _, row in read_groups(spark, checkpoint, batch_id, slot, last_window=True):
        found = load_keys(row.keys).get(key, found)
    state = None if found is None else found.load_state()
    return KeyStateRead(key, batch_id, found, state)


def key_slot(spark: Any, key: Any, key_columns: list[tuple[str, str]], groups: int) -> int:
    """The slot Spark groups ``key``'s rows under (:func:`~.keygroups.slot_column`),
    computed by Spark from a row of the key's columns in their types."""
    values = key if len(key_columns) > 1 else (key,)
    if not isinstance(values, tuple) or len(values) != len(key_columns):
        names = [name for name, _ in key_columns]
        raise WindowSpecError(
            f"`key` must give a value for each key column {names}, as a tuple of "
            f"{len(names)}; got key={key!r}"
        )
    schema = ", ".join(f"`{name}` {kind}" for name, kind in key_columns)
    try:
        row = spark.createDataFrame([values], schema)
    except (TypeError, ValueError) as exc:
        raise WindowSpecError(
            f"`key` must be a value of the key columns' types ({schema}); got key={key!r}: {exc}"
        ) from None
    names = [name for name, _ in key_columns]
    return int(row.select(slot_column(names, groups)).first()[0])
