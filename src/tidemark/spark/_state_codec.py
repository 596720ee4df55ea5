"""A key's engine state in Spark's state store: one ValueState row of pickled bytes.

Spark's per-key state calls cost about half a millisecond each, so the whole
:class:`~tidemark._engine.keystate.KeyState` (window contents, trigger state, merging
set, function state, timers) is one pickled blob, read once and written once per key per
micro-batch. Beside it the row keeps the key's clocks (the watermark and processing time
it last saw) and the Spark timers registered for it, so the runner can keep Spark's timers
in step with the engine's without listing them.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from tidemark._engine.keystate import KeyState
from tidemark.time import LONG_MIN

__all__ = ["STATE_NAME", "STATE_SCHEMA", "StoredKey"]

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
    """

    key_state: KeyState | None = None
    watermark: int = LONG_MIN
    processing_time: int = 0
    event_timer: int | None = None
    processing_timer: int | None = None
    exists: bool = False

    @classmethod
    def decode(cls, row: Any) -> StoredKey:
        """A StoredKey from ``ValueState.get()`` (None for a key without state).

        >>> StoredKey.decode(None).exists
        False
        >>> s = StoredKey.decode(StoredKey(KeyState(), 5, 0, 9, None).encode())
        >>> (s.watermark, s.event_timer, s.exists, type(s.key_state).__name__)
        (5, 9, True, 'KeyState')
        """
        if row is None:
            return cls()
        blob, watermark, processing_time, event_timer, processing_timer = row
        key_state = pickle.loads(blob) if blob is not None else None
        return cls(key_state, watermark, processing_time, event_timer, processing_timer, True)

    def encode(self) -> tuple[Any, ...]:
        """The tuple to ``ValueState.update`` with."""
        # cloudpickle, so that accumulators of classes defined in a driver script (whose
        # module a worker cannot import) survive; pickle.loads reads it back.
        blob = None if self.key_state is None else cloudpickle.dumps(self.key_state)
        return (blob, self.watermark, self.processing_time, self.event_timer, self.processing_timer)
