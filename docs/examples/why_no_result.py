"""The runs of ``docs/why-no-result.md``: one per common cause, on the engine's harness.

Each function runs a small pipeline with ``WindowOperatorHarness(..., explain=True)``
and returns the harness; the page asks it why. Run
``python docs/examples/why_no_result.py [DIR]`` to draw the page's two pictures
(``why-held.png`` and ``why-late.png``, into ``docs/images`` by default).
"""

from __future__ import annotations

import sys
from pathlib import Path

import tidemark as tm
from tidemark.explain import PartitionState, partition_states
from tidemark.testing import WindowOperatorHarness
from tidemark.watermarks import PartitionWatermarks, WatermarkStrategy

NOON = 1_590_292_800_000  # 2020-05-24 12:00:00 in Asia/Shanghai
LATE = tm.OutputTag("late")


def total(a, b):
    return (a[0], a[1] + b[1])


def clicks(**options) -> WindowOperatorHarness:
    """Clicks ``(user, n)`` summed per user, with the question recorder on."""
    return WindowOperatorHarness(
        options.pop("assigner", tm.TumblingEventTimeWindows.of(10)),
        total,
        key_selector=lambda click: click[0],
        explain=True,
        **options,
    )


def finished_stream() -> WindowOperatorHarness:
    """Four clicks; the watermark follows the data, 2 ms behind the latest."""
    h = clicks()
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(2).create_watermark_generator()
    for n, ts in [(1, 1), (2, 4), (3, 12), (4, 17)]:
        h.process_element(("ann", n), ts)
        watermarks.on_event(("ann", n), ts)
        h.process_watermark(watermarks.current_watermark())
    return h


def kafka_clicks(
    partition_1: str, idleness_ms: int | None = None
) -> tuple[WindowOperatorHarness, list[PartitionState]]:
    """Page views from two Kafka partitions, one record a second, 5 s windows.

    Partition 0 keeps up; partition 1 is ``"silent"`` after its second record, or
    ``"lagging"``: it keeps sending, 4 s behind. Returns the harness and each
    partition's state at the end (Flink's per-partition watermarks, 1 s bound).
    """
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(1000)
    if idleness_ms is not None:
        strategy = strategy.with_idleness(idleness_ms)
    source = PartitionWatermarks(strategy, [0, 1])
    h = clicks(assigner=tm.TumblingEventTimeWindows.of(5000))
    for second in range(10):
        arrival = NOON + second * 1000
        records = [(0, arrival)]
        if partition_1 == "lagging":
            records.append((1, arrival - 4000))
        elif second < 2:
            records.append((1, arrival + 1000))
        for partition, ts in records:
            source.on_event(partition, ts, arrival)
            h.process_element(("pv", 1), ts, label=f"p{partition}")
        h.process_watermark(source.watermark_at(arrival))
    return h, partition_states(source, NOON + 9000)


def late_clicks() -> WindowOperatorHarness:
    """A click within the allowed lateness, and one beyond it."""
    h = clicks(allowed_lateness=3, late_data_tag=LATE)
    h.process_element(("ann", 1), 1)
    h.process_element(("ann", 2), 4)
    h.process_watermark(10)  # [0, 10) fires
    h.process_element(("ann", 3), 6)  # late, within 3 ms: fires [0, 10) again
    h.process_watermark(13)  # past 9 + 3: the window's state goes
    h.process_element(("ann", 4), 2)  # too late
    return h


def counted() -> WindowOperatorHarness:
    """Five clicks under CountTrigger.of(3): it fires at the third."""
    h = clicks(trigger=tm.CountTrigger.of(3))
    for n in range(1, 6):
        h.process_element(("ann", n), n)
    return h


def no_trigger() -> WindowOperatorHarness:
    """Three clicks in GlobalWindows with its default trigger, then the input ends."""
    h = clicks(assigner=tm.GlobalWindows.create())
    for n in range(1, 4):
        h.process_element(("ann", n), n)
    h.process_watermark(tm.LONG_MAX)
    return h


def sessions() -> WindowOperatorHarness:
    """Sessions with a 3 ms gap: the click at 5 joins the sessions of 8 and of 1 apart."""
    h = clicks(assigner=tm.EventTimeSessionWindows.with_gap(3))
    for n, ts in [(1, 1), (2, 8), (3, 5)]:
        h.process_element(("ann", n), ts)
    h.process_watermark(tm.LONG_MAX)
    return h


def draw(directory: Path) -> list[Path]:
    """The page's pictures: the held watermark, and the late clicks."""
    held, states = kafka_clicks("silent")
    x = held.explain("pv", partitions=states, idleness=False, time_zone="Asia/Shanghai")
    late = late_clicks().explain("ann", timestamp=2)
    return [x.picture(directory / "why-held.png"), late.picture(directory / "why-late.png")]


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "images"
    for path in draw(out):
        print(path)
