"""The "deltas" state layout: a key group's keys as a base snapshot plus versioned deltas,
so that a call writes the keys it changed, not every key of its group.

In the row layout (:mod:`.state`) a group's keys are one row, read and written whole at
every call: a micro-batch's cost and the checkpoint follow the live state. Here, in
``transformWithStateInPandas``, a group keeps three state variables:

* ``meta`` (``ValueState``, :data:`~.variables.META_SCHEMA`): the ``max_parallelism`` the query
  started with, the store's id (random, drawn at the group's first write), the version
  and its token (random, drawn at every write), the base's version, token, chunk count
  and bytes, the bytes of the deltas since the base, and what the row layout's row
  holds beside its keys (the group's Spark timers, Spark's watermark at its last call);
* ``deltas`` (``MapState`` version -> parent token, token, blob): per version, the keys
  its call changed (``{key: StoredKey, or None for a key dropped}``, as
  :func:`~.state.dump_keys` writes them), with the token of the version it follows;
* ``base`` (``MapState`` chunk -> bytes): every key as of the base's version (as
  :func:`~.state.dump_keys` writes them, in chunks), rewritten (a compaction) once the
  deltas' bytes outgrow a share of it between a half and one and a half (drawn per base:
  :func:`_spread`) and :attr:`StateLayout.compact_bytes`; the deltas before it then go,
  but for the last :data:`KEPT_DELTAS`. So the state stays within two and a half times
  the live keys' bytes (one and a half on average), with the kept deltas beside it.

Each Python worker caches the groups it served (:class:`GroupCache`: store id ->
version, token, keys and their timers, :class:`~.state.KeyTimers`; least recently used
evicted beyond :attr:`StateLayout.cache_keys` keys). A call *takes* its group's entry
out of the cache, catches it up with the deltas it misses (each checked by the token of
the version it follows), or reads the group cold (the base and every delta) when the
entry is missing, of another store, ahead of ``meta`` (a retried micro-batch: Spark's
state rolled back), or cannot be caught up; it puts the entry back only once its writes
are done. A call that fails midway leaves nothing behind, and a version the worker did
not see written or read is never trusted: a retried micro-batch writes the same version
number with a new token. How the layout is chosen and recorded: ``docs/streaming.md``
("State layouts").

On PySpark 4.0, whose state server may read a large value in part (SPARK-53870,
:func:`value_bytes_limit`), no value written passes :data:`STATE_SERVER_VALUE_BYTES`: the
base goes in chunks of it, a delta over it as several versions (each a part of the keys,
:func:`_delta_blobs`), and a call changing a key larger than it alone compacts instead.
Both are what the layout reads on any release, so a checkpoint moves between releases.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pyspark

from tidemark.errors import WindowSpecError
from tidemark.spark.streaming.worker.state import (
    KeyTimers,
    StoredGroup,
    StoredKey,
    dump_keys,
    load_keys,
    parallelism_changed,
)
from tidemark.spark.streaming.worker.variables import DeltaVariables, StateLayout

__all__ = [
    "DeltaState",
    "GroupCache",
    "CACHE",
    "apply_delta",
    "stored_keys",
    "STATE_SERVER_VALUE_BYTES",
    "value_bytes_limit",
]

CHUNK_BYTES = 4 << 20
"""The most bytes of one base chunk (one ``MapState`` value)."""

KEPT_DELTAS = 4
"""The deltas up to a compaction's version kept after it (the compaction's own among
them), so that a worker's copy that many versions behind still catches up rather than
reading the new base whole; older ones go at the next compaction."""


STATE_SERVER_VALUE_BYTES = 63 << 10
"""The most bytes of one state value written through PySpark 4.0's state server: with
the request's other fields, within the 64 KiB PySpark sends in one socket write (its
buffer), far below the sizes its server was seen to read in part (2 MB and more)."""


def value_bytes_limit(version: str = pyspark.__version__) -> int | None:
    """The most bytes of one state value that the state server of PySpark ``version``
    surely reads whole (None: any).

    Spark 4.0's ``TransformWithStateInPandasStateServer`` reads a request with one
    ``InputStream.read``, which returns the bytes arrived so far: a request of a few MB
    is at times read in part, and the update fails (``invalid pickle opcode: 0``) and
    the query with it. SPARK-53870 reads it whole (``readFully``) from Spark 4.1.0; its
    backport to 4.0 came after 4.0.1, and is not assumed here: every 4.0 release keeps
    the limit (which costs only more, smaller writes). Measured on 4.0.0 (one value
    written per task, 10 tasks a size): 1 MB never failed, 2 MB once, 4 MB six times.

    >>> [value_bytes_limit(v) for v in ("4.0.0", "4.1.1", "4.2.0")]
    [64512, None, None]
    """
    return STATE_SERVER_VALUE_BYTES if version.split(".")[:2] == ["4", "0"] else None


def _delta_blobs(changed: dict[Any, Any], limit: int | None) -> list[bytes] | None:
    """``changed`` (:func:`~.state.dump_keys`) as one delta, or, over ``limit`` bytes, as
    several, each a part of the keys within it: None where a key alone passes it."""
    blob = dump_keys(changed)
    if limit is None or len(blob) <= limit:
        return [blob]
    if len(changed) == 1:
        return None
    items = list(changed.items())
    half = len(items) // 2
    first = _delta_blobs(dict(items[:half]), limit)
    second = _delta_blobs(dict(items[half:]), limit)
    return None if first is None or second is None else first + second


def _spread(base_token: int) -> float:
    """The share of its base's bytes a group's deltas may reach before a compaction:
    between 0.5 and 1.5, drawn from the base's random token, so that groups of one
    query, alike in size and growth, compact at different calls rather than all in the
    same micro-batch (one compaction rewrites a whole group)."""
    return 0.5 + (base_token % 1024) / 1024


def _token() -> int:
    return random.getrandbits(62)


@dataclass
class _Entry:
    """A worker's copy of one group's keys at one version."""

    version: int
    token: int
    keys: dict[Any, StoredKey]
    timers: KeyTimers | None = None  # the keys' timers (None: found by a pass over the keys)


class GroupCache:
    """The groups a worker holds, by store id, least recently used first; at most
    ``limit`` keys over all groups (a group larger than that is not kept)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self.keys = 0

    def take(self, store: int) -> _Entry | None:
        """The entry of ``store``, out of the cache (a failed call leaves none behind)."""
        entry = self._entries.pop(store, None)
        if entry is not None:
            self.keys -= len(entry.keys)
        return entry

    def put(self, store: int, entry: _Entry, limit: int) -> None:
        """Keep ``entry`` as the most recently used; evict the least recently used
        beyond ``limit`` keys."""
        self.take(store)
        if len(entry.keys) > limit:
            return
        self._entries[store] = entry
        self.keys += len(entry.keys)
        while self.keys > limit:
            _, evicted = self._entries.popitem(last=False)
            self.keys -= len(evicted.keys)

    def __contains__(self, store: int) -> bool:
        return store in self._entries

    def clear(self) -> None:
        self._entries.clear()
        self.keys = 0


CACHE = GroupCache()
"""The worker's cache: module level, so every processor of the worker shares it."""


def apply_delta(keys: dict[Any, StoredKey], blob: bytes, timers: KeyTimers | None = None) -> None:
    """Apply one delta's ``{key: StoredKey or None}`` (:func:`~.state.dump_keys`) to
    ``keys`` (and to their ``timers``)."""
    for key, stored in load_keys(blob).items():
        if timers is not None:
            timers.replace(keys.get(key), stored)
        if stored is None:
            keys.pop(key, None)
        else:
            keys[key] = stored


def stored_keys(base: list[bytes], deltas: list[tuple[int, int, int, bytes]]) -> dict[Any, Any]:
    """A group's keys from its base chunks (in order) and its deltas
    ``(version, parent, token, blob)`` after the base (in any order)."""
    keys: dict[Any, StoredKey] = load_keys(b"".join(base)) if base else {}
    for _, _, _, blob in sorted(deltas):
        apply_delta(keys, blob)
    return keys


class DeltaState:
    """A group's state in this layout, in the state variables registered with its
    handle (:class:`~.variables.DeltaVariables`): what :class:`~.bindings.ProcessorCalls`
    reads (:meth:`read`) and writes (:meth:`write`, :meth:`clear`) in each call, in that
    order."""

    def __init__(
        self,
        variables: DeltaVariables,
        max_parallelism: int,
        layout: StateLayout,
        value_bytes: int | None = value_bytes_limit(),
    ):
        self._meta, self._deltas, self._base = variables
        self._max_parallelism, self._layout = max_parallelism, layout
        self._value_bytes = value_bytes  # the state server's limit (None: none)
        self._read: list[Any] | None = None  # the meta of the call under way

    def read(self) -> StoredGroup:
        """The group as ``meta`` says, from the cache caught up, or read cold."""
        meta = self._meta.get()
        self._read = None if meta is None else list(meta)
        if meta is None:
            return StoredGroup(timers=KeyTimers({}))
        stored, store, version, token = meta[0], meta[1], meta[2], meta[3]
        if stored != self._max_parallelism:
            raise parallelism_changed(stored, self._max_parallelism, "the group's state")
        entry = CACHE.take(store)
        keys = None if entry is None else self._caught_up(entry, version, token)
        timers = None if entry is None else entry.timers
        if keys is None:
            keys = self._cold(meta)
            timers = KeyTimers(keys)
        event_timer, processing_timer, watermark = meta[9], meta[10], meta[11]
        return StoredGroup(keys, event_timer, processing_timer, True, watermark, timers=timers)

    def _caught_up(self, entry: _Entry, version: int, token: int) -> dict[Any, Any] | None:
        """``entry``'s keys at ``version``, or None when it cannot get there from what
        it holds (ahead: a retried batch; a delta missing or following another token)."""
        if entry.version > version or (entry.version == version and entry.token != token):
            return None
        blobs, parent = [], entry.token
        for missing in range(entry.version + 1, version + 1):
            row = self._deltas.getValue((missing,))
            if row is None or row[0] != parent:
                return None
            blobs.append(row[2])
            parent = row[1]
        if parent != token:
            return None
        for blob in blobs:
            apply_delta(entry.keys, blob, entry.timers)
        return entry.keys

    def _cold(self, meta: Any) -> dict[Any, Any]:
        """The keys from the base and every delta after it, checked token by token."""
        version, token, base_version, base_token, chunks = (
            meta[2],
            meta[3],
            meta[4],
            meta[5],
            meta[6],
        )
        base = [self._base.getValue((chunk,))[0] for chunk in range(chunks)]
        deltas = [(k[0], *v) for k, v in self._deltas.iterator() if k[0] > base_version]
        expected = list(range(base_version + 1, version + 1))
        parent = base_token
        for _, delta_parent, delta_token, _ in sorted(deltas):
            if delta_parent != parent:
                break
            parent = delta_token
        if sorted(d[0] for d in deltas) != expected or parent != token:
            raise WindowSpecError(
                f"the key group's state is inconsistent (versions {base_version + 1}.."
                f"{version} after the base, found {sorted(d[0] for d in deltas)}): the "
                "checkpoint was changed outside Spark; restore it or start a new checkpoint"
            )
        return stored_keys(base, deltas)

    def write(self, group: StoredGroup) -> None:
        """Write the keys the call changed as the next version (or compact), then
        ``meta``; the group goes back to the cache at the version written."""
        meta = self._read or [self._max_parallelism, _token(), 0, 0, 0, 0, 0, 0, 0]
        changed = {key: group.keys.get(key) for key in group.changed}
        if changed:
            meta = self._written(meta, changed, group.keys)
        meta = [*meta[:9], group.event_timer, group.processing_timer, group.watermark]
        self._meta.update(tuple(meta))
        entry = _Entry(meta[2], meta[3], group.keys, group.timers)
        CACHE.put(meta[1], entry, self._layout.cache_keys)
        group.changed = set()

    def _written(
        self, meta: list[Any], changed: dict[Any, Any], keys: dict[Any, StoredKey]
    ) -> list[Any]:
        """Write ``changed`` as a delta (or several, :func:`_delta_blobs`), or every key as
        a new base: the new meta."""
        version, parent, delta_bytes = meta[2], meta[3], meta[8]
        blobs = _delta_blobs(changed, self._value_bytes)
        for blob in blobs or []:
            version, token = version + 1, _token()
            self._deltas.updateValue((version,), (parent, token, blob))
            parent, delta_bytes = token, delta_bytes + len(blob)
        if blobs is None:  # a key alone passes the limit: no delta, a base
            version, token = version + 1, _token()
        elif delta_bytes <= max(meta[7] * _spread(meta[5]), self._layout.compact_bytes):
            return [*meta[:2], version, token, *meta[4:8], delta_bytes]
        return self._compacted(meta, version, token, keys)

    def _compacted(
        self, meta: list[Any], version: int, token: int, keys: dict[Any, StoredKey]
    ) -> list[Any]:
        """Write every key as the base of ``version``, drop the deltas before it but the
        last :data:`KEPT_DELTAS`: the new meta."""
        base = dump_keys(keys)
        size = min(CHUNK_BYTES, self._value_bytes or CHUNK_BYTES)
        chunks = [base[at : at + size] for at in range(0, len(base), size)]
        for number, chunk in enumerate(chunks):
            self._base.updateValue((number,), (chunk,))
        for stale in range(len(chunks), meta[6]):
            self._base.removeKey((stale,))
        for stale in range(max(1, meta[4] - KEPT_DELTAS + 1), version - KEPT_DELTAS + 1):
            self._deltas.removeKey((stale,))
        return [*meta[:2], version, token, version, token, len(chunks), len(base), 0]

    def clear(self, group: StoredGroup) -> None:
        """No key left: the group's state goes (its store id with it)."""
        if self._read is not None:
            self._meta.clear()
            self._deltas.clear()
            self._base.clear()
