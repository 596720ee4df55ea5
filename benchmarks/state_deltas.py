"""The delta design's floor (issue 31, target 1): a key group's state as a base snapshot
plus versioned deltas in ``transformWithStateInPandas``, with a cache in the Python
worker. A prototype that *measures* what the design can reach for
``state_growth.py``'s stream (1-hour windows counting and summing per key); not
tidemark's code.

Per key group (the grouping key of the operator), three state variables:

* ``meta`` (``ValueState``): the store's id (random, drawn when the group's state is
  created), the version, its token (random per version), the base's version, token,
  chunk count and bytes, and the bytes of the deltas since the base;
* ``deltas`` (``MapState`` version -> one row): the windows a call changed (their new
  ``(count, sum)``) and the windows it dropped (fired), as int64 arrays in bytes, with
  the token of the version it follows;
* ``base`` (``MapState`` chunk -> bytes): every live window as of the base's version,
  rewritten (compaction) when the deltas outgrow it, so the state stays within about
  twice the live windows.

A call reads ``meta`` (one round trip), brings the worker's cached copy of the group up
to that version (one ``getValue`` a missing delta, checked by token; a cold read of the
base and every delta when the copy is missing, from another store, or cannot be caught
up), merges its rows, emits the windows the watermark passed, and writes one delta and
``meta``: bytes proportional to the windows touched. A window is one int64 id (key and
window index packed: keys below 2**41, windows below 2**22 hours: enough for this
stream, not a general key) kept sorted beside its count and sum: 24 bytes a window.

The cache lives in this module, imported once per Python worker: ``state_growth.py``
puts this directory on ``PYTHONPATH`` for Spark's Python processes. ``DELTAS_STATS`` (an environment variable, a
directory) makes every call append two lines to ``<pid>.txt`` there: ``group lag``, lag
being how many versions the copy was behind (``cold`` when read whole, ``new`` for a
group's first call), and ``group us`` with the microseconds of the call's steps: reading
``meta``, syncing the copy, computing (firing, counting, merging), writing the delta (or
compacting) and ``meta``, registering the timer.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

WINDOW_MS = 3_600_000
WINDOW_BITS = 22
CHUNK_WINDOWS = 200_000  # a base chunk: 4.8 MB
MIN_BASE_BYTES = 1 << 20  # deltas under this never trigger a compaction
META = (
    "store long, version long, token long, base_version long, base_token long, "
    "base_chunks int, base_bytes long, delta_bytes long"
)
OUTPUT_COLUMNS = ["key", "start", "n", "total"]


class Table:
    """A key group's live windows: sorted ids, their counts and sums."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.n = np.zeros(0, dtype=np.int64)
        self.total = np.zeros(0, dtype=np.int64)

    def upsert(self, ids: np.ndarray, n: np.ndarray, total: np.ndarray) -> None:
        """Set these windows' values (ids unique)."""
        pos = np.searchsorted(self.ids, ids)
        found = pos < len(self.ids)
        found[found] = self.ids[pos[found]] == ids[found]
        self.n[pos[found]] = n[found]
        self.total[pos[found]] = total[found]
        new = ~found
        if new.any():
            self.ids = np.insert(self.ids, pos[new], ids[new])
            self.n = np.insert(self.n, pos[new], n[new])
            self.total = np.insert(self.total, pos[new], total[new])

    def current(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """These windows' (count, sum), zero where not live."""
        pos = np.searchsorted(self.ids, ids)
        found = pos < len(self.ids)
        found[found] = self.ids[pos[found]] == ids[found]
        n, total = np.zeros(len(ids), np.int64), np.zeros(len(ids), np.int64)
        n[found], total[found] = self.n[pos[found]], self.total[pos[found]]
        return n, total

    def remove(self, ids: np.ndarray) -> None:
        keep = ~np.isin(self.ids, ids, assume_unique=True)
        self.ids, self.n, self.total = self.ids[keep], self.n[keep], self.total[keep]

    def due(self, watermark_ms: int) -> np.ndarray:
        """Ids of the windows whose end the watermark has reached."""
        ends = ((self.ids & ((1 << WINDOW_BITS) - 1)) + 1) * WINDOW_MS
        return self.ids[ends <= watermark_ms]


class Cached:
    """A worker's copy of one key group's state at one version."""

    def __init__(self, store: int, version: int, token: int, table: Table) -> None:
        self.store, self.version, self.token, self.table = store, version, token, table


CACHE: dict[Any, Cached] = {}


def _blob(*arrays: np.ndarray) -> bytes:
    return np.concatenate(arrays).astype(np.int64).tobytes()


def _split(blob: bytes, parts: int) -> list[np.ndarray]:
    flat = np.frombuffer(blob, dtype=np.int64)
    return list(flat.reshape(parts, -1)) if len(flat) else [flat] * parts


def _apply(table: Table, upserts: bytes, removed: bytes) -> None:
    ids, n, total = _split(upserts, 3)
    if len(ids):
        table.upsert(ids, n, total)
    if removed:
        table.remove(np.frombuffer(removed, dtype=np.int64))


class DeltaProcessor(StatefulProcessor):
    """Count and sum per key and 1-hour window; state as a base plus versioned deltas."""

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.meta = handle.getValueState("meta", META)
        self.deltas = handle.getMapState(
            "deltas", "version long", "parent long, token long, upserts binary, removed binary"
        )
        self.base = handle.getMapState("base", "chunk int", "data binary")

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        yield from self._step(key[0], frames, timerValues.getCurrentWatermarkInMs())

    def handleExpiredTimer(
        self, key: Any, timerValues: Any, expiredTimerInfo: Any
    ) -> Iterator[pd.DataFrame]:
        yield from self._step(key[0], [], timerValues.getCurrentWatermarkInMs())

    # ------------------------------------------------------------------ one call

    def _step(self, group: int, frames: list[pd.DataFrame], watermark_ms: int) -> Any:
        clock = [time.perf_counter()]
        meta = list(self.meta.get()) if self.meta.exists() else None
        clock.append(time.perf_counter())
        cached = self._synced(group, meta)
        clock.append(time.perf_counter())
        table = cached.table
        fired = table.due(watermark_ms)
        if len(fired):
            n, total = table.current(fired)
            yield _output(fired, n, total)
            table.remove(fired)
        ids, n, total = _counted(frames)
        if len(ids):
            held_n, held_total = table.current(ids)
            n, total = n + held_n, total + held_total
            table.upsert(ids, n, total)
        clock.append(time.perf_counter())
        if len(ids) or len(fired):
            meta = self._write(cached, meta, _blob(ids, n, total), fired.tobytes())
        clock.append(time.perf_counter())
        if len(table.ids):
            first = int((table.ids & ((1 << WINDOW_BITS) - 1)).min())
            self.handle.registerTimer((first + 1) * WINDOW_MS)
        clock.append(time.perf_counter())
        _log(group, "us " + " ".join(str(int(1e6 * (b - a))) for a, b in zip(clock, clock[1:])))

    def _synced(self, group: int, meta: list[int] | None) -> Cached:
        """The worker's copy of ``group`` at ``meta``'s version."""
        if meta is None:
            CACHE[group] = Cached(random.getrandbits(62), 0, 0, Table())
            _log(group, "new")
            return CACHE[group]
        store, version, token = meta[0], meta[1], meta[2]
        cached = CACHE.get(group)
        if cached is not None and cached.store == store:
            lag = version - cached.version
            if lag == 0 and cached.token == token:
                _log(group, "0")
                return cached
            if lag > 0 and self._catch_up(cached, version):
                _log(group, str(lag))
                return cached
        CACHE[group] = self._cold(meta)
        _log(group, "cold")
        return CACHE[group]

    def _catch_up(self, cached: Cached, version: int) -> bool:
        pending = []
        for v in range(cached.version + 1, version + 1):
            row = self.deltas.getValue((v,))
            if row is None:
                return False
            pending.append(row)
        if pending[0][0] != cached.token:
            return False
        for _parent, token, upserts, removed in pending:
            _apply(cached.table, upserts, removed)
            cached.token = token
        cached.version = version
        return True

    def _cold(self, meta: list[int]) -> Cached:
        store, version, token, base_version, base_token, chunks = meta[:6]
        table = Table()
        parts = [_split(self.base.getValue((c,))[0], 3) for c in range(chunks)]
        if parts:
            table.ids, table.n, table.total = (np.concatenate(p) for p in zip(*parts))
        deltas = sorted((k[0], v) for k, v in self.deltas.iterator() if k[0] > base_version)
        for _, (_parent, _token, upserts, removed) in deltas:
            _apply(table, upserts, removed)
        return Cached(store, version, token, table)

    def _write(self, cached: Cached, meta: list[int] | None, upserts: bytes, removed: bytes) -> Any:
        """One delta (or a compaction) and ``meta``: the next version."""
        if meta is None:
            meta = [cached.store, 0, 0, 0, 0, 0, 0, 0]
        token = random.getrandbits(62)
        version = meta[1] + 1
        delta_bytes = meta[7] + len(upserts) + len(removed)
        if delta_bytes > max(meta[6], MIN_BASE_BYTES):
            meta = self._compact(cached.table, meta, version, token)
        else:
            self.deltas.updateValue((version,), (cached.token, token, upserts, removed))
            meta = meta[:1] + [version, token] + meta[3:7] + [delta_bytes]
        self.meta.update(tuple(meta))
        cached.version, cached.token = version, token
        return meta

    def _compact(self, table: Table, meta: list[int], version: int, token: int) -> list[int]:
        chunks = 0
        for start in range(0, len(table.ids), CHUNK_WINDOWS):
            part = slice(start, start + CHUNK_WINDOWS)
            self.base.updateValue(
                (chunks,), (_blob(table.ids[part], table.n[part], table.total[part]),)
            )
            chunks += 1
        for stale in range(chunks, meta[5]):
            self.base.removeKey((stale,))
        self.deltas.clear()
        return [meta[0], version, token, version, token, chunks, 24 * len(table.ids), 0]


def _counted(frames: list[pd.DataFrame]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The micro-batch's rows of a group: window ids, counts, sums (ids sorted)."""
    if not frames:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    batch = pd.concat(frames) if len(frames) > 1 else frames[0]
    ts = batch["ts"].to_numpy(dtype=np.int64)
    ids = (batch["key"].to_numpy(dtype=np.int64) << WINDOW_BITS) | (ts // WINDOW_MS)
    ids, inverse = np.unique(ids, return_inverse=True)
    n = np.bincount(inverse, minlength=len(ids)).astype(np.int64)
    total = np.bincount(inverse, weights=batch["v"].to_numpy(), minlength=len(ids))
    return ids, n, total.astype(np.int64)


def _output(ids: np.ndarray, n: np.ndarray, total: np.ndarray) -> pd.DataFrame:
    starts = (ids & ((1 << WINDOW_BITS) - 1)) * WINDOW_MS
    return pd.DataFrame({"key": ids >> WINDOW_BITS, "start": starts, "n": n, "total": total})


def _log(group: int, lag: str) -> None:
    directory = os.environ.get("DELTAS_STATS")
    if directory:
        with open(os.path.join(directory, f"{os.getpid()}.txt"), "a") as out:
            out.write(f"{group} {lag}\n")
