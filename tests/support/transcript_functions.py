"""The window functions, assigners and triggers transcripts refer to by name.

Elements are ``(key, value)`` tuples. Each function mirrors one used by the Flink tests
the transcripts were transcribed from (named in the comment), so that expected outputs
can be copied from those tests unchanged.
"""

from __future__ import annotations

from typing import Any

import tidemark as tm


def _sum_pair(a: tuple[Any, int], b: tuple[Any, int]) -> tuple[Any, int]:
    return (a[0], a[1] + b[1])


class SumReducer(tm.ReduceFunction):
    """Flink's SumReducer: (k, a) + (k, b) -> (k, a + b)."""

    def reduce(self, value1: Any, value2: Any) -> Any:
        return _sum_pair(value1, value2)


class SessionWindowFunction(tm.ProcessWindowFunction):
    """WindowOperatorTest.SessionWindowFunction: ("key-sum", start, end)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        yield (f"{key}-{sum(e[1] for e in elements)}", window.start, window.end)


class ReducedSessionWindowFunction(tm.ProcessWindowFunction):
    """WindowOperatorTest.ReducedSessionWindowFunction over a reduced (key, sum)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        for reduced in elements:
            yield (f"{key}-{reduced[1]}", window.start, window.end)


class PassThroughFunction(tm.ProcessWindowFunction):
    """Emits every element of the window unchanged."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield from elements


class GotFunction(tm.ProcessWindowFunction):
    """PassThroughFunction2: "GOT: " + the elements joined by commas."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield "GOT: " + ",".join(f"({e[0]},{e[1]})" for e in elements)


class EmptyFunction(tm.ProcessWindowFunction):
    """EmptyReturnFunction: emits nothing."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return []


class SumElements(tm.ProcessWindowFunction):
    """RichSumReducer (evicting tests): (key, sum of the elements it is given)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        elements = list(elements)
        yield (elements[0][0] if elements else key, sum(e[1] for e in elements))


class WindowedSum(tm.ProcessWindowFunction):
    """IntegerSumWindowFunction: ([start, end], sum of the values)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield (context.window(), sum(e[1] for e in elements))


class CountPerWindow(tm.ProcessWindowFunction):
    """PyFlink CountWindowProcessFunction: (key, start, end, number of elements)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        yield (key, window.start, window.end, len(list(elements)))


class Observe(tm.ProcessWindowFunction):
    """What a firing saw: (key, window, values in order, current watermark)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield (key, context.window(), [e[1] for e in elements], context.current_watermark())


class SumAggregate(tm.AggregateFunction):
    """Aggregates values into [sum, count]."""

    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value[1], accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> list[int]:
        return list(accumulator)

    def merge(self, acc_a: list[int], acc_b: list[int]) -> list[int]:
        return [acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]]


class SumField0(tm.WindowFunction):
    """PyFlink test_window.py SumWindowFunction: (key, sum of field 0 of the elements)."""

    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        return [(key, sum(e[0] for e in inputs))]


class CountElements(tm.ProcessWindowFunction):
    """PyFlink test_global_window_with_purging_trigger MyProcessFunction: (key, count)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        return [(key, len(list(elements)))]


class CountAllPerWindow(tm.ProcessWindowFunction):
    """PyFlink CountAllWindowProcessFunction (window_all): (start, end, count)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        return [(window.start, window.end, len(list(elements)))]


class DescribeReduced(tm.ProcessWindowFunction):
    """PyFlink MyProcessFunction of test_window_(all_)reduce_process:
    "current window start at {start}, reduce result {reduced tuple}"."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield f"current window start at {context.window().start}, reduce result {tuple(next(iter(elements)))}"


class DescribeAggregated(tm.ProcessWindowFunction):
    """PyFlink MyProcessWindowFunction of test_window_(all_)aggregate_process:
    "key {result key} timestamp sum {result sum}"."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        agg_result = next(iter(elements))
        yield f"key {agg_result[0]} timestamp sum {agg_result[1]}"


class EvenMinusOdd(tm.AggregateFunction):
    """PyFlink MyAggregateFunction of test_window_(all_)aggregate(_passthrough):
    accumulator (key of the last added element, {0: #even, 1: #odd}); result
    (key, #even - #odd); merge adds the counts and keeps the first accumulator's key."""

    def create_accumulator(self) -> Any:
        return ("", {0: 0, 1: 0})

    def add(self, value: Any, accumulator: Any) -> Any:
        counts = dict(accumulator[1])
        counts[value[1] % 2] += 1
        return (value[0], counts)

    def get_result(self, accumulator: Any) -> Any:
        return (accumulator[0], accumulator[1][0] - accumulator[1][1])

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return (acc_a[0], {0: acc_a[1][0] + acc_b[1][0], 1: acc_a[1][1] + acc_b[1][1]})


class SumWithKey(tm.AggregateFunction):
    """PyFlink MyAggregateFunction of test_window_aggregate_accumulator_type / _process:
    accumulator (sum of field 1, key of the last added element); result (key, sum);
    merge adds the sums and keeps the first accumulator's key."""

    def create_accumulator(self) -> Any:
        return (0, "")

    def add(self, value: Any, accumulator: Any) -> Any:
        return (value[1] + accumulator[0], value[0])

    def get_result(self, accumulator: Any) -> Any:
        return (accumulator[1], accumulator[0])

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return (acc_a[0] + acc_b[0], acc_a[1])


def _reduce_last_key(a: Any, b: Any) -> Any:
    """PyFlink test_window_reduce_*: lambda a, b: (b[0], a[1] + b[1])."""
    return (b[0], a[1] + b[1])


def _reduce_chained(x: Any, y: Any) -> Any:
    """PyFlink test_chained_window: lambda x, y: (x[0], x[1], x[2], x[3] + y[3])."""
    return (x[0], x[1], x[2], x[3] + y[3])


class MapTsF1Sum(tm.ProcessWindowFunction):
    """PyFlink test_chained_window's map after the reduce: (x[0], x[1], x[3])."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        for x in elements:
            yield (x[0], x[1], x[3])


FUNCTIONS = {
    "sum": SumReducer,
    "sum_lambda": lambda: _sum_pair,
    "session_sum": SessionWindowFunction,
    "reduced_session_sum": lambda: (SumReducer(), ReducedSessionWindowFunction()),
    "pass_through": PassThroughFunction,
    "got": GotFunction,
    "empty": EmptyFunction,
    "sum_elements": SumElements,
    "windowed_sum": WindowedSum,
    "count_per_window": CountPerWindow,
    "observe": Observe,
    "aggregate_sum": SumAggregate,
    "reduce_observe": lambda: (SumReducer(), Observe()),
    # PyFlink test_window.py functions (elements are (key, value) tuples there too)
    "sum_field0": SumField0,
    "count_elements": CountElements,
    "count_all_per_window": CountAllPerWindow,
    "reduce_last_key": lambda: _reduce_last_key,
    "reduce_last_key_describe": lambda: (_reduce_last_key, DescribeReduced()),
    "reduce_first_key_describe": lambda: (_sum_pair, DescribeReduced()),
    "even_minus_odd": EvenMinusOdd,
    "sum_with_key": SumWithKey,
    "sum_with_key_describe": lambda: (SumWithKey(), DescribeAggregated()),
    "chained_reduce_map": lambda: (_reduce_chained, MapTsF1Sum()),
}


class PointSessionWindows(tm.MergingWindowAssigner):
    """WindowOperatorTest.PointSessionWindows: value 33 makes a point window [ts, ts)."""

    def __init__(self, gap_ms: int):
        self.gap_ms = gap_ms

    def assign_windows(self, element, timestamp, context):  # type: ignore[no-untyped-def]
        if element[1] == 33:
            return [tm.TimeWindow(timestamp, timestamp)]
        return [tm.TimeWindow(timestamp, timestamp + self.gap_ms)]

    def merge_windows(self, windows, callback):  # type: ignore[no-untyped-def]
        tm.TimeWindow.merge_windows(windows, callback)

    def get_default_trigger(self, env=None):  # type: ignore[no-untyped-def]
        return tm.EventTimeTrigger.create()

    def is_event_time(self) -> bool:
        return True


CUSTOM_ASSIGNERS = {"PointSessionWindows": lambda spec: PointSessionWindows(int(spec["gap"]))}


class EventTimeTriggerAccumGC(tm.Trigger):
    """WindowOperatorTest.EventTimeTriggerAccumGC: fire-and-purge at the end and at GC.

    As in Flink: an element for a window the watermark already passed fires at once
    (no timer); otherwise a timer at ``max_timestamp`` is registered.
    """

    def __init__(self, cleanup_ms: int):
        self.cleanup_ms = cleanup_ms

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        if window.max_timestamp() <= ctx.get_current_watermark():
            return tm.TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return tm.TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        if time in (window.max_timestamp(), window.max_timestamp() + self.cleanup_ms):
            return tm.TriggerResult.FIRE_AND_PURGE
        return tm.TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        return tm.TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):  # type: ignore[no-untyped-def]
        ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx):  # type: ignore[no-untyped-def]
        ctx.delete_event_time_timer(window.max_timestamp())


class FireEverytimeOnElementAndEventTimeTrigger(tm.Trigger):
    """WindowOperatorTest.FireEverytimeOnElementAndEventTimeTrigger.

    FIRE on every element and on every timer callback (event or processing time); it
    registers no timers and keeps no state, so only the operator's cleanup timer calls it.
    """

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        return tm.TriggerResult.FIRE

    def on_event_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        return tm.TriggerResult.FIRE

    def on_processing_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        return tm.TriggerResult.FIRE

    def clear(self, window, ctx):  # type: ignore[no-untyped-def]
        pass


class RearmingEventTimeTrigger(tm.Trigger):
    """Fires at the window end and registers the same timer again, every time: in Flink
    the timer fires again in the same advance, forever; tidemark holds it for the next,
    higher watermark (timer_registered_in_the_past.yaml)."""

    def on_element(self, element, timestamp, window, ctx):  # type: ignore[no-untyped-def]
        ctx.register_event_time_timer(window.max_timestamp())
        return tm.TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        if time != window.max_timestamp():  # the cleanup timer
            return tm.TriggerResult.CONTINUE
        ctx.register_event_time_timer(time)
        return tm.TriggerResult.FIRE

    def on_processing_time(self, time, window, ctx):  # type: ignore[no-untyped-def]
        return tm.TriggerResult.CONTINUE

    def clear(self, window, ctx):  # type: ignore[no-untyped-def]
        ctx.delete_event_time_timer(window.max_timestamp())


CUSTOM_TRIGGERS = {
    "RearmingEventTimeTrigger": lambda spec: RearmingEventTimeTrigger(),
    "EventTimeTriggerAccumGC": lambda spec: EventTimeTriggerAccumGC(int(spec["cleanup"])),
    "FireEverytimeOnElementAndEventTimeTrigger": lambda spec: (
        FireEverytimeOnElementAndEventTimeTrigger()
    ),
}


def _wot_dynamic_gap(element: Any) -> int:
    """WindowOperatorTest's mocked SessionWindowTimeGapExtractor (dynamic session tests):
    key1 -> 3000 ms; key2 -> 1000 ms when the value is 10, else 2000 ms; otherwise 0."""
    if element[0] == "key1":
        return 3000
    if element[0] == "key2":
        return 1000 if element[1] == 10 else 2000
    return 0


GAP_EXTRACTORS = {
    "value": lambda element: element[1],  # PyFlink MySessionWindowTimeGapExtractor
    "wot_dynamic": _wot_dynamic_gap,
}


def register(functions: dict, assigners: dict, triggers: dict, gaps: dict) -> None:  # type: ignore[type-arg]
    functions.update(FUNCTIONS)
    assigners.update(CUSTOM_ASSIGNERS)
    triggers.update(CUSTOM_TRIGGERS)
    gaps.update(GAP_EXTRACTORS)
