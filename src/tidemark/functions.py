"""Window functions: what is computed when a window fires.

Incremental functions (:class:`ReduceFunction`, :class:`AggregateFunction`) keep one
accumulator per window as elements arrive; :class:`ProcessWindowFunction` and
:class:`WindowFunction` see all of a window's elements (or the single pre-aggregated
value when combined with an incremental function). Names and signatures follow PyFlink.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from tidemark.outputs import OutputTag
from tidemark.state import KeyedStateStore
from tidemark.windows import Window

__all__ = [
    "ReduceFunction",
    "AggregateFunction",
    "ProcessWindowFunction",
    "ProcessAllWindowFunction",
    "WindowFunction",
    "AllWindowFunction",
    "ProcessWindowContext",
]


class ReduceFunction(ABC):
    """Combines two values of the same type into one; a plain callable works as well.

    >>> class Sum(ReduceFunction):
    ...     def reduce(self, value1, value2):
    ...         return value1 + value2
    >>> Sum().reduce(2, 3)
    5
    """

    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class AggregateFunction(ABC):
    """Folds elements into an accumulator; ``merge`` combines accumulators of merged windows."""

    @abstractmethod
    def create_accumulator(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any:
        """Return the accumulator with ``value`` added (may mutate and return it)."""

    @abstractmethod
    def get_result(self, accumulator: Any) -> Any: ...

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        """Combine two accumulators; required for merging (session) windows."""
        raise NotImplementedError(f"{type(self).__name__}.merge is needed for merging windows")


class ProcessWindowContext(ABC):
    """The context a :class:`ProcessWindowFunction` gets; implemented by the engine."""

    @abstractmethod
    def window(self) -> Window:
        """The window being evaluated."""

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int:
        """The operator's watermark at the time of the firing."""

    @abstractmethod
    def window_state(self) -> KeyedStateStore:
        """State of this key and window; cleared with the window (see ``clear``)."""

    @abstractmethod
    def global_state(self) -> KeyedStateStore:
        """State of this key, shared by all its windows."""

    @abstractmethod
    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Emit ``value`` to the side output ``output_tag`` (timestamp: the window's max)."""


class ProcessWindowFunction(ABC):
    """Evaluates a window with all its elements and a context.

    ``process`` is called on every firing and returns (or yields) the results; ``clear``
    is called when the window is removed, to clean up ``context.window_state()``.
    """

    Context = ProcessWindowContext

    @abstractmethod
    def process(self, key: Any, context: ProcessWindowContext, elements: Iterable[Any]) -> Any: ...

    def clear(self, context: ProcessWindowContext) -> None:
        """Called when the window is purged for good (at its cleanup time)."""


class ProcessAllWindowFunction(ABC):
    """The non-keyed (``window_all``) form of :class:`ProcessWindowFunction`."""

    Context = ProcessWindowContext

    @abstractmethod
    def process(self, context: ProcessWindowContext, elements: Iterable[Any]) -> Any: ...

    def clear(self, context: ProcessWindowContext) -> None:
        """Called when the window is purged for good."""


class WindowFunction(ABC):
    """The older keyed window function: ``apply(key, window, inputs)`` returns results."""

    @abstractmethod
    def apply(self, key: Any, window: Window, inputs: Iterable[Any]) -> Any: ...


class AllWindowFunction(ABC):
    """The older non-keyed window function: ``apply(window, inputs)``."""

    @abstractmethod
    def apply(self, window: Window, inputs: Iterable[Any]) -> Any: ...
