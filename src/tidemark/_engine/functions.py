"""How a window's contents grow and what a firing hands the user's function.

Flink wraps each user function in an ``InternalWindowFunction``; :class:`WindowLogic`
is that wrapper: it knows whether the window keeps elements or one accumulator, how
accumulators merge, and how to call the user's window function.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.functions import (
    AggregateFunction,
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    ReduceFunction,
    WindowFunction,
)

__all__ = ["WindowLogic", "window_logic", "ELEMENTS", "REDUCE", "AGGREGATE"]

ELEMENTS, REDUCE, AGGREGATE = "elements", "reduce", "aggregate"

_WINDOW_FUNCTION_TYPES = (
    ProcessWindowFunction,
    ProcessAllWindowFunction,
    WindowFunction,
    AllWindowFunction,
)


def _results(returned: Any) -> list[Any]:
    if returned is None:
        return []
    if isinstance(returned, (str, bytes, tuple, dict)) or not isinstance(returned, Iterable):
        raise TypeError(
            "a window function must return or yield an iterable of results; "
            f"got {type(returned).__name__} (wrap a single result in a list, or use yield)"
        )
    return list(returned)


class WindowLogic:
    """The window function of an operator, with its state strategy.

    Parameters
    ----------
    kind : {"elements", "reduce", "aggregate"}
        What the window keeps: all elements, a reduced value, or an accumulator.
    incremental : ReduceFunction, callable, AggregateFunction or None
        The reduce or aggregate function, for the incremental kinds.
    window_function : ProcessWindowFunction, WindowFunction, ... or None
        Called with the elements (or the single incremental result); ``None`` emits the
        incremental result itself.
    """

    def __init__(self, kind: str, incremental: Any = None, window_function: Any = None):
        self.kind = kind
        self.window_function = window_function
        self.reduce: Any = None
        self.aggregate: AggregateFunction | None = None
        if kind == REDUCE:
            self.reduce = getattr(incremental, "reduce", incremental)
            if isinstance(incremental, ReduceFunction) or callable(self.reduce):
                pass
            else:
                raise WindowSpecError(
                    "`reduce_function` must be a ReduceFunction or a callable (a, b) -> value; "
                    f"got {incremental!r}"
                )
        elif kind == AGGREGATE:
            if not all(
                hasattr(incremental, m) for m in ("create_accumulator", "add", "get_result")
            ):
                raise WindowSpecError(
                    "`aggregate_function` must be an AggregateFunction (create_accumulator, add, "
                    f"get_result, merge); got {incremental!r}"
                )
            self.aggregate = incremental
        elif kind != ELEMENTS:
            raise ValueError(f"unknown window logic kind {kind!r}")
        if window_function is not None and not isinstance(window_function, _WINDOW_FUNCTION_TYPES):
            raise WindowSpecError(
                "`window_function` must be a ProcessWindowFunction, ProcessAllWindowFunction, "
                f"WindowFunction or AllWindowFunction; got {window_function!r}"
            )
        if kind == ELEMENTS and window_function is None:
            raise WindowSpecError("a window over all elements needs a `window_function`")

        self.has_clear = isinstance(
            window_function, (ProcessWindowFunction, ProcessAllWindowFunction)
        )
        self.add = {  # type: ignore[method-assign]
            REDUCE: self._add_reduced,
            AGGREGATE: self._add_aggregated,
        }.get(kind, self._add)

    def _add_reduced(self, current: Any, value: Any) -> Any:
        return value if current is None else self.reduce(current, value)

    def _add_aggregated(self, current: Any, value: Any) -> Any:
        aggregate = self.aggregate
        assert aggregate is not None
        if current is None:
            current = aggregate.create_accumulator()
        return aggregate.add(value, current)

    def _add(self, current: Any, value: Any) -> Any:
        """The contents after ``value`` arrived (``current`` is None for a new window)."""
        if self.kind == REDUCE:
            return value if current is None else self.reduce(current, value)
        if self.kind == AGGREGATE:
            assert self.aggregate is not None
            acc = self.aggregate.create_accumulator() if current is None else current
            return self.aggregate.add(value, acc)
        if current is None:
            return [value]
        current.append(value)
        return current

    def merge(self, target: Any, source: Any) -> Any:
        """Fold ``source`` contents into ``target`` (either may be None)."""
        if target is None:
            return source
        if source is None:
            return target
        if self.kind == REDUCE:
            return self.reduce(target, source)
        if self.kind == AGGREGATE:
            assert self.aggregate is not None
            return self.aggregate.merge(target, source)
        return target + source

    def fold(self, values: list[Any]) -> list[Any]:
        """The incremental result over ``values`` as one-element input (evicting windows)."""
        if self.kind == REDUCE:
            result = None
            for value in values:
                result = value if result is None else self.reduce(result, value)
            return [result]
        if self.kind == AGGREGATE:
            assert self.aggregate is not None
            acc = self.aggregate.create_accumulator()
            for value in values:
                acc = self.aggregate.add(value, acc)
            return [self.aggregate.get_result(acc)]
        return values

    def inputs(self, contents: Any) -> list[Any]:
        """What the window function sees for stored ``contents`` (non-evicting windows)."""
        if self.kind == REDUCE:
            return [contents]
        if self.kind == AGGREGATE:
            assert self.aggregate is not None
            return [self.aggregate.get_result(contents)]
        return contents

    def evaluate(self, key: Any, window: Any, ctx: Any, inputs: list[Any]) -> list[Any]:
        """Call the window function on ``inputs``; return its results."""
        fn = self.window_function
        if fn is None:
            return inputs
        if isinstance(fn, ProcessWindowFunction):
            return _results(fn.process(key, ctx, inputs))
        if isinstance(fn, ProcessAllWindowFunction):
            return _results(fn.process(ctx, inputs))
        if isinstance(fn, WindowFunction):
            return _results(fn.apply(key, window, inputs))
        return _results(fn.apply(window, inputs))

    def clear(self, ctx: Any) -> None:
        """Let a process function clean up its per-window state."""
        fn = self.window_function
        if isinstance(fn, (ProcessWindowFunction, ProcessAllWindowFunction)):
            fn.clear(ctx)


def window_logic(function: Any, window_function: Any = None) -> WindowLogic:
    """Pick the state strategy for a user's ``function`` (and optional window function).

    A :class:`ReduceFunction` or plain callable reduces; an :class:`AggregateFunction`
    aggregates; a process/window function alone sees all elements.
    """
    if isinstance(function, _WINDOW_FUNCTION_TYPES):
        if window_function is not None:
            raise WindowSpecError(
                "`window_function` goes with a reduce or aggregate function; "
                f"got function={function!r}, window_function={window_function!r}"
            )
        return WindowLogic(ELEMENTS, window_function=function)
    if isinstance(function, AggregateFunction):
        return WindowLogic(AGGREGATE, function, window_function)
    if isinstance(function, ReduceFunction) or callable(function):
        return WindowLogic(REDUCE, function, window_function)
    raise WindowSpecError(
        "`function` must be a ReduceFunction or callable, an AggregateFunction, or a "
        f"ProcessWindowFunction / WindowFunction; got {function!r}"
    )
