"""Everything a tidemark query keeps beside its checkpoint, read back in one value.

:class:`RecordedQuery` gathers the records :mod:`.checkpoint` keeps (the number of key
groups, the pipeline's description, Spark's clock, the state layout) and those of
:mod:`.batch_records` (each micro-batch's watermarks), for the explanations of
``docs/why-no-result.md`` (:mod:`.explain`, :mod:`.query_view`). Reading them changes
nothing and takes no lock: a running query's checkpoint is read as a stopped one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemark.errors import ExplainError, WindowSpecError
from tidemark.explain.events import PartitionState
from tidemark.spark.streaming.driver.batch_records import BatchRecord, read_batch_records
from tidemark.spark.streaming.driver.checkpoint import read_records

__all__ = ["RecordedQuery", "partition_states", "key_columns", "check_batch"]


@dataclass(frozen=True)
class RecordedQuery:
    """What a checkpoint's records say of its query.

    Attributes
    ----------
    checkpoint : str
        The checkpoint location.
    groups : int
        Its number of key groups.
    pipeline : tuple of dict
        Each window's description (:func:`~.checkpoint.describe_window`).
    layout : str
        The state layout (``row`` or ``deltas``).
    spark_offset_ms : int
        Spark's clock ahead of the engine's.
    batches : tuple of BatchRecord
        The retained micro-batches' watermarks, by batch id (none for a query started
        before they were recorded, or over Spark Connect).
    """

    checkpoint: str
    groups: int
    pipeline: tuple[dict[str, str], ...]
    layout: str
    spark_offset_ms: int
    batches: tuple[BatchRecord, ...]

    @classmethod
    def read(cls, spark: Any, checkpoint: str) -> RecordedQuery:
        """The records beside ``checkpoint``.

        Raises
        ------
        WindowSpecError
            ``checkpoint`` holds no record of a tidemark query.
        """
        if not isinstance(checkpoint, str) or not checkpoint:
            raise WindowSpecError(
                f"`checkpoint` must be the checkpoint location a query was started with "
                f"(a path); got {checkpoint!r}"
            )
        records = read_records(spark, checkpoint)
        if records.groups is None or records.pipeline is None:
            raise WindowSpecError(
                f"`checkpoint` must be the checkpoint of a query tidemark started "
                f"(write_outputs); got {checkpoint!r}, which holds no tidemark records "
                "(tidemark-max-parallelism, tidemark-pipeline): check the path, or start "
                "the query with write_outputs"
            )
        return cls(
            checkpoint,
            records.groups,
            records.pipeline,
            records.layout or "row",
            records.clock or 0,
            tuple(read_batch_records(spark, checkpoint)),
        )

    @property
    def window(self) -> dict[str, str]:
        """The description of the query's last window (a chain's last)."""
        return self.pipeline[-1]

    def batch(self, batch_id: int) -> BatchRecord | None:
        """The record of ``batch_id``, or None where it is not retained."""
        for record in self.batches:
            if record.batch == batch_id:
                return record
        return None

    def at_or_before(self, batch_id: int) -> BatchRecord | None:
        """The last record of a micro-batch up to ``batch_id``."""
        earlier = [r for r in self.batches if r.batch <= batch_id]
        return earlier[-1] if earlier else None


def partition_states(record: BatchRecord) -> tuple[PartitionState, ...]:
    """Each input's share of the watermark after ``record``'s micro-batch, for
    :func:`tidemark.explain.explain_events` (none for a stream of one input)."""
    if record.partition_column is None:
        return ()
    # Spark cannot leave an input out of its minimum: no partition is ever idle in a
    # stream (docs/kafka.md, "Idleness")
    return tuple(
        PartitionState(i.partition, i.max_event_time_ms, i.watermark_ms, False, i.last_batch)
        for i in record.inputs
    )


def key_columns(description: dict[str, str]) -> list[tuple[str, str]]:
    """A window description's key columns as ``(name, Spark type)``: its ``key`` field,
    ``"k string, n bigint"``.

    >>> key_columns({"key": "k string, region string"})
    [('k', 'string'), ('region', 'string')]
    """
    columns = []
    for part in description.get("key", "").split(", "):
        name, _, kind = part.partition(" ")
        if name:
            columns.append((name, kind))
    return columns


def check_batch(batch_id: int | None, first: int, last: int) -> int:
    """``batch_id`` checked against the retained state (None: the latest, ``last``)."""
    if batch_id is None:
        return last
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or not first <= batch_id <= last:
        raise ExplainError(
            f"`batch_id` must be a micro-batch whose state the checkpoint retains, "
            f"{first}..{last}; got batch_id={batch_id!r}"
        )
    return batch_id
