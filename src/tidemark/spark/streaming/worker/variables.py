"""The state layouts and the state variables a key group keeps in Spark's state store:
their names and schemas, and their registration with a ``StatefulProcessorHandle``.

In the row layout a group is one row (:mod:`.state`): the value of
``applyInPandasWithState``'s ``GroupState``, or, in ``transformWithStateInPandas`` (a
window of a chain), a ``ValueState`` named :data:`STATE_NAME`. In the deltas layout
(:mod:`.deltas`) a group is three state variables: ``meta``, ``deltas`` and ``base``.
How a layout is chosen and recorded: ``docs/streaming.md`` ("State layouts").

This module imports neither pandas, pyarrow nor the engine, and nor does
:mod:`.processor`: Spark plans a query's first micro-batch by running the processor's
``init`` in a new Python process on the driver, to learn the variables it registers,
and that process imports only what the processor's pickle names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from tidemark.errors import WindowSpecError

__all__ = [
    "ROW",
    "DELTAS",
    "LAYOUTS",
    "StateLayout",
    "STATE_NAME",
    "STATE_SCHEMA",
    "META_NAME",
    "DELTAS_NAME",
    "BASE_NAME",
    "META_SCHEMA",
    "DELTA_KEY",
    "DELTA_VALUE",
    "BASE_KEY",
    "BASE_VALUE",
    "DeltaVariables",
    "register",
]

ROW = "row"
"""The layout of a checkpoint written before layouts were recorded: one row per group."""
DELTAS = "deltas"
"""A base snapshot plus versioned deltas per group (:mod:`.deltas`)."""
LAYOUTS = (ROW, DELTAS)


@dataclass(frozen=True)
class StateLayout:
    """How a query keeps its key groups' state, chosen when it first starts.

    Attributes
    ----------
    name : {"row", "deltas"}
        One row per group (:mod:`.state`), or a base plus deltas (:mod:`.deltas`).
    cache_keys : int
        Deltas: the most keys a Python worker keeps cached, over all groups
        (``spark.tidemark.streaming.stateCacheKeys``).
    compact_bytes : int
        Deltas: the deltas of a group are folded into a new base once their bytes pass
        both a share of the base's (``deltas._spread``) and this
        (``spark.tidemark.streaming.stateCompactBytes``).
    """

    name: str = ROW
    cache_keys: int = 2_000_000
    compact_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if self.name not in LAYOUTS:
            raise WindowSpecError(
                f"`spark.tidemark.streaming.stateLayout` must be one of {list(LAYOUTS)}; "
                f"got {self.name!r}"
            )


STATE_NAME = "tidemark"
"""The row layout's ValueState's name (``stateVarName`` for
``spark.read.format("statestore")``)."""

STATE_SCHEMA = StructType(
    [
        StructField("max_parallelism", LongType(), False),
        StructField("keys", BinaryType(), False),
        StructField("event_timer", LongType(), True),
        StructField("processing_timer", LongType(), True),
        StructField("watermark", LongType(), True),
    ]
)
"""A group's row in the row layout (:class:`~.state.StoredGroup`)."""

META_NAME, DELTAS_NAME, BASE_NAME = "meta", "deltas", "base"
"""The deltas layout's state variables' names (``stateVarName`` for
``spark.read.format("statestore")``)."""

META_SCHEMA = StructType(
    [
        StructField("max_parallelism", LongType(), False),
        StructField("store", LongType(), False),
        StructField("version", LongType(), False),
        StructField("token", LongType(), False),
        StructField("base_version", LongType(), False),
        StructField("base_token", LongType(), False),
        StructField("base_chunks", IntegerType(), False),
        StructField("base_bytes", LongType(), False),
        StructField("delta_bytes", LongType(), False),
        StructField("event_timer", LongType(), True),
        StructField("processing_timer", LongType(), True),
        StructField("watermark", LongType(), True),
    ]
)
DELTA_KEY = StructType([StructField("version", LongType(), False)])
DELTA_VALUE = StructType(
    [
        StructField("parent", LongType(), False),
        StructField("token", LongType(), False),
        StructField("keys", BinaryType(), False),
    ]
)
BASE_KEY = StructType([StructField("chunk", IntegerType(), False)])
BASE_VALUE = StructType([StructField("data", BinaryType(), False)])


class DeltaVariables(NamedTuple):
    """The deltas layout's state variables of one handle (what :mod:`.deltas` says each
    holds)."""

    meta: Any  # ValueState, META_SCHEMA
    deltas: Any  # MapState, DELTA_KEY -> DELTA_VALUE
    base: Any  # MapState, BASE_KEY -> BASE_VALUE


def register(handle: Any, layout: StateLayout) -> Any:
    """The state variables of ``layout``, registered with ``handle`` (a
    ``StatefulProcessorHandle``): the row layout's ValueState, or the deltas layout's
    :class:`DeltaVariables`."""
    if layout.name == DELTAS:
        return DeltaVariables(
            handle.getValueState(META_NAME, META_SCHEMA),
            handle.getMapState(DELTAS_NAME, DELTA_KEY, DELTA_VALUE),
            handle.getMapState(BASE_NAME, BASE_KEY, BASE_VALUE),
        )
    return handle.getValueState(STATE_NAME, STATE_SCHEMA)
