"""Window functions: what is computed when a window fires.

Incremental functions (:class:`ReduceFunction`, :class:`AggregateFunction`) keep one
accumulator per window as elements arrive; :class:`ProcessWindowFunction` and
:class:`WindowFunction` see all of a window's elements (or the single pre-aggregated
value when combined with an incremental function). Names and signatures follow PyFlink.

The guide, with a custom :class:`AggregateFunction`: ``docs/concepts/functions.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from tidemark.errors import WindowResultError, WindowSpecError
from tidemark.outputs import OutputTag
from tidemark.panes import PaneInfo
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
    "VectorizedAggregateFunction",
    "VectorizedCombineFunction",
    "check_combine_function",
    "checked_partial",
    "finish_one_part",
]


class ReduceFunction(ABC):
    """Combines two values of the same type into one; a plain callable works as well.

    >>> class Sum(ReduceFunction):
    ...     def reduce(self, value1, value2):
    ...         return value1 + value2
    >>> Sum().reduce(2, 3)
    5

    Set the class attribute :attr:`order_insensitive` to ``True`` when the reduced value
    does not depend on the order its elements are combined in (a sum of integers, a
    maximum, ...): ``window_all`` then reduces each part of its input where it is and
    combines the parts on one core (see ``docs/concepts/functions.md``).
    """

    order_insensitive: bool = False
    """The promise that :meth:`reduce` gives the same final value whatever order and
    grouping its elements are combined in (commutative and associative). ``window_all``
    in BATCH then reduces per Spark partition and combines the partial values with
    :meth:`reduce`; Flink's one-task semantics otherwise. Checked when the pipeline is
    defined (it must be a bool)."""

    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any:
        """Combine two values into one of the same type.

        Called for every element added to a window that already holds a value
        (``value1``: the window's value so far, ``value2``: the new element), and when
        merging windows combine their values. The first element of a window is kept as
        it is, without a call. Elements arrive in the order the operator sees them.

        Supported
        ---------
        - returning a new value, or ``value1`` changed in place.

        Not supported
        -------------
        - state or timers (there is no context); use a :class:`ProcessWindowFunction`
          combined with the reduce for per-window state.
        """


class AggregateFunction(ABC):
    """Folds elements into an accumulator, which gives the window's result.

    One accumulator per key and window: :meth:`create_accumulator` when the window
    receives its first element, :meth:`add` for every element, :meth:`get_result` on
    every firing (a window can fire several times: the accumulator stays until the
    window is purged or cleaned up), :meth:`merge` when windows merge (sessions).

    Supported
    ---------
    - mutable accumulators, changed in place and returned by :meth:`add`;
    - any picklable accumulator (Spark keeps it in its state store between batches).

    - ``order_insensitive = True`` (a class attribute) with :meth:`merge`: the promise
      that the result does not depend on the order of :meth:`add` calls nor on how
      accumulators are grouped into :meth:`merge` calls (a count, an integer sum, a
      maximum, a set of distinct values). ``window_all`` in BATCH then aggregates each
      Spark partition where it is and merges the partial accumulators on one core, as
      Flink SQL's local-global aggregation does (see ``docs/concepts/functions.md``).

    Not supported
    -------------
    - state or timers (there is no context).

    >>> class Count(AggregateFunction):
    ...     order_insensitive = True
    ...     def create_accumulator(self):
    ...         return 0
    ...     def add(self, value, accumulator):
    ...         return accumulator + 1
    ...     def get_result(self, accumulator):
    ...         return accumulator
    ...     def merge(self, acc_a, acc_b):
    ...         return acc_a + acc_b
    >>> Count().get_result(Count().merge(2, 3))
    5
    """

    order_insensitive: bool = False
    """The promise that :meth:`get_result` does not depend on the order of the
    :meth:`add` calls nor on the grouping of :meth:`merge` calls; needs :meth:`merge`.
    Checked when the pipeline is defined."""

    @abstractmethod
    def create_accumulator(self) -> Any:
        """A new, empty accumulator (called once per window, before its first add)."""

    @abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any:
        """Return the accumulator with ``value`` added (may mutate and return it)."""

    @abstractmethod
    def get_result(self, accumulator: Any) -> Any:
        """The window's result from ``accumulator``; called on every firing, so it must
        not change the accumulator."""

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        """Combine two accumulators; required for merging (session) windows."""
        raise NotImplementedError(f"{type(self).__name__}.merge is needed for merging windows")


class ProcessWindowContext(ABC):
    """What a :class:`ProcessWindowFunction` may see and do during one call; made by the
    engine for that call (do not keep it).

    Supported
    ---------
    - the window, both clocks, side outputs;
    - per-window state (:meth:`window_state`) and per-key state (:meth:`global_state`).

    Not supported
    -------------
    - per-window state with merging assigners (sessions), as in Flink: it raises;
    - timers (a trigger registers timers, not a window function).
    """

    @abstractmethod
    def window(self) -> Window:
        """The window being evaluated."""

    @abstractmethod
    def current_processing_time(self) -> int:
        """The processing-time clock, in ms."""

    @abstractmethod
    def current_watermark(self) -> int:
        """The watermark of the firing: the one that reached the window's timer, or the
        final one (+inf) where a BATCH run fires a complete window early."""

    @abstractmethod
    def window_state(self) -> KeyedStateStore:
        """State of this key and window; cleared with the window (see ``clear``)."""

    @abstractmethod
    def global_state(self) -> KeyedStateStore:
        """State of this key, shared by all its windows."""

    @abstractmethod
    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Emit ``value`` to the side output ``output_tag`` (timestamp: the window's max)."""

    def pane(self) -> PaneInfo:
        """The pane this firing emits: early, on time or late, its index, whether it is
        the last (:class:`~tidemark.panes.PaneInfo`). Under one of Flink's triggers,
        which keep no pane record, :attr:`PaneInfo.UNKNOWN`."""
        return PaneInfo.UNKNOWN


class ProcessWindowFunction(ABC):
    """Evaluates a window with all its elements and a context.

    :meth:`process` is called on every firing of a window (one per trigger FIRE) with
    the key, a context and the window's elements (or, combined with a reduce or
    aggregate function, the one incremental result); it returns or yields the results,
    each emitted with the window's ``max_timestamp()``. :meth:`clear` is called once,
    when the window is removed at its cleanup time.

    Supported
    ---------
    - returning a list or yielding results (``None`` emits nothing);
    - per-window and per-key state, side outputs (see :class:`ProcessWindowContext`).

    Not supported
    -------------
    - timers; changing the window's elements.
    """

    Context = ProcessWindowContext

    @abstractmethod
    def process(self, key: Any, context: ProcessWindowContext, elements: Iterable[Any]) -> Any:
        """The results of one firing of ``context.window()`` for ``key``."""

    def clear(self, context: ProcessWindowContext) -> None:
        """Called when the window is purged for good (at its cleanup time): delete what
        it keeps in ``context.window_state()`` here."""


class VectorizedAggregateFunction(ABC):
    """Computes a window's result from its values at once, as NumPy arrays: the windowed
    form of PySpark's Series-to-scalar pandas UDF.

    Used with ``WindowedStream.aggregate_vectorized(function, fields=[...])``: on every
    firing of a window, :meth:`aggregate` is called once with one 1-D ``float64`` array
    per field named in ``fields``, in that order, each holding the values of all the
    window's elements (the elements the window keeps, in the order a
    :class:`ProcessWindowFunction` sees them). A null arrives as ``NaN`` (as a pandas
    Series of a nullable column does): use ``np.nanmean``, ``np.nanpercentile`` ... to
    skip nulls. The result is one value of the ``output_type`` (None: a null result).

    Supported
    ---------
    - any NumPy (or other) computation over the arrays; a plain function
      ``(*arrays) -> value`` works as well;
    - every trigger, evictor and allowed lateness: a late firing is called again with
      all values kept.

    Not supported
    -------------
    - state, timers, side outputs (use a :class:`ProcessWindowFunction`);
    - changing the arrays in place (the same buffer may be handed to another call).

    >>> import numpy as np
    >>> class P90(VectorizedAggregateFunction):
    ...     def aggregate(self, values):
    ...         return float(np.percentile(values, 90))
    >>> P90().aggregate(np.arange(11.0))
    9.0
    """

    @abstractmethod
    def aggregate(self, *columns: Any) -> Any:
        """The window's result from one ``float64`` array per field (NaN: null)."""


class VectorizedCombineFunction(VectorizedAggregateFunction):
    """A :class:`VectorizedAggregateFunction` with a partial step: :meth:`partial` turns
    any part of a window's values into a few numbers, :meth:`finish` turns the parts'
    numbers into the window's result. Spark's ``avg`` splits the same way (a sum and a
    count per part, added up at the end), and so can tidemark: a keyed BATCH run then
    combines each input partition's values where they are and shuffles only the partial
    numbers (``docs/concepts/vectorized.md``).

    Declare :attr:`partials`, a tuple of names, one per number :meth:`partial` returns.
    The promise: the result of :meth:`finish` does not depend on how the window's values
    were split into parts, nor on the order of the parts (a sum of integers, a count, a
    minimum; a float sum only up to rounding). :meth:`aggregate` is provided, as
    ``finish`` of the single part of all values, so every other path (a replay, a
    stream, triggers, evictors, late firings) gives the same value; do not override it.

    >>> import numpy as np
    >>> class Mean(VectorizedCombineFunction):
    ...     partials = ("total", "count")
    ...     def partial(self, values):
    ...         return np.nansum(values), np.count_nonzero(~np.isnan(values))
    ...     def finish(self, total, count):
    ...         n = count.sum()
    ...         return float(total.sum() / n) if n else None
    >>> Mean().aggregate(np.array([1.0, np.nan, 5.0]))
    3.0
    >>> Mean().finish(np.array([1.0, 5.0]), np.array([1.0, 1.0]))  # two parts
    3.0
    """

    partials: tuple[str, ...] = ()
    """The names of the numbers :meth:`partial` returns, in order: a non-empty tuple of
    distinct identifiers, e.g. ``("total", "count")``. Checked when the class is defined
    (and when a pipeline uses it)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "partials" in cls.__dict__:
            _check_partials(cls)
        if "aggregate" in cls.__dict__:
            raise WindowSpecError(
                f"{cls.__qualname__} overrides `aggregate`, which a VectorizedCombineFunction "
                "provides as finish(partial(values)) so every path gives the same value: "
                "remove aggregate (or subclass VectorizedAggregateFunction instead)"
            )

    def partial(self, *columns: Any) -> Any:
        """The numbers of one part of a window's values (one ``float64`` array per field,
        as :meth:`aggregate` gets; NaN: null): a tuple of ``len(partials)`` numbers. A
        part is never empty on the partial-step path; :meth:`aggregate` may hand it
        empty arrays (an evictor that kept nothing)."""
        raise NotImplementedError(f"{type(self).__qualname__}.partial")

    def finish(self, *partials: Any) -> Any:
        """The window's result from its parts: one ``float64`` array per name in
        :attr:`partials`, one entry per part, in no particular order."""
        raise NotImplementedError(f"{type(self).__qualname__}.finish")

    def aggregate(self, *columns: Any) -> Any:
        """``finish`` of the single part of all values (do not override)."""
        return finish_one_part(self, checked_partial(self, self.partial(*columns)))


def _check_partials(cls: type) -> None:
    names = getattr(cls, "partials", None)
    fix = "declare e.g. partials = ('total', 'count'), one name per number partial returns"
    if not isinstance(names, tuple) or not names:
        raise WindowSpecError(
            f"{cls.__qualname__}.partials must be a non-empty tuple of names; got {names!r}: {fix}"
        )
    bad = [n for n in names if not (isinstance(n, str) and n.isidentifier())]
    if bad or len(set(names)) != len(names):
        raise WindowSpecError(
            f"{cls.__qualname__}.partials must hold distinct identifiers; got {names!r}: {fix}"
        )


def check_combine_function(function: VectorizedCombineFunction) -> None:
    """Refuse a :class:`VectorizedCombineFunction` without :attr:`partials`, or without
    its own :meth:`~VectorizedCombineFunction.partial` and
    :meth:`~VectorizedCombineFunction.finish`.

    Raises
    ------
    WindowSpecError
        Naming the class, what is missing and the fix.
    """
    cls = type(function)
    _check_partials(cls)
    for method in ("partial", "finish"):
        if getattr(cls, method) is getattr(VectorizedCombineFunction, method):
            raise WindowSpecError(
                f"{cls.__qualname__} must define `{method}` (a VectorizedCombineFunction "
                "needs partial(*columns) -> numbers and finish(*partials) -> value); got "
                f"none: define {method}, or subclass VectorizedAggregateFunction instead"
            )


def checked_partial(
    function: VectorizedCombineFunction,
    returned: Any,
    where: Callable[[], tuple[Any, Any]] | None = None,
) -> tuple[float, ...]:
    """What ``function.partial`` returned, as ``len(function.partials)`` floats.

    Raises
    ------
    WindowResultError
        Not a tuple (list, 1-D array) of that many numbers; naming what was returned and
        the key and window from ``where()`` (called only then).
    """
    import numpy as np  # here: `import tidemark` needs no NumPy (a zip shipped alone)

    names = function.partials
    shaped = isinstance(returned, (tuple, list)) or (
        isinstance(returned, np.ndarray) and returned.ndim == 1
    )
    if shaped and len(returned) == len(names) and all(_is_number(v) for v in returned):
        return tuple(float(v) for v in returned)
    key, window = where() if where is not None else (None, None)
    raise WindowResultError(
        f"{type(function).__qualname__}.partial returned {returned!r} "
        f"({type(returned).__name__}) for key={key!r}, window={window!r}: return a tuple "
        f"of {len(names)} numbers, one per name in partials={names!r}",
        key,
        window,
    )


def finish_one_part(function: VectorizedCombineFunction, parts: tuple[float, ...]) -> Any:
    """``function.finish`` of one part's numbers (each a one-entry array)."""
    import numpy as np  # here: `import tidemark` needs no NumPy (a zip shipped alone)

    return function.finish(*[np.array([p], dtype=np.float64) for p in parts])


def _is_number(value: Any) -> bool:
    """A Python or NumPy int or float (NaN included; not a bool) that a float64 holds."""
    import numpy as np  # here: `import tidemark` needs no NumPy (a zip shipped alone)

    if isinstance(value, (bool, np.bool_)):
        return False
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    try:
        float(value)
    except OverflowError:  # an int beyond a double's range
        return False
    return True


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
