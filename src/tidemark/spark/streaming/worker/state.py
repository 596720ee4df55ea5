"""The engine's state in Spark's state store: one row per key group (the row layout;
the deltas layout, :mod:`.deltas`, keeps the same :class:`StoredGroup` as a base and
versioned deltas instead, see ``docs/streaming.md``, "State layouts").

Spark's state and timer calls cost about half a millisecond each (a socket round trip
between the Python worker and the JVM), so tidemark does not keep a row per key. As
Flink's ``KeyGroupRangeAssignment`` does, keys are hashed into a fixed number of key
groups (``max_parallelism``), and Spark groups rows by key group: one processor call
serves every key of a group in a micro-batch, and one row holds the whole group
(:data:`~.variables.STATE_SCHEMA`):

* ``keys``: engine key -> :class:`StoredKey` (:func:`dump_keys`: the keys and the
  StoredKeys' fields as columns, pickled), whose ``key_state`` is the key's pickled
  :class:`~tidemark._engine.keystate.KeyState` (window contents, trigger state, merging
  set, function state, timers). A call decodes the keys, but only the keys it touches
  are unpickled further and pickled again; the others keep their bytes.
* beside each key its clocks (the watermark and processing time it last saw), the Spark
  timers it would have registered on its own, and with idleness its idle clock;
* the group's Spark timers: the earliest of its keys' (one timer per time domain), so a
  timer expiry visits only the keys whose own timer is due (in a ProcessingTime query,
  where Spark holds no event-time timer, the event-time one is only noted here, and the
  group's processing-time timer brings it back in the next micro-batch to compare it
  with the watermark);
* the ``max_parallelism`` the query started with, so that a restart with another
  value fails instead of reading state into the wrong groups;
* Spark's watermark at the group's last call: in a chain, a window whose results feed
  a later one is called at every watermark advance while it holds keys, so this is the
  watermark it forwarded last, which its results fired on the next advance follow
  (:mod:`~tidemark.spark.streaming.driver.chain`).

The row is read once and written (or cleared, when no key is left) once per call.
"""

from __future__ import annotations

import copyreg
import heapq
import io
import pickle
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from operator import attrgetter, is_not
from typing import Any, NamedTuple

from pyspark import cloudpickle

from tidemark._engine.keystate import KeyState
from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.codec import row_reductions, rows_as_columns
from tidemark.time import LONG_MIN

__all__ = [
    "StoredKey",
    "StoredGroup",
    "dump_key_state",
    "dump_keys",
    "load_keys",
    "dumps",
    "parallelism_changed",
]


class StoredKey(NamedTuple):
    """What a key group's row holds for one key.

    Attributes
    ----------
    key_state : bytes or None
        The pickled KeyState of the key; None when the key only keeps its clocks.
    watermark, processing_time : int
        The engine clocks the key last saw (``Long.MIN_VALUE`` / 0 before any).
    event_timer, processing_timer : int or None
        The Spark timer the key needs on its own (the event-time one on Spark's
        watermark clock, even where Spark cannot hold it): the group's is the earliest.
    seen_watermark, seen_at : int or None
        Idleness only: Spark's watermark the key last saw, and the processing time (ms)
        of the first micro-batch in which the key saw it.
    """

    key_state: bytes | None = None
    watermark: int = LONG_MIN
    processing_time: int = 0
    event_timer: int | None = None
    processing_timer: int | None = None
    seen_watermark: int | None = None
    seen_at: int | None = None

    def load_state(self) -> KeyState | None:
        if self.key_state is None:
            return None
        state = pickle.loads(self.key_state)
        return KeyState.from_packed(state) if type(state) is tuple else state


NEW_KEY = StoredKey()


def dump_key_state(key_state: KeyState) -> bytes:
    """A KeyState's bytes (see :func:`dumps`): its :meth:`~KeyState.packed` form where it
    has one, a window's Rows in it as columns (:func:`~tidemark.spark.protocol.codec.rows_as_columns`,
    which unpickle as the Rows), else the object (:meth:`StoredKey.load_state` reads
    either)."""
    packed = key_state.packed()
    if packed is None:
        return dumps(key_state)
    contents = packed[0]  # [start, end, value, ...], built by packed()
    for at in range(2, len(contents), 3):
        value = contents[at]
        if type(value) is list:
            columns = rows_as_columns(value)
            if columns is not None:
                contents[at] = columns
    return dumps(packed)


class _Dumper(threading.local):
    """A pickler per thread that writes the reader's Rows as their row type
    (:func:`tidemark.spark.protocol.codec.row_reductions`: they come back as the same kind of Row), reused
    while what it writes is small: a call pickles every key it visits, and a pickler
    costs more to build than a small key state to write, but it then sizes its buffer
    by the largest pickle it wrote."""

    def __init__(self) -> None:
        self._table: dict[Any, Any] = {}
        self._new_pickler()

    def _new_pickler(self) -> None:
        self.out = io.BytesIO()
        self.pickler = pickle.Pickler(self.out, protocol=pickle.HIGHEST_PROTOCOL)
        self.pickler.dispatch_table = self._table

    def dumps(self, value: Any) -> bytes:
        table, rows = self._table, row_reductions()
        if len(table) != len(copyreg.dispatch_table) + len(rows):  # a class added since
            table.clear()
            table.update(copyreg.dispatch_table)
            table.update(rows)
        out, pickler = self.out, self.pickler
        out.seek(0)
        out.truncate()
        try:
            pickler.dump(value)
        finally:
            pickler.clear_memo()  # holds what it wrote until cleared
        written = out.getvalue()
        if len(written) > _REUSED_UP_TO:
            self._new_pickler()
        return written


_REUSED_UP_TO = 1 << 14  # bytes a reused pickler may write

_DUMPER = _Dumper()


def dumps(value: Any) -> bytes:
    """pickle (:class:`_Dumper`), or cloudpickle for values of classes that only
    exist by value (defined in a driver script, whose module a worker cannot import);
    ``pickle.loads`` reads both, and what plain pickle wrote before."""
    try:
        return _DUMPER.dumps(value)
    except Exception:
        return cloudpickle.dumps(value)


_KEY_COLUMNS = "tidemark-key-columns-1"
"""The first item of what :func:`dump_keys` pickles (a pickled dict came before it)."""


def dump_keys(keys: Mapping[Any, StoredKey | None]) -> bytes:
    """``keys`` (None for a key dropped: a delta's) as columns, pickled: the keys, each
    :class:`StoredKey` field's values, the dropped keys. Columns of bytes and ints pickle
    without a Python call per key, where a dict of StoredKeys made one per key to
    reduce each (the figures are in benchmarks/README.md).

    >>> back = load_keys(dump_keys({"a": StoredKey(b"x", 5), "b": None}))
    >>> back["a"].key_state, back["a"].watermark, back["b"]
    (b'x', 5, None)
    """
    stored = [key for key, value in keys.items() if value is not None]
    dropped = [key for key, value in keys.items() if value is None]
    columns = list(zip(*(keys[key] for key in stored)))
    return dumps((_KEY_COLUMNS, stored, columns, dropped))


def load_keys(blob: bytes) -> dict[Any, Any]:
    """The keys :func:`dump_keys` wrote (or a pickled dict of them, as written before)."""
    value = pickle.loads(blob)
    if type(value) is dict:
        return value
    _, stored, columns, dropped = value
    keys: dict[Any, Any] = dict(zip(stored, map(tuple.__new__, repeat(StoredKey), zip(*columns))))
    keys.update(dict.fromkeys(dropped))
    return keys


@dataclass
class StoredGroup:
    """A key group's row, decoded: its keys and the Spark timers registered for it.

    >>> g = StoredGroup.decode(None, 128)
    >>> (g.exists, g.keys)
    (False, {})
    >>> g.keys["a"] = StoredKey(None, 5, 0, 9)
    >>> g.event_timer = 9
    >>> back = StoredGroup.decode(g.encode(128), 128)
    >>> (back.keys["a"].watermark, back.event_timer, back.exists)
    (5, 9, True)
    >>> from tidemark.errors import WindowSpecError
    >>> try:
    ...     StoredGroup.decode(g.encode(128), 64)
    ... except WindowSpecError as exc:
    ...     print(str(exc)[:62])
    `max_parallelism` must stay what the query first started with:
    """

    keys: dict[Any, StoredKey] = field(default_factory=dict)
    event_timer: int | None = None
    processing_timer: int | None = None
    exists: bool = False
    watermark: int | None = None  # Spark's watermark (ms) at the group's last call
    changed: set[Any] = field(default_factory=set)
    """The keys a call stored or dropped (:mod:`.deltas` writes them; a row is whole)."""
    timers: KeyTimers | None = None
    """The keys' Spark timers, kept key by key (the deltas layout's; else None)."""

    @classmethod
    def decode(cls, row: Any, max_parallelism: int) -> StoredGroup:
        """The group from ``ValueState.get()`` (None for a group without state)."""
        if row is None:
            return cls()
        stored_parallelism, blob, event_timer, processing_timer, watermark = row
        if stored_parallelism != max_parallelism:
            raise parallelism_changed(stored_parallelism, max_parallelism, "the state row")
        return cls(load_keys(blob), event_timer, processing_timer, True, watermark)

    def encode(self, max_parallelism: int) -> tuple[Any, ...]:
        """The tuple to ``ValueState.update`` with."""
        return (
            max_parallelism,
            dump_keys(self.keys),
            self.event_timer,
            self.processing_timer,
            self.watermark,
        )

    def earliest_timers(self) -> tuple[int | None, int | None]:
        """The earliest event-time and processing-time Spark timers of the group's keys
        (from :attr:`timers` where the group has them, else by a pass over the keys)."""
        if self.timers is not None:
            return self.timers.event.earliest(), self.timers.processing.earliest()
        stored = self.keys.values()
        event = filter(_NOT_NONE, map(_EVENT_TIMER, stored))
        processing = filter(_NOT_NONE, map(_PROCESSING_TIMER, stored))
        return min(event, default=None), min(processing, default=None)

    def replace(self, key: Any, old: StoredKey, new: StoredKey | None) -> None:
        """Store ``new`` for ``key`` (None: drop the key), whose stored value was ``old``
        (:data:`NEW_KEY` for a key not stored); :attr:`timers` follow."""
        self.changed.add(key)
        if self.timers is not None:
            self.timers.replace(old, new)
        if new is None:
            self.keys.pop(key, None)
        else:
            self.keys[key] = new


_EVENT_TIMER = attrgetter("event_timer")
_PROCESSING_TIMER = attrgetter("processing_timer")
_NOT_NONE = partial(is_not, None)


class KeyTimers:
    """The Spark timers a group's keys hold, per time domain (:class:`EarliestTime`),
    kept up to date key by key: the deltas layout keeps them with a worker's copy of a
    group, so a call finds the group's earliest timers without a pass over every live
    key (a pass cost ~0.1 s a call per 450,000 keys)."""

    def __init__(self, keys: Mapping[Any, StoredKey]):
        stored = keys.values()
        self.event = EarliestTime(filter(_NOT_NONE, map(_EVENT_TIMER, stored)))
        self.processing = EarliestTime(filter(_NOT_NONE, map(_PROCESSING_TIMER, stored)))

    def replace(self, old: StoredKey | None, new: StoredKey | None) -> None:
        """A key's stored value goes from ``old`` to ``new`` (None: not stored)."""
        if old is not None:
            self.event.remove(old.event_timer)
            self.processing.remove(old.processing_timer)
        if new is not None:
            self.event.add(new.event_timer)
            self.processing.add(new.processing_timer)


class EarliestTime:
    """A multiset of times (how many keys hold each) and its least.

    >>> times = EarliestTime([7, 5, 5])
    >>> times.remove(5); times.earliest()
    5
    >>> times.remove(5); times.add(None); times.earliest()
    7
    >>> times.remove(7); print(times.earliest())
    None
    """

    def __init__(self, times: Iterable[int]):
        self._counts: Counter[int] = Counter(times)
        self._heap = list(self._counts)  # every time held, and times no longer held
        heapq.heapify(self._heap)

    def add(self, time: int | None) -> None:
        if time is None:
            return
        held = self._counts[time]
        self._counts[time] = held + 1
        if not held:
            heapq.heappush(self._heap, time)
            if len(self._heap) > 2 * len(self._counts) + 64:
                self._heap = list(self._counts)
                heapq.heapify(self._heap)

    def remove(self, time: int | None) -> None:
        if time is None:
            return
        held = self._counts[time] - 1
        if held > 0:
            self._counts[time] = held
        else:
            del self._counts[time]

    def earliest(self) -> int | None:
        heap, counts = self._heap, self._counts
        while heap and heap[0] not in counts:
            heapq.heappop(heap)
        return heap[0] if heap else None


def parallelism_changed(stored: int, wanted: int, where: str) -> WindowSpecError:
    """The error for a restart with another number of key groups than ``where`` (the
    checkpoint, or a group's row) holds: the one message, naming the fix."""
    return WindowSpecError(
        f"`max_parallelism` must stay what the query first started with: {where} has "
        f"{stored} key groups, this query {wanted}. Restart with "
        f"spark.tidemark.streaming.maxParallelism={stored} (by default it follows "
        "the session: 4 x min(shuffle partitions, cores, 32)), or start a new checkpoint"
    )
