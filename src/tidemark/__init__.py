"""tidemark: Apache Flink's DataStream windowing model for Python, on Apache Spark.

Every public name is importable from here, with Flink's names and PyFlink's snake_case
methods. The Spark entry points (``from_dataframe``, ``ship_to_executors``) load PySpark
only when used.

The documentation: ``docs/index.md`` (``make docs`` builds the site); the names
Flink users know, mapped: ``docs/flink-names.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidemark.assigners import (
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    MergingWindowAssigner,
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    WindowAssignerContext,
)
from tidemark.errors import (
    InputDataError,
    TidemarkError,
    TidemarkWarning,
    UnsupportedMergeError,
    UserFunctionError,
    WindowResultError,
    WindowSpecError,
)
from tidemark.evictors import (
    CountEvictor,
    DeltaEvictor,
    Evictor,
    EvictorContext,
    TimeEvictor,
    TimestampedValue,
)
from tidemark.functions import (
    AggregateFunction,
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    ReduceFunction,
    VectorizedAggregateFunction,
    VectorizedCombineFunction,
    WindowFunction,
)
from tidemark.outputs import OutputTag
from tidemark.panes import AccumulationMode, PaneInfo, PaneTiming
from tidemark.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from tidemark.time import LONG_MAX, LONG_MIN, Duration, TimeDomain
from tidemark.triggers import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DataflowTrigger,
    DefaultTrigger,
    DeltaTrigger,
    EndOfStreamTrigger,
    EventTimeTrigger,
    NeverTrigger,
    OnMergeContext,
    OrFinally,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Repeatedly,
    Trigger,
    TriggerContext,
    TriggerResult,
)
from tidemark.watermarks import TimestampAssigner, WatermarkStrategy
from tidemark.windows import GlobalWindow, TimeWindow, Window

if TYPE_CHECKING:  # at run time `timeline` is the callable submodule (see __getattr__)
    from tidemark.timeline import timeline as timeline

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "LONG_MAX",
    "TimeDomain",
    "LONG_MIN",
    "Duration",
    "Window",
    "TimeWindow",
    "GlobalWindow",
    "WindowAssigner",
    "WindowAssignerContext",
    "MergingWindowAssigner",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
    "Trigger",
    "TriggerContext",
    "OnMergeContext",
    "TriggerResult",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "DeltaTrigger",
    "NeverTrigger",
    "EndOfStreamTrigger",
    "DataflowTrigger",
    "AfterWatermark",
    "AfterCount",
    "AfterProcessingTime",
    "Repeatedly",
    "AfterAny",
    "AfterAll",
    "AfterEach",
    "OrFinally",
    "DefaultTrigger",
    "AccumulationMode",
    "PaneInfo",
    "PaneTiming",
    "Evictor",
    "EvictorContext",
    "TimestampedValue",
    "CountEvictor",
    "TimeEvictor",
    "DeltaEvictor",
    "ReduceFunction",
    "AggregateFunction",
    "ProcessWindowFunction",
    "ProcessAllWindowFunction",
    "WindowFunction",
    "AllWindowFunction",
    "VectorizedAggregateFunction",
    "VectorizedCombineFunction",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "OutputTag",
    "WatermarkStrategy",
    "TimestampAssigner",
    "TidemarkError",
    "WindowSpecError",
    "InputDataError",
    "UserFunctionError",
    "WindowResultError",
    "UnsupportedMergeError",
    "TidemarkWarning",
]


def __getattr__(name: str) -> Any:
    # The Spark API is loaded on first use so that the engine never needs PySpark.
    if name == "timeline":
        # The submodule itself: it is callable as ``tidemark.timeline(trace, path)`` and
        # still offers ``tidemark.timeline.load_trace`` and the rest. (Importing the
        # submodule rebinds this attribute to it, so a plain function would not stay.)
        import importlib

        return importlib.import_module("tidemark.timeline")
    if name == "explain":
        # "Why did this window (not) fire?" (docs/why-no-result.md): loaded when asked.
        import importlib

        return importlib.import_module("tidemark.explain")
    if name == "from_dataframe":
        from tidemark.spark.api import sources

        return sources.from_dataframe
    if name == "raising_tidemark_errors":
        from tidemark.spark.runtime import surfacing

        return surfacing.raising_tidemark_errors
    if name == "ship_to_executors":
        from tidemark.spark.runtime import shipping

        return shipping.ship_to_executors
    raise AttributeError(f"module 'tidemark' has no attribute {name!r}")
