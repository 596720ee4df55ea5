"""Window assigners: which windows an element belongs to.

Flink's built-in assigners with Flink's names and PyFlink's snake_case methods. Event-time
assigners place an element by its timestamp; processing-time assigners by the clock at
arrival. Merging assigners (sessions) create one window per element and merge windows
that overlap or touch.

The guide, with pictures: ``docs/concepts/windows.md`` and ``docs/concepts/sessions.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable
from typing import Any, cast

from tidemark.errors import InputDataError, WindowSpecError
from tidemark.ranges import aligned_timestamp_range, out_of_range_error
from tidemark.time import LONG_MAX, LONG_MIN, TimeDomain, TimeLike, to_millis
from tidemark.triggers import (
    EndOfStreamTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from tidemark.windows import (
    AlignedLayout,
    GlobalWindow,
    TimeWindow,
    Window,
    get_window_start_with_offset,
)

__all__ = [
    "WindowAssignerContext",
    "WindowAssigner",
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
]


class WindowAssignerContext(ABC):
    """What an assigner may ask while assigning: the current processing time."""

    @abstractmethod
    def get_current_processing_time(self) -> int:
        """The processing-time clock, in ms (processing-time assigners place by it)."""


class WindowAssigner(ABC):
    """Assigns each element to zero or more windows; subclass it for your own windows.

    One assigner object serves every key. Declarations (:meth:`is_event_time`,
    :meth:`timer_domains`, :meth:`aligned_layout`) are asked once, when a pipeline is
    built; the engine and Spark modes choose from them.

    Supported
    ---------
    - any windows with a ``max_timestamp()`` (usually :class:`TimeWindow`);
    - an empty collection: the element goes into no window (late, if its timestamp is).

    Not supported
    -------------
    - state or timers (an assigner is a pure function of element, timestamp and clock);
    - merging windows without :class:`MergingWindowAssigner`.
    """

    @abstractmethod
    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        """The windows ``element`` belongs to.

        Called exactly once per element, before lateness is judged (windows whose
        cleanup time the watermark passed are then skipped).

        Parameters
        ----------
        element : Any
            The element (a ``pyspark.sql.Row`` on Spark).
        timestamp : int or None
            Its event timestamp in ms; ``None`` when it has none (an event-time assigner
            should then raise :class:`~tidemark.errors.InputDataError`).
        context : WindowAssignerContext
            The processing-time clock.
        """

    @abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger:
        """The trigger used when the pipeline sets none."""

    @abstractmethod
    def is_event_time(self) -> bool:
        """True when windows are event-time windows (they can be late and get cleaned up
        by the watermark)."""

    def timer_domains(self) -> frozenset[TimeDomain]:
        """The time domain of the windows' cleanup timers (event time for event-time
        windows, else processing time); empty for windows that never end."""
        domain = TimeDomain.EVENT_TIME if self.is_event_time() else TimeDomain.PROCESSING_TIME
        return frozenset((domain,))

    def timestamp_range(self) -> tuple[int, int]:
        """``(lowest, highest)``: the event timestamps whose windows fit in a long.

        Flink computes windows in Java longs, where a window's end past
        ``Long.MAX_VALUE`` (or its start before ``Long.MIN_VALUE``) silently wraps
        around; tidemark refuses an element outside this range, in every mode, with its
        value (:func:`out_of_range_error`). The default, for windows not placed by event
        time or an assigner that does not say: every long.
        """
        return (LONG_MIN, LONG_MAX)

    def aligned_layout(self) -> AlignedLayout | None:
        """The fixed layout of this assigner's windows, when an element at ``ts`` is in
        every window ``[s, s + size)`` with ``s = layout.last_start(ts) - k * slide > ts
        - size`` (tumbling and sliding windows); None (the default) otherwise. The
        engine's aligned fast path computes windows from it instead of calling
        :meth:`assign_windows`."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _keeps_assign_windows(assigner: WindowAssigner, base: type[WindowAssigner]) -> bool:
    """Whether ``assigner`` assigns windows as ``base`` does (a subclass that overrides
    :meth:`WindowAssigner.assign_windows` loses its base's layout)."""
    return type(assigner).assign_windows is base.assign_windows


class MergingWindowAssigner(WindowAssigner):
    """An assigner whose windows merge (sessions).

    Its trigger must support merging (``Trigger.can_merge()``); window contents are
    merged with the function's merge (``AggregateFunction.merge``, the reduce).
    """

    @abstractmethod
    def merge_windows(
        self,
        windows: Iterable[Window],
        callback: Callable[[Collection[Window], Window], Any],
    ) -> None:
        """Call ``callback(to_be_merged, merge_result)`` for every group that merges.

        Called after each element's windows were added, with every in-flight window of
        the key; a group's result may equal one of its members. Windows that merge must
        not move backwards in time behind the watermark (the engine refuses that).
        """


def _require_timestamp(assigner: WindowAssigner, timestamp: int | None) -> int:
    if timestamp is None:
        raise InputDataError(
            f"{type(assigner).__name__} needs an event timestamp, but an element has none: "
            "give the stream a timestamp column or a WatermarkStrategy timestamp assigner, "
            "or use a processing-time assigner"
        )
    return timestamp


def _positive(value: TimeLike, name: str) -> int:
    millis = to_millis(value, name)
    if millis <= 0:
        raise WindowSpecError(f"`{name}` must be > 0; got {name}={millis}ms")
    return millis


def _check_offset(offset_ms: int, bound_ms: int, bound_name: str) -> None:
    if abs(offset_ms) >= bound_ms:
        raise WindowSpecError(
            f"`offset` must satisfy abs(offset) < {bound_name}; "
            f"got offset={offset_ms}ms, {bound_name}={bound_ms}ms"
        )


class _Tumbling(WindowAssigner):
    def __init__(self, size: TimeLike, offset: TimeLike = 0):
        self.size_ms = _positive(size, "size")
        self.offset_ms = to_millis(offset, "offset")
        _check_offset(self.offset_ms, self.size_ms, "size")

    @classmethod
    def of(cls, size: TimeLike, offset: TimeLike = 0) -> Any:
        """Windows of ``size``, aligned to the epoch shifted by ``offset``."""
        return cls(size, offset)

    def _window(self, timestamp: int) -> list[Window]:
        start = get_window_start_with_offset(timestamp, self.offset_ms, self.size_ms)
        return [TimeWindow(start, start + self.size_ms)]

    def timestamp_range(self) -> tuple[int, int]:
        if not self.is_event_time():
            return super().timestamp_range()
        return aligned_timestamp_range(self.size_ms, self.size_ms, self.offset_ms)

    def aligned_layout(self) -> AlignedLayout | None:
        if not _keeps_assign_windows(self, _ALIGNED[self.is_event_time()][0]):
            return None
        return AlignedLayout(self.size_ms, self.size_ms, self.offset_ms)

    def __repr__(self) -> str:
        return f"{type(self).__name__}.of({self.size_ms}ms, offset={self.offset_ms}ms)"


class TumblingEventTimeWindows(_Tumbling):
    """Fixed-size, non-overlapping event-time windows ``[k*size + offset, (k+1)*size + offset)``.

    Examples
    --------
    >>> TumblingEventTimeWindows.of(5000).assign_windows(None, 7200, None)
    [TimeWindow[5000, 10000)]
    >>> TumblingEventTimeWindows.of(10_000, offset=20_000)
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `offset` must satisfy abs(offset) < size; got offset=20000ms, size=10000ms
    """

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        return self._window(_require_timestamp(self, timestamp))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class TumblingProcessingTimeWindows(_Tumbling):
    """Fixed-size, non-overlapping windows of the processing time at which elements arrive."""

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        return self._window(context.get_current_processing_time())

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class _Sliding(WindowAssigner):
    def __init__(self, size: TimeLike, slide: TimeLike, offset: TimeLike = 0):
        self.size_ms = _positive(size, "size")
        # slide > size is allowed, as in Flink: sampling windows, with gaps between them
        self.slide_ms = _positive(slide, "slide")
        self.offset_ms = to_millis(offset, "offset")
        _check_offset(self.offset_ms, self.slide_ms, "slide")

    @classmethod
    def of(cls, size: TimeLike, slide: TimeLike, offset: TimeLike = 0) -> Any:
        """Windows of ``size`` starting every ``slide``, aligned to ``offset``."""
        return cls(size, slide, offset)

    def aligned_layout(self) -> AlignedLayout | None:
        # Windows with gaps (slide > size) take the general path: every fast path (and
        # pre-aggregation) assumes each timestamp is in at least one window.
        if not _keeps_assign_windows(self, _ALIGNED[self.is_event_time()][1]):
            return None
        if self.slide_ms > self.size_ms:
            return None
        return AlignedLayout(self.size_ms, self.slide_ms, self.offset_ms)

    def timestamp_range(self) -> tuple[int, int]:
        if not self.is_event_time():
            return super().timestamp_range()
        return aligned_timestamp_range(self.size_ms, self.slide_ms, self.offset_ms)

    def _windows(self, timestamp: int) -> list[Window]:
        size, slide = self.size_ms, self.slide_ms
        start = get_window_start_with_offset(timestamp, self.offset_ms, slide)
        windows: list[Window] = []
        while start > timestamp - size:
            windows.append(TimeWindow(start, start + size))
            start -= slide
        return windows

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}.of({self.size_ms}ms, {self.slide_ms}ms, "
            f"offset={self.offset_ms}ms)"
        )


class SlidingEventTimeWindows(_Sliding):
    """Overlapping event-time windows: each element is in ``size / slide`` windows.

    With ``slide > size`` (as Flink allows) they are sampling windows, with a gap of
    ``slide - size`` between one window's end and the next one's start: an element in a
    gap is in no window. Flink loses it without counting it (unless it is late); tidemark
    counts it in ``num_late_records_dropped`` (it is not late, so it never goes to the
    late-data side output), in every mode.

    >>> SlidingEventTimeWindows.of(3000, 1000).assign_windows(None, 2500, None)
    [TimeWindow[2000, 5000), TimeWindow[1000, 4000), TimeWindow[0, 3000)]
    >>> gaps = SlidingEventTimeWindows.of(1000, 3000)
    >>> gaps.assign_windows(None, 3500, None), gaps.assign_windows(None, 4500, None)
    ([TimeWindow[3000, 4000)], [])
    >>> SlidingEventTimeWindows.of(60_000, 0)
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `slide` must be > 0; got slide=0ms
    """

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        return self._windows(_require_timestamp(self, timestamp))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class SlidingProcessingTimeWindows(_Sliding):
    """Overlapping windows of processing time; with ``slide > size``, sampling windows
    (an element arriving in a gap is in no window and counted in
    ``num_late_records_dropped``, as :class:`SlidingEventTimeWindows` says)."""

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        return self._windows(context.get_current_processing_time())

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


# The aligned assigners by event time (True) or processing time: (tumbling, sliding).
_ALIGNED: dict[bool, tuple[type[WindowAssigner], type[WindowAssigner]]] = {
    True: (TumblingEventTimeWindows, SlidingEventTimeWindows),
    False: (TumblingProcessingTimeWindows, SlidingProcessingTimeWindows),
}


class _Session(MergingWindowAssigner):
    def merge_windows(
        self,
        windows: Iterable[Window],
        callback: Callable[[Collection[Window], Window], Any],
    ) -> None:
        # A session assigner's windows are the TimeWindows it assigned.
        TimeWindow.merge_windows(cast("Iterable[TimeWindow]", windows), callback)


def merges_by_sweep(assigner: MergingWindowAssigner) -> bool:
    """Whether ``assigner`` merges its windows as the session assigners do: the
    TimeWindows' sort-and-sweep (:meth:`TimeWindow.merge_windows`), not a method of its
    own. The merging window set takes a shortcut for it."""
    return type(assigner).merge_windows is _Session.merge_windows


class _StaticGap(_Session):
    def __init__(self, gap: TimeLike):
        self.gap_ms = _positive(gap, "gap")

    @classmethod
    def with_gap(cls, gap: TimeLike) -> Any:
        """Sessions that close after ``gap`` without elements."""
        return cls(gap)

    @classmethod
    def with_dynamic_gap(cls, extractor: Any, *, keep_all_elements: bool | None = None) -> Any:
        """Sessions whose gap is ``extractor(element)`` (a callable or has ``extract``);
        ``keep_all_elements``: see :class:`DynamicEventTimeSessionWindows`."""
        target = (
            DynamicEventTimeSessionWindows
            if cls is EventTimeSessionWindows
            else DynamicProcessingTimeSessionWindows
        )
        return target(extractor, keep_all_elements)

    def __repr__(self) -> str:
        return f"{type(self).__name__}.with_gap({self.gap_ms}ms)"


class EventTimeSessionWindows(_StaticGap):
    """Each element opens ``[ts, ts + gap)``; windows that overlap or touch merge.

    >>> EventTimeSessionWindows.with_gap(0)
    Traceback (most recent call last):
    ...
    tidemark.errors.WindowSpecError: `gap` must be > 0; got gap=0ms
    """

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        ts = _require_timestamp(self, timestamp)
        return [TimeWindow(ts, ts + self.gap_ms)]

    def timestamp_range(self) -> tuple[int, int]:
        return (LONG_MIN, LONG_MAX - self.gap_ms)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class ProcessingTimeSessionWindows(_StaticGap):
    """Sessions of processing time: ``[now, now + gap)`` per element, merged."""

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        now = context.get_current_processing_time()
        return [TimeWindow(now, now + self.gap_ms)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class _DynamicGap(_Session):
    """Sessions whose gap is computed per element.

    ``keep_all_elements``: Flink 1.20 loses the elements a merged session holds when a
    later element's window ``[ts, ts + gap)`` equals that session exactly (its
    ``MergingWindowSet`` then maps the session to a fresh, empty state; only a dynamic gap
    can give such a window). ``None`` (the default) and ``False`` keep Flink's results;
    ``None`` also makes the Spark API warn at definition. ``True`` keeps every element in
    its session, so results differ from Flink's where this happens. See
    ``docs/concepts/windows.md`` ("Dynamic gaps and Flink's lost elements").
    """

    def __init__(self, extractor: Any, keep_all_elements: bool | None = None):
        self.extract = getattr(extractor, "extract", extractor)
        if not callable(self.extract):
            raise WindowSpecError(
                f"`extractor` must be callable element -> gap, or have extract(element); "
                f"got {extractor!r}"
            )
        if keep_all_elements is not None and not isinstance(keep_all_elements, bool):
            raise WindowSpecError(
                "`keep_all_elements` must be True (keep every element of a merged "
                "session), False (Flink's results) or None; got "
                f"{keep_all_elements!r}"
            )
        self.keep_all_elements = keep_all_elements

    @classmethod
    def with_dynamic_gap(cls, extractor: Any, *, keep_all_elements: bool | None = None) -> Any:
        return cls(extractor, keep_all_elements)

    def _gap(self, element: Any) -> int:
        gap_ms = to_millis(self.extract(element), "gap")
        if gap_ms <= 0:
            raise InputDataError(
                f"dynamic session gap must be > 0; got gap={gap_ms}ms for element {element!r}"
            )
        return gap_ms


class DynamicEventTimeSessionWindows(_DynamicGap):
    """Event-time sessions whose gap is computed per element."""

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        ts = _require_timestamp(self, timestamp)
        end = ts + self._gap(element)
        if end > LONG_MAX:
            raise out_of_range_error(self, ts, (LONG_MIN, LONG_MAX - end + ts), element)
        return [TimeWindow(ts, end)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class DynamicProcessingTimeSessionWindows(_DynamicGap):
    """Processing-time sessions whose gap is computed per element."""

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        now = context.get_current_processing_time()
        return [TimeWindow(now, now + self._gap(element))]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class GlobalWindows(WindowAssigner):
    """One window per key that never ends; needs a trigger (count windows use it).

    >>> GlobalWindows.create().assign_windows("x", 5, None)
    [GlobalWindow]
    """

    def __init__(self, end_of_stream_trigger: bool = False):
        self._end_of_stream = end_of_stream_trigger

    @classmethod
    def create(cls) -> GlobalWindows:
        """Global windows whose default trigger never fires."""
        return cls()

    @classmethod
    def create_with_end_of_stream_trigger(cls) -> GlobalWindows:
        """Global windows that fire once, at the end of a bounded input."""
        return cls(end_of_stream_trigger=True)

    def assign_windows(
        self, element: Any, timestamp: int | None, context: WindowAssignerContext
    ) -> Collection[Window]:
        return [GlobalWindow.get()]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EndOfStreamTrigger() if self._end_of_stream else NeverTrigger()

    def timer_domains(self) -> frozenset[TimeDomain]:
        return frozenset()  # its window never ends: no cleanup timer

    def is_event_time(self) -> bool:
        return False
