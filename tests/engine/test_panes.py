"""Dataflow triggers on the engine: panes, accumulation modes, closing and expiry.

Named cases, each a transcript of elements and watermarks with the panes it must emit
(window, values, timing, index, non-speculative index, last). Beam's own transcripts
and randomized scenarios against Beam's driver are in tests/beam/.
"""

from __future__ import annotations

import pickle

import pytest

import tidemark as tm
from tidemark.errors import WindowSpecError
from tidemark.testing import WindowOperatorHarness

D, A, R = (
    tm.AccumulationMode.DISCARDING,
    tm.AccumulationMode.ACCUMULATING,
    tm.AccumulationMode.RETRACTING,
)


class Panes(tm.ProcessWindowFunction):
    """Emits ``(start, end, values, timing, index, non-speculative index, last)``."""

    def process(self, key, ctx, elements):
        p, w = ctx.pane(), ctx.window()
        values = sorted(e[1] for e in elements)
        yield (
            getattr(w, "start", None),
            getattr(w, "end", None),
            values,
            p.timing.name,
            p.index,
            p.non_speculative_index,
            p.is_last,
        )


def harness(assigner, trigger, mode=None, lateness=0, function=None, **options):
    return WindowOperatorHarness(
        assigner,
        function if function is not None else Panes(),
        key_selector=lambda v: v[0],
        trigger=trigger,
        accumulation_mode=mode,
        allowed_lateness=lateness,
        **options,
    )


def run(h, steps):
    """Feed steps (an int is an element's timestamp, ``("wm", w)`` a watermark,
    ``("pt", t)`` processing time); return the values emitted per step."""
    emitted, seen = [], 0
    for step in steps:
        if isinstance(step, tuple) and step[0] == "wm":
            h.process_watermark(step[1])
        elif isinstance(step, tuple) and step[0] == "pt":
            h.set_processing_time(step[1])
        else:
            h.process_element(("k", step), step)
        out = [value for value, _ in h.output()[seen:]]
        seen += len(out)
        emitted.append(out)
    return emitted


def flat(emitted):
    return [pane for step in emitted for pane in step]


TUMBLING_10 = tm.TumblingEventTimeWindows.of(10)


def test_early_count_then_on_time_discarding_beam_transcript():
    # Beam's trigger_transcripts.yaml: discarding_early_fixed.
    h = harness(TUMBLING_10, tm.AfterWatermark(early=tm.AfterCount(2)), D)
    out = run(h, [1, 2, 4, 14, 5, 18, 6, ("wm", 99)])
    assert out[1] == [(0, 10, [1, 2], "EARLY", 0, -1, False)]
    assert out[4] == [(0, 10, [4, 5], "EARLY", 1, -1, False)]
    assert out[5] == [(10, 20, [14, 18], "EARLY", 0, -1, False)]
    # the on-time pane of [10, 20) fires although early panes took every element
    assert sorted(out[7]) == [
        (0, 10, [6], "ON_TIME", 2, 0, True),
        (10, 20, [], "ON_TIME", 1, 0, True),
    ]
    assert h.num_keyed_state_entries() == 0 and h.num_event_time_timers() == 0


def test_sessions_merge_counts_and_late_panes_accumulating_beam_transcript():
    # Beam's early_late_sessions, with Flink's session windows [t, t + gap).
    sessions = tm.EventTimeSessionWindows.with_gap(10)
    trigger = tm.AfterWatermark(early=tm.AfterCount(2), late=tm.AfterCount(3))
    h = harness(sessions, trigger, A, lateness=100)
    out = flat(run(h, [1, 2, 3, 4, 5, ("wm", 99), 1, 3, 4]))
    assert out == [
        (1, 12, [1, 2], "EARLY", 0, -1, False),
        (1, 14, [1, 2, 3, 4], "EARLY", 0, -1, False),  # a merged window counts anew
        (1, 15, [1, 2, 3, 4, 5], "ON_TIME", 0, 0, False),
        (1, 15, [1, 1, 2, 3, 3, 4, 4, 5], "LATE", 1, 1, False),
    ]


def test_a_finished_trigger_closes_its_window_and_later_elements_are_late_data():
    tag = tm.OutputTag("late")
    h = harness(TUMBLING_10, tm.AfterCount(2), D, late_data_tag=tag)
    out = flat(run(h, [1, 2, 3, 15]))
    assert out == [(0, 10, [1, 2], "EARLY", 0, -1, True)]
    assert h.side_output(tag) == [(("k", 3), 3)]  # not late by time: its window closed
    h2 = harness(TUMBLING_10, tm.AfterCount(2), D)
    run(h2, [1, 2, 3, 4])
    assert h2.num_late_records_dropped == 2


def test_expiry_fires_what_no_pane_emitted_on_time_without_lateness():
    h = harness(TUMBLING_10, tm.AfterCount(5), D)
    out = run(h, [1, 2, 3, ("wm", 9)])
    assert out[3] == [(0, 10, [1, 2, 3], "ON_TIME", 0, 0, True)]
    assert h.num_keyed_state_entries() == 0


def test_expiry_pane_is_late_with_lateness_and_absent_when_nothing_is_new():
    h = harness(TUMBLING_10, tm.AfterWatermark(late=tm.AfterCount(5)), A, lateness=20)
    out = run(h, [1, ("wm", 9), 3, ("wm", 29)])
    assert out[1] == [(0, 10, [1], "ON_TIME", 0, 0, False)]
    assert out[3] == [(0, 10, [1, 3], "LATE", 1, 1, True)]
    h2 = harness(TUMBLING_10, tm.AfterWatermark(late=tm.AfterCount(1)), A, lateness=20)
    out2 = run(h2, [1, ("wm", 9), 3, ("wm", 29)])
    assert out2[2] == [(0, 10, [1, 3], "LATE", 1, 1, False)] and out2[3] == []


def test_expiry_boundary_is_flinks_max_timestamp_plus_lateness():
    h = harness(TUMBLING_10, tm.DefaultTrigger(), D, lateness=5)
    out = run(h, [1, ("wm", 13), 2, ("wm", 14), 3])
    assert out[1] == [(0, 10, [1], "ON_TIME", 0, 0, False)]
    assert out[2] == [(0, 10, [2], "LATE", 1, 1, False)]
    assert out[4] == [] and h.num_late_records_dropped == 1  # 9 + 5 <= 14: expired


def test_a_window_first_reached_after_its_end_fires_late_not_on_time():
    h = harness(TUMBLING_10, tm.DefaultTrigger(), D, lateness=50)
    out = run(h, [("wm", 30), 5])
    assert out[1] == [(0, 10, [5], "LATE", 0, 0, False)]


def test_retracting_precedes_each_later_pane_with_the_previous_result():
    h = harness(TUMBLING_10, tm.AfterWatermark(early=tm.AfterCount(2)), R, function=_sum_of())
    run(h, [1, 2, 3, 4, ("wm", 9)])
    rows = [(v, p.timing.name, p.index, r) for v, _, p, r in h.pane_output()]
    assert rows == [
        (3, "EARLY", 0, False),
        (3, "EARLY", 0, True),
        (10, "EARLY", 1, False),
        (10, "EARLY", 1, True),
        (10, "ON_TIME", 2, False),
    ]
    assert sum(-v if r else v for v, _, _, r in rows) == 10


def test_retracting_sessions_retract_the_merged_windows_results():
    sessions = tm.EventTimeSessionWindows.with_gap(5)
    h = harness(sessions, tm.Repeatedly(tm.AfterCount(1)), R, function=_sum_of())
    run(h, [1, 10, 5])
    rows = [(v, ts, r) for v, ts, _, r in h.pane_output()]
    # [1,6) and [10,15) emitted 1 and 10; 5 bridges them into [1,15): both retracted
    assert rows[:2] == [(1, 5, False), (10, 14, False)]
    assert sorted(rows[2:4]) == [(1, 5, True), (10, 14, True)] and rows[4] == (16, 14, False)


def test_after_processing_time_fires_on_the_clock_after_the_first_element():
    trigger = tm.AfterWatermark(early=tm.AfterProcessingTime(100))
    h = harness(TUMBLING_10, trigger, D)
    out = run(h, [("pt", 1000), 1, ("pt", 1050), 2, ("pt", 1100), 3, ("pt", 1250), ("wm", 9)])
    assert out[4] == [(0, 10, [1, 2], "EARLY", 0, -1, False)]
    assert out[6] == [(0, 10, [3], "EARLY", 1, -1, False)]  # the next pane's own delay
    assert out[7] == [(0, 10, [], "ON_TIME", 2, 0, True)]


def test_after_each_after_all_or_finally():
    each = harness(TUMBLING_10, tm.AfterEach(tm.AfterCount(2), tm.AfterCount(1)), D)
    assert [p[2] for p in flat(run(each, [1, 2, 3, 4]))] == [[1, 2], [3]]
    both = harness(TUMBLING_10, tm.AfterAll(tm.AfterCount(2), tm.AfterWatermark()), D)
    assert flat(run(both, [1, ("wm", 9)])) == [(0, 10, [1], "ON_TIME", 0, 0, True)]
    until = tm.OrFinally(tm.Repeatedly(tm.AfterCount(1)), tm.AfterCount(3))
    h = harness(TUMBLING_10, until, D)
    assert [(p[2], p[6]) for p in flat(run(h, [1, 2, 3, 4]))] == [
        ([1], False),
        ([2], False),
        ([3], True),
    ]


def test_global_windows_expire_at_the_end_of_input():
    h = harness(tm.GlobalWindows.create(), tm.Repeatedly(tm.AfterCount(2)), D)
    out = flat(run(h, [1, 2, 3, ("wm", tm.LONG_MAX)]))
    assert [(p[2], p[3], p[6]) for p in out] == [([1, 2], "EARLY", False), ([3], "ON_TIME", True)]


def test_snapshot_restore_keeps_panes_counts_and_timers():
    trigger = tm.AfterWatermark(early=tm.AfterCount(2), late=tm.AfterCount(1))
    whole = harness(TUMBLING_10, trigger, A, lateness=10)
    split = harness(TUMBLING_10, trigger, A, lateness=10)
    steps = [1, 2, 3, ("wm", 9), 4, ("wm", 40)]
    expected = run(whole, steps)
    first = run(split, steps[:3])
    restored = harness(TUMBLING_10, trigger, A, lateness=10)
    restored.restore(pickle.loads(pickle.dumps(split.snapshot())))
    assert first + run(restored, steps[3:]) == expected


def test_flink_triggers_see_an_unknown_pane():
    h = WindowOperatorHarness(TUMBLING_10, Panes(), key_selector=lambda v: v[0])
    run(h, [1, ("wm", 9)])
    assert h.output()[0][0][3] == "UNKNOWN"
    assert h.pane_output()[0][2] == tm.PaneInfo.UNKNOWN


def test_reduce_emits_nothing_for_an_empty_pane_aggregate_its_empty_result():
    trigger = tm.AfterWatermark(early=tm.AfterCount(1))
    h = harness(TUMBLING_10, trigger, D, function=lambda a, b: (a[0], a[1] + b[1]))
    run(h, [1, ("wm", 9)])
    assert [v for v, _ in h.output()] == [("k", 1)]
    h2 = harness(TUMBLING_10, trigger, D, function=_count())
    run(h2, [1, ("wm", 9)])
    assert [v for v, _ in h2.output()] == [1, 0]


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: tm.PurgingTrigger(tm.AfterCount(2)),
            "AfterCount(2) is a Dataflow trigger",
        ),
        (
            lambda: harness(TUMBLING_10, tm.EventTimeTrigger(), A),
            "`accumulation_mode` goes with a Dataflow trigger",
        ),
        (
            lambda: harness(TUMBLING_10, tm.AfterCount(1), "accumulating"),
            "`accumulation_mode` must be an AccumulationMode",
        ),
        (
            lambda: harness(tm.TumblingProcessingTimeWindows.of(10), tm.AfterCount(1)),
            "serves event-time and global windows",
        ),
        (lambda: tm.AfterCount(0), "`count` must be an int >= 1; got count=0"),
        (lambda: tm.AfterProcessingTime(-1), "`delay` must be >= 0; got delay=-1ms"),
        (lambda: tm.Repeatedly(tm.CountTrigger(2)), "`trigger` must be a Dataflow trigger"),
        (lambda: tm.AfterAny(), "AfterAny needs at least one trigger"),
    ],
    ids=[
        "purging",
        "flink-trigger",
        "mode-type",
        "processing-time",
        "count",
        "delay",
        "nest",
        "empty",
    ],
)
def test_definition_errors(build, message):
    with pytest.raises(WindowSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def _sum_of():
    class Sum(tm.ProcessWindowFunction):
        def process(self, key, ctx, elements):
            yield sum(e[1] for e in elements)

    return Sum()


def _count():
    class Count(tm.AggregateFunction):
        def create_accumulator(self):
            return 0

        def add(self, value, acc):
            return acc + 1

        def get_result(self, acc):
            return acc

        def merge(self, a, b):
            return a + b

    return Count()


def test_the_timeline_shows_panes_by_timing_and_retractions(tmp_path):
    from tidemark._engine.trace import Tracer

    tracer = Tracer(title="panes")
    h = harness(
        TUMBLING_10, tm.AfterWatermark(early=tm.AfterCount(2)), R, function=_sum_of(), tracer=tracer
    )
    for n, t in enumerate([1, 2, 3, 4]):
        tracer.process_element(h.operator, "k", ("k", t), t, f"e{n}")
    tracer.process_watermark(h.operator, 9)
    tracer.finish(h.operator)
    kinds = [f["kind"] for f in tracer.trace()["firings"]]
    assert kinds == ["early", "retraction", "early", "retraction", "on_time"]
    tm.timeline(tracer.trace(), tmp_path / "panes.html")
    assert "retraction" in (tmp_path / "panes.html").read_text()


def test_a_shorthand_aggregation_emits_no_row_for_an_empty_pane():
    from pyspark.sql import Row

    from tidemark.spark.aggregations import Sum

    trigger = tm.AfterWatermark(early=tm.AfterCount(1))
    h = WindowOperatorHarness(
        TUMBLING_10, Sum("v"), key_selector=lambda r: r.k, trigger=trigger, accumulation_mode=D
    )
    h.process_element(Row(k="a", v=3), 1)
    h.process_watermark(9)
    assert [tuple(v) for v, _ in h.output()] == [("a", 3)]
    assert [p.timing.name for _, _, p, _ in h.pane_output()] == ["EARLY"]
