"""The whole query's view: the first thing to look at when a stream "produces nothing".

:func:`explain_query` reads a query's checkpoint (running or stopped) and says, as a
micro-batch left it: the watermark and each partition's share of it (which one is the
minimum, holding it back; :mod:`.batch_records`), the windows open now (how many, the
oldest, per key group) and the keys whose windows have waited longest (the oldest open
window first), from every key group's state (:mod:`.state_reader`: it reads the whole
state, as an inspection may, never on the query's path). The guide:
``docs/why-no-result.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tidemark.explain.events import PartitionState
from tidemark.explain.partitions import holding_partition
from tidemark.explain.timefmt import TimeText
from tidemark.spark.streaming.driver.keygroups import slots
from tidemark.spark.streaming.driver.recorded import RecordedQuery, check_batch, partition_states
from tidemark.spark.streaming.driver.state_reader import read_groups, state_batches
from tidemark.spark.streaming.worker.state import load_keys
from tidemark.time import LONG_MAX, LONG_MIN
from tidemark.windows import TimeWindow

__all__ = ["explain_query", "QueryView", "GroupView", "KeyWait"]

Bounds = tuple["int | None", "int | None"]


@dataclass(frozen=True)
class KeyWait:
    """A key with open windows: how many, its oldest, its earliest event-time timer."""

    key: Any
    group: int
    open_windows: int
    oldest: Bounds
    earliest_timer: int | None

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "key": repr(self.key), "oldest": list(self.oldest)}


@dataclass(frozen=True)
class GroupView:
    """One key group's open windows."""

    group: int
    keys: int
    open_windows: int
    oldest: Bounds | None

    def to_dict(self) -> dict[str, Any]:
        oldest = None if self.oldest is None else list(self.oldest)
        return {**vars(self), "oldest": oldest}


@dataclass(frozen=True)
class QueryView:
    """A streaming query's state and watermark as a micro-batch left them.

    Attributes
    ----------
    checkpoint : str
    batch_id : int
        The micro-batch read.
    watermark : int
        The watermark it ran under (``Long.MIN_VALUE``: none yet).
    next_watermark : int or None
        The watermark after it, which the next micro-batch runs under (None: no record).
    partitions : tuple of PartitionState
        Each partition's share of ``next_watermark`` (none for a stream of one input).
    holder : PartitionState or None
        The partition whose watermark is the minimum.
    idleness : bool or None
        Whether the strategy has idleness (on a stream it moves no watermark).
    keys, open_windows : int
        Keys holding state, and their open windows (slices of sliding windows count
        as their windows' contents, not as windows).
    oldest : (start, end) or None
        The open window that starts first.
    groups : tuple of GroupView
        Per key group holding state.
    waiting : tuple of KeyWait
        The keys whose open windows started first (at most ``top``).
    notes : tuple of str
        What could not be read.
    """

    checkpoint: str
    batch_id: int
    watermark: int
    next_watermark: int | None
    partitions: tuple[PartitionState, ...]
    holder: PartitionState | None
    idleness: bool | None
    keys: int
    open_windows: int
    oldest: Bounds | None
    groups: tuple[GroupView, ...]
    waiting: tuple[KeyWait, ...]
    notes: tuple[str, ...] = ()
    time_zone: str | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "checkpoint": self.checkpoint,
            "batch_id": self.batch_id,
            "watermark": None if self.watermark == LONG_MIN else self.watermark,
            "next_watermark": self.next_watermark,
            "partitions": [vars(p) for p in self.partitions],
            "holder": None if self.holder is None else self.holder.partition,
            "idleness": self.idleness,
            "keys": self.keys,
            "open_windows": self.open_windows,
            "oldest": None if self.oldest is None else list(self.oldest),
            "groups": [g.to_dict() for g in self.groups],
            "waiting": [w.to_dict() for w in self.waiting],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        """The view in words: the watermark and what holds it, then the open windows."""
        t = TimeText(self.time_zone)
        lines = [
            f"Checkpoint {self.checkpoint}, micro-batch {self.batch_id}: watermark "
            f"{t.at(self.watermark)}"
            + (
                f"; the next micro-batch runs under {t.at(self.next_watermark)}."
                if self.next_watermark is not None and self.next_watermark != self.watermark
                else "."
            )
        ]
        lines += _partition_lines(self, t)
        oldest = "" if self.oldest is None else f"; the oldest {t.window(self.oldest)}"
        lines.append(
            f"Open windows: {self.open_windows} over {self.keys} key(s) in "
            f"{len(self.groups)} key group(s){oldest}."
        )
        for group in self.groups:
            first = "" if group.oldest is None else f", the oldest {t.window(group.oldest)}"
            lines.append(
                f"  key group {group.group}: {group.keys} key(s), "
                f"{group.open_windows} open window(s){first}"
            )
        if self.waiting:
            lines.append("Keys waiting longest:")
        for wait in self.waiting:
            timer = (
                ""
                if wait.earliest_timer is None
                else f", next timer at {t.at(wait.earliest_timer)}"
            )
            lines.append(
                f"  {wait.key!r} (key group {wait.group}): {wait.open_windows} open window(s), "
                f"the oldest {t.window(wait.oldest)}{timer}"
            )
        lines += [f"Note: {note}" for note in self.notes]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.text()


def _partition_lines(view: QueryView, t: TimeText) -> list[str]:
    if not view.partitions:
        return []
    lines = ["Partitions (largest event time, watermark; the minimum holds the query's):"]
    for p in view.partitions:
        mark = "  <- the minimum: it holds the watermark" if p is view.holder else ""
        last = "" if p.last_batch is None else f", last data in micro-batch {p.last_batch}"
        lines.append(
            f"  {p.partition!r}: {t.at(p.max_event_time)}, watermark {t.at(p.watermark)}"
            f"{last}{mark}"
        )
    idle = (
        "idleness is on, but a stream cannot leave a partition out of the minimum "
        "(docs/kafka.md, Idleness)"
        if view.idleness
        else "idleness is off: a silent partition holds the watermark"
    )
    lines.append(f"  ({idle})")
    return lines


def explain_query(
    spark: Any,
    checkpoint: str,
    *,
    batch_id: int | None = None,
    top: int = 10,
    time_zone: str | None = None,
) -> QueryView:
    """The whole query's view from ``checkpoint``: its watermark per partition, the
    open windows per key group, the keys waiting longest.

    Parameters
    ----------
    spark : SparkSession
    checkpoint : str
        The checkpoint location of a query ``write_outputs`` started.
    batch_id : int, optional
        As that micro-batch left the state (default: the latest committed).
    top : int
        How many of the longest-waiting keys to list.
    time_zone : str, optional
        IANA zone of the times in :meth:`QueryView.text` (default UTC).

    Returns
    -------
    QueryView

    Raises
    ------
    WindowSpecError
        ``checkpoint`` is no tidemark query's.
    ExplainError
        A ``batch_id`` whose state is not retained.
    """
    recorded = RecordedQuery.read(spark, checkpoint)
    first, last = state_batches(spark, checkpoint)
    batch = check_batch(batch_id, first, last)
    record = recorded.at_or_before(batch)
    partitions = () if record is None else partition_states(record)
    groups, waits = _open_windows(spark, checkpoint, batch, recorded.groups)
    waits.sort(key=lambda w: (_start(w.oldest), repr(w.key)))
    oldest = [g.oldest for g in groups if g.oldest is not None]
    notes = () if record is not None else ("the checkpoint has no watermark records",)
    return QueryView(
        checkpoint=checkpoint,
        batch_id=batch,
        watermark=LONG_MIN if record is None else record.ran_under_ms,
        next_watermark=None if record is None else record.ended_ms,
        partitions=partitions,
        holder=holding_partition(partitions),
        idleness=None if record is None else record.idleness_ms is not None,
        keys=sum(g.keys for g in groups),
        open_windows=sum(g.open_windows for g in groups),
        oldest=min(oldest, key=_start) if oldest else None,
        groups=tuple(groups),
        waiting=tuple(waits[:top]),
        notes=notes,
        time_zone=time_zone,
    )


def _open_windows(
    spark: Any, checkpoint: str, batch: int, count: int
) -> tuple[list[GroupView], list[KeyWait]]:
    """Each key group's keys and open windows, and each key's wait."""
    group_of = {slot: group for group, slot in enumerate(slots(count))}
    groups, waits = [], []
    for slot, row in read_groups(spark, checkpoint, batch, last_window=True):
        group = group_of.get(slot, slot)
        keys = load_keys(row.keys)
        open_windows = 0
        oldest: list[Bounds] = []
        for key, stored in keys.items():
            wait = _key_wait(key, group, stored)
            if wait is not None:
                waits.append(wait)
                open_windows += wait.open_windows
                oldest.append(wait.oldest)
        groups.append(
            GroupView(group, len(keys), open_windows, min(oldest, key=_start) if oldest else None)
        )
    groups.sort(key=lambda g: g.group)
    return groups, waits


def _key_wait(key: Any, group: int, stored: Any) -> KeyWait | None:
    state = stored.load_state()
    if state is None:
        return None
    windows = [w for w in state.contents if not isinstance(w, int)]
    if state.merging:
        windows = [w for w in state.merging if state.merging[w] in state.contents]
    if not windows:
        return None
    bounds = [(w.start, w.end) if isinstance(w, TimeWindow) else (None, None) for w in windows]
    timers = [time for time, _ in state.event_timers]
    return KeyWait(key, group, len(windows), min(bounds, key=_start), min(timers, default=None))


def _start(bounds: Bounds) -> int:
    start = bounds[0]
    return LONG_MAX if start is None else start
