"""The input partitions' share of the watermark: which one holds it.

A source read in partitions (Kafka's, Flink's per-partition watermarks:
:class:`~tidemark.watermarks.PartitionWatermarks`) has one watermark per partition and
forwards their minimum over those not idle. :func:`partition_states` reads each
partition's state from the engine's own per-partition watermarks;
:func:`holding_partition` names the one holding the watermark back. The streaming mode
reads the same states from a query's checkpoint.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemark.explain.events import PartitionState
from tidemark.time import LONG_MIN
from tidemark.watermarks import PartitionWatermarks

__all__ = ["partition_states", "holding_partition"]


def partition_states(
    watermarks: PartitionWatermarks, arrival_ms: int | None = None
) -> list[PartitionState]:
    """Each partition's :class:`PartitionState` now (idleness judged at ``arrival_ms``).

    >>> from tidemark.watermarks import WatermarkStrategy
    >>> w = PartitionWatermarks(WatermarkStrategy.for_bounded_out_of_orderness(1000), [0, 1])
    >>> w.on_event(0, 10_000); w.on_event(1, 5_000)
    >>> [(p.partition, p.max_event_time, p.watermark) for p in partition_states(w)]
    [(0, 10000, 8999), (1, 5000, 3999)]
    """
    states = []
    for partition in watermarks.partitions:
        own = watermarks.partition_watermark(partition)
        seen = None if own == LONG_MIN else own + watermarks.out_of_orderness_ms + 1
        idle = watermarks.idleness_ms is not None and watermarks.is_idle(partition, arrival_ms)
        states.append(PartitionState(partition, seen, own, idle))
    return states


def holding_partition(partitions: Sequence[PartitionState]) -> PartitionState | None:
    """The partition holding the watermark: the lowest of those not idle (None for a
    single input, or when every partition is idle)."""
    active = [p for p in partitions if not p.idle]
    if len(partitions) < 2 or not active:
        return None
    return min(active, key=lambda p: p.watermark)
