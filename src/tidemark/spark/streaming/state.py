"""A key's engine state in Spark's state store: one ValueState row of pickled bytes.

Spark's per-key state calls cost about half a millisecond each, so the whole
:class:`~tidemark._engine.keystate.KeyState` (window contents, trigger state, merging
set, function state, timers) is one pickled blob, read once and written once per key per
micro-batch. Beside it the row keeps the key's clocks (the watermark and processing time
it last saw) and the Spark timers registered for it, so the runner can keep Spark's timers
in step with the engine's without listing them. A query with idleness
(:data:`IDLE_STATE_SCHEMA`) also keeps the key's idle clock: the Spark watermark it last
saw and the processing time it first saw it at.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from tidemark._engine.keystate import KeyState
from tidemark.time import LONG_MIN

__all__ = ["STATE_NAME", "STATE_SCHEMA", "IDLE_STATE_SCHEMA", "StoredKey"]

STATE_NAME = "tidemark"
"""The ValueState's name (``stateVarName`` for ``spark.read.format("statestore")``)."""

STATE_SCHEMA = StructType(
    [
        StructField("key_state", BinaryType(), True),
        StructField("watermark", LongType(), False),
        StructField("processing_time", LongType(), False),
        StructField("event_timer", LongType(), True),
        StructField("processing_timer", LongType(), True),
    ]
)

IDLE_STATE_SCHEMA = StructType(
    [
        *STATE_SCHEMA.fields,
        StructField("seen_watermark", LongType(), True),
        StructField("seen_at", LongType(), True),
    ]
)
"""The row of a query with idleness: the state row plus the key's idle clock."""


@dataclass
class StoredKey:
    """What the state store holds for one key.

    Attributes
    ----------
    key_state : KeyState or None
        The engine's state of the key; None when it has none.
    watermark, processing_time : int
        The engine clocks the key last saw (``Long.MIN_VALUE`` / 0 before any).
    event_timer, processing_timer : int or None
        The Spark timer registered for the key's earliest engine timer, if any.
    exists : bool
        Whether the state store has a row for the key.
    seen_watermark, seen_at : int or None
        Idleness only: Spark's watermark the key last saw, and the processing time (ms)
        of the first micro-batch in which the key saw it.
    """

    key_state: KeyState | None = None
    watermark: int = LONG_MIN
    processing_time: int = 0
    event_timer: int | None = None
    processing_timer: int | None = None
    exists: bool = False
    seen_watermark: int | None = None
    seen_at: int | None = None

    @classmethod
    def decode(cls, row: Any) -> StoredKey:
        """A StoredKey from ``ValueState.get()`` (None for a key without state).

        >>> StoredKey.decode(None).exists
        False
        >>> s = StoredKey.decode(StoredKey(KeyState(), 5, 0, 9, None).encode())
        >>> (s.watermark, s.event_timer, s.exists, type(s.key_state).__name__)
        (5, 9, True, 'KeyState')
        >>> idle = StoredKey(KeyState(), 5, 0, None, 7, seen_watermark=3, seen_at=4)
        >>> s = StoredKey.decode(idle.encode(idle=True))
        >>> (s.processing_timer, s.seen_watermark, s.seen_at)
        (7, 3, 4)
        """
        if row is None:
            return cls()
        blob, watermark, processing_time, event_timer, processing_timer, *idle = row
        key_state = pickle.loads(blob) if blob is not None else None
        seen_watermark, seen_at = idle if idle else (None, None)
        return cls(
            key_state,
            watermark,
            processing_time,
            event_timer,
            processing_timer,
            True,
            seen_watermark,
            seen_at,
        )

    def encode(self, idle: bool = False) -> tuple[Any, ...]:
        """The tuple to ``ValueState.update`` with (of :data:`IDLE_STATE_SCHEMA` if ``idle``)."""
        # cloudpickle, so that accumulators of classes defined in a driver script (whose
        # module a worker cannot import) survive; pickle.loads reads it back.
        blob = None if self.key_state is None else cloudpickle.dumps(self.key_state)
        row = (blob, self.watermark, self.processing_time, self.event_timer, self.processing_timer)
        return (*row, self.seen_watermark, self.seen_at) if idle else row
