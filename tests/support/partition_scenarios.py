"""Streams of several source partitions, one lagging the others, and what the engine
gives for them: the expectations of the per-partition watermark tests (file streams in
``test_partition_watermarks.py``, a real Kafka topic in ``tests/kafka``).

The lagging stream: four partitions of keys ``k0..k7``; partitions 0-2 run at event time
``t`` while partition 3 runs ``LAG_MS`` behind, more than the bound ``BOUND_MS``::

    batch     partitions 0-2        partition 3
    0         ts  0 ..  9 s         (nothing yet)
    1         ts 10 .. 19 s         ts  0 ..  9 s
    2         ts 20 .. 29 s         ts 10 .. 19 s
    end       end-of-input marker

With one watermark over all partitions (Spark's), the watermark after batch 0 is
``9 s - BOUND - 1``, so every element of partition 3 in batch 1 whose 5-second window
ended is late. Per partition (Flink's), partition 3 holds the watermark back: none is late.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import tidemark as tm
from tidemark.testing import WindowOperatorHarness
from tidemark.watermarks import PartitionWatermarks

PARTITIONS = 4
BOUND_MS = 2_000
LAG_MS = 10_000
WINDOW_MS = 5_000
KEYS = 8
STRATEGY = tm.WatermarkStrategy.for_bounded_out_of_orderness(BOUND_MS)

Event = tuple[int, str, int]  # (partition, key, ts)


def lagging_batches(per_second: int = 1) -> list[list[Event]]:
    """Three micro-batches of ``(partition, key, ts)``, in the order above."""
    batches: list[list[Event]] = []
    for batch in range(3):
        rows: list[Event] = []
        for second in range(10):
            for n in range(per_second):
                for p in range(PARTITIONS):
                    ts = (batch * 10 + second) * 1000 + n
                    if p == PARTITIONS - 1:
                        ts -= LAG_MS
                        if ts < 0:
                            continue
                    rows.append((p, f"k{(second * per_second + n + p) % KEYS}", ts))
        batches.append(rows)
    return batches


def batch_watermarks(batches: list[list[Event]], per_partition: bool) -> list[int]:
    """The watermark after each batch: Flink's per-partition one, or one over all."""
    partitions = list(range(PARTITIONS)) if per_partition else [0]
    watermarks = PartitionWatermarks(STRATEGY, partitions)
    out = []
    for rows in batches:
        for p, _key, ts in rows:
            watermarks.on_event(p if per_partition else 0, ts)
        out.append(watermarks.watermark_at())
    return out


def engine_counts(
    batches: list[list[Event]], per_partition: bool
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``(results, late)`` of the engine fed ``E_0, W_0, E_1, W_1, ..., MAX``: a count
    per key and 5-second window ``(key, start, end, n)``, and the late ``(partition,
    key, ts)``."""
    late = tm.OutputTag("late")
    harness = WindowOperatorHarness(
        tm.TumblingEventTimeWindows.of(WINDOW_MS),
        _Count(),
        key_selector=lambda e: e[1],
        late_data_tag=late,
    )
    for rows, watermark in zip(batches, batch_watermarks(batches, per_partition)):
        for event in rows:
            harness.process_element(event, event[2])
        harness.process_watermark(watermark)
    harness.process_watermark(tm.LONG_MAX)
    return sorted(v for v, _ in harness.output()), sorted(v for v, _ in harness.side_output(late))


class _Count(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start, window.end, len(list(elements)))


def count_by_partition(events: list[Event]) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for p, _key, _ts in events:
        counts[p] += 1
    return dict(counts)


Arrival = tuple[int, str, int, int]  # (partition, key, ts, arrival_ms)


def idle_arrivals() -> list[Arrival]:
    """Two partitions, one arrival a second: partition 1 stops after 4 s of arrival time
    while partition 0 goes on to 14 s. Every key's window [0, 5) waits for partition 1."""
    rows: list[Arrival] = []
    for second in range(15):
        rows.append((0, f"k{second % 3}", second * 1000, second * 1000))
        if second < 5:
            rows.append((1, f"k{second % 3}", second * 1000 + 1, second * 1000 + 500))
    return rows


def engine_replay(
    rows: list[Arrival], strategy: tm.WatermarkStrategy, partitions: list[int]
) -> list[tuple[Any, ...]]:
    """The engine fed each element after the per-partition watermark in force when it
    arrived, then ``MAX``: ``(key, start, end, n, watermark at firing)``."""
    harness = WindowOperatorHarness(
        tm.TumblingEventTimeWindows.of(WINDOW_MS), _CountAt(), key_selector=lambda e: e[1]
    )
    watermarks = PartitionWatermarks(strategy, partitions)
    for row in rows:
        partition, _key, ts, arrival = row
        watermark = watermarks.watermark_at(arrival)
        if watermark > harness.current_watermark:
            harness.process_watermark(watermark)
        harness.process_element(row, ts)
        watermarks.on_event(partition, ts, arrival)
    harness.process_watermark(tm.LONG_MAX)
    return sorted(v for v, _ in harness.output())


class _CountAt(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start, window.end, len(list(elements)), context.current_watermark())
