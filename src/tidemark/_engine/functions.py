"""How a window's contents grow and what a firing hands the user's function.

Flink wraps each user function in an ``InternalWindowFunction``; :class:`WindowLogic`
is that wrapper: it knows whether the window keeps elements or one accumulator, how
accumulators merge, and how to call the user's window function.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import GeneratorType
from typing import Any

from tidemark.errors import UserFunctionError, WindowResultError, WindowSpecError
from tidemark.functions import (
    AggregateFunction,
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    ReduceFunction,
    WindowFunction,
)

__all__ = [
    "WindowLogic",
    "ElementsLogic",
    "ReduceLogic",
    "AggregateLogic",
    "ReturnedNone",
    "window_logic",
    "check_order_insensitive",
    "declared_order_insensitive",
    "refuse_class",
]

_WINDOW_FUNCTION_TYPES = (
    ProcessWindowFunction,
    ProcessAllWindowFunction,
    WindowFunction,
    AllWindowFunction,
)


class ReturnedNone(TypeError):
    """A reduce function, or an AggregateFunction's ``add`` or ``merge``, returned None:
    None is a window without contents here (and a null record Flink cannot hold), so
    the window's elements would be lost. The operator's ``fold_error`` turns it into a
    :class:`~tidemark.errors.UserFunctionError` naming the function."""


def returned_none(
    what: str, function: Any, key: Any, window: Any, watermark: int
) -> UserFunctionError:
    """The error of ``function`` (the user's reduce or aggregate function) returning None."""
    name = getattr(function, "__name__", None) or type(function).__qualname__
    return UserFunctionError(
        f"{what} {name} returned None (key={key!r}, window={window!r}, "
        f"watermark={watermark}): a reduce function must return the combined value, an "
        "AggregateFunction's add and merge the accumulator (a missing `return`?)",
        key,
        window,
        watermark,
    )


def _not_none(result: Any) -> Any:
    if result is None:
        raise ReturnedNone("returned None")
    return result


def _results(returned: Any) -> list[Any]:
    if type(returned) in _PLAIN_RESULTS:  # what most functions return, without the checks
        return list(returned)
    if returned is None:
        return []
    if isinstance(returned, (str, bytes, tuple, dict)) or not isinstance(returned, Iterable):
        raise TypeError(
            "a window function must return or yield an iterable of results; "
            f"got {type(returned).__name__} (wrap a single result in a list, or use yield)"
        )
    return list(returned)


_PLAIN_RESULTS = (list, GeneratorType)


class WindowLogic:
    """The window function of an operator, with its state strategy.

    One subclass per strategy: :class:`ElementsLogic` keeps all elements,
    :class:`ReduceLogic` a reduced value, :class:`AggregateLogic` an accumulator.

    Parameters
    ----------
    window_function : ProcessWindowFunction, WindowFunction, ... or None
        Called with the elements (or the single incremental result); ``None`` emits the
        incremental result itself.
    """

    keeps_elements = False
    # The incremental functions, for the fast paths' folds (None where absent).
    reduce: Any = None
    aggregate: AggregateFunction | None = None
    # The user's function this logic was made from (a reduce or aggregate function, or
    # the window function over all elements), as given.
    function: Any = None
    _kind: Any = None  # the window function's type (see _window_function_kind)

    def __init__(self, window_function: Any = None):
        if window_function is not None and not isinstance(window_function, _WINDOW_FUNCTION_TYPES):
            raise WindowSpecError(
                "`window_function` must be a ProcessWindowFunction, ProcessAllWindowFunction, "
                f"WindowFunction or AllWindowFunction; got {window_function!r}"
            )
        self.window_function = window_function
        kind = self._window_function_kind()
        # Whether a window's removal calls the function's clear: a process function's
        # own, not the base class's no-op (skipped: nothing could observe the call).
        self.has_clear = kind in (ProcessWindowFunction, ProcessAllWindowFunction) and (
            getattr(type(window_function), "clear", None) is not kind.clear
            or "clear" in getattr(window_function, "__dict__", {})
        )

    def _window_function_kind(self) -> Any:
        """Which of the four window function types the window function is (in the
        order :meth:`evaluate` tests them), found once, not per firing; None without one
        (a logic unpickled from before it was kept finds it at its first firing)."""
        fn = self.window_function
        self._kind = next((kind for kind in _WINDOW_FUNCTION_TYPES if isinstance(fn, kind)), None)
        return self._kind

    def add(self, current: Any, value: Any) -> Any:
        """The contents after ``value`` arrived (``current`` is None for a new window)."""
        raise NotImplementedError

    def add_all(self, current: Any, values: Any) -> Any:
        """The contents after ``values`` (one or more) arrived, in order: the user's
        function sees the calls :meth:`add` makes for each (``current`` is None for a
        new window). The one fold every path adds with."""
        raise NotImplementedError

    def adders(self) -> tuple[Any, Any, Any]:
        """``(add, aggregate_add, create_accumulator)``: :meth:`add`, and the
        AggregateFunction's own ``add`` and ``create_accumulator`` (None without one),
        bound once, for the fast paths' hottest loops (the aligned run, the tumbling and
        the session element paths), which call the user's function directly: one Python
        call per element and window, :meth:`add`'s step inlined."""
        aggregate = self.aggregate
        if aggregate is None:
            return self.add, None, None
        return self.add, aggregate.add, aggregate.create_accumulator

    def merge(self, target: Any, source: Any) -> Any:
        """Fold ``source`` contents into ``target`` (either may be None)."""
        if target is None:
            return source
        if source is None:
            return target
        return self._merge(target, source)

    def _merge(self, target: Any, source: Any) -> Any:
        raise NotImplementedError

    def fold(self, values: list[Any]) -> list[Any]:
        """The incremental result over ``values`` as one-element input (evicting windows)."""
        raise NotImplementedError

    def inputs(self, contents: Any) -> list[Any]:
        """What the window function sees for stored ``contents`` (non-evicting windows)."""
        raise NotImplementedError

    def empty_inputs(self) -> list[Any]:
        """What the window function sees for an empty pane (a Dataflow trigger's): no
        element, no reduced value; an aggregate's result over no element."""
        return []

    def evaluate(self, key: Any, window: Any, ctx: Any, inputs: list[Any]) -> list[Any]:
        """Call the window function on ``inputs``; return its results (a result that
        is None, a null record Flink fails on, is a :class:`WindowResultError`)."""
        fn: Any = self.window_function  # its type is ``kind``, found once
        kind = self._kind
        if fn is None:
            return inputs
        if kind is None:
            kind = self._window_function_kind()
        if kind is ProcessWindowFunction:
            results = _results(fn.process(key, ctx, inputs))
        elif kind is ProcessAllWindowFunction:
            results = _results(fn.process(ctx, inputs))
        elif kind is WindowFunction:
            results = _results(fn.apply(key, window, inputs))
        else:
            results = _results(fn.apply(window, inputs))
        if any(result is None for result in results):
            raise WindowResultError(
                f"the window function {type(fn).__qualname__} yielded None (key={key!r}, "
                f"window={window!r}): each result must be a value for the `output_schema` "
                "(a Row, dict, tuple or list; Flink fails on a null record); a missing "
                "`return` in what builds it?",
                key,
                window,
            )
        return results

    def clear(self, ctx: Any) -> None:
        """Let a process function clean up its per-window state."""
        fn = self.window_function
        if isinstance(fn, (ProcessWindowFunction, ProcessAllWindowFunction)):
            fn.clear(ctx)


class ElementsLogic(WindowLogic):
    """A window that keeps all its elements for a window function."""

    keeps_elements = True

    def __init__(self, window_function: Any):
        if window_function is None:
            raise WindowSpecError("a window over all elements needs a `window_function`")
        super().__init__(window_function)
        self.function = window_function

    def add(self, current: Any, value: Any) -> Any:
        if current is None:
            return [value]
        current.append(value)
        return current

    def add_all(self, current: Any, values: Any) -> Any:
        if current is None:
            return list(values)
        current.extend(values)
        return current

    def _merge(self, target: Any, source: Any) -> Any:
        return target + source

    def fold(self, values: list[Any]) -> list[Any]:
        return values

    def inputs(self, contents: list[Any]) -> list[Any]:
        return contents


class ReduceLogic(WindowLogic):
    """A window that keeps the reduce of its elements."""

    def __init__(self, function: Any, window_function: Any = None):
        reduce = getattr(function, "reduce", function)
        if not (isinstance(function, ReduceFunction) or callable(reduce)):
            raise WindowSpecError(
                "`reduce_function` must be a ReduceFunction or a callable (a, b) -> value; "
                f"got {function!r}"
            )
        super().__init__(window_function)
        self.reduce = reduce
        self.function = function

    def add(self, current: Any, value: Any) -> Any:
        if current is None:
            return value
        result = self.reduce(current, value)
        if result is None:
            raise ReturnedNone("returned None")
        return result

    def add_all(self, current: Any, values: Any) -> Any:
        step = self.reduce
        for value in values:
            if current is None:
                current = value
            elif (current := step(current, value)) is None:
                raise ReturnedNone("returned None")
        return current

    def _merge(self, target: Any, source: Any) -> Any:
        return _not_none(self.reduce(target, source))

    def fold(self, values: list[Any]) -> list[Any]:
        return [self.add_all(None, values)]

    def inputs(self, contents: Any) -> list[Any]:
        return [contents]


class AggregateLogic(WindowLogic):
    """A window that keeps an :class:`AggregateFunction`'s accumulator."""

    aggregate: AggregateFunction

    def __init__(self, function: Any, window_function: Any = None):
        if not all(hasattr(function, m) for m in ("create_accumulator", "add", "get_result")):
            raise WindowSpecError(
                "`aggregate_function` must be an AggregateFunction (create_accumulator, add, "
                f"get_result, merge); got {function!r}"
            )
        super().__init__(window_function)
        self.aggregate = self.function = function

    def add(self, current: Any, value: Any) -> Any:
        aggregate = self.aggregate
        if current is None:
            current = aggregate.create_accumulator()
        return _not_none(aggregate.add(value, current))

    def add_all(self, current: Any, values: Any) -> Any:
        aggregate = self.aggregate
        add, acc = aggregate.add, aggregate.create_accumulator() if current is None else current
        for value in values:
            if (acc := add(value, acc)) is None:
                raise ReturnedNone("returned None")
        return acc

    def _merge(self, target: Any, source: Any) -> Any:
        return _not_none(self.aggregate.merge(target, source))

    def fold(self, values: list[Any]) -> list[Any]:
        return [self.aggregate.get_result(self.add_all(None, values))]

    def inputs(self, contents: Any) -> list[Any]:
        return [self.aggregate.get_result(contents)]

    def empty_inputs(self) -> list[Any]:
        if getattr(self.aggregate, "reduces", False):
            return []  # a reduce written as an aggregate (the shorthands): no value for nothing
        return [self.aggregate.get_result(self.aggregate.create_accumulator())]


def window_logic(function: Any, window_function: Any = None) -> WindowLogic:
    """Pick the state strategy for a user's ``function`` (and optional window function).

    A :class:`ReduceFunction` or plain callable reduces; an :class:`AggregateFunction`
    aggregates; a process/window function alone sees all elements.
    """
    refuse_class("function", function)
    refuse_class("window_function", window_function)
    if isinstance(function, _WINDOW_FUNCTION_TYPES):
        if window_function is not None:
            raise WindowSpecError(
                "`window_function` goes with a reduce or aggregate function; "
                f"got function={function!r}, window_function={window_function!r}"
            )
        return ElementsLogic(function)
    if isinstance(function, AggregateFunction):
        check_order_insensitive(function)
        return AggregateLogic(function, window_function)
    if isinstance(function, ReduceFunction) or callable(function):
        check_order_insensitive(function)
        return ReduceLogic(function, window_function)
    raise WindowSpecError(
        "`function` must be a ReduceFunction or callable, an AggregateFunction, or a "
        f"ProcessWindowFunction / WindowFunction; got {function!r}"
    )


def declared_order_insensitive(function: Any) -> bool:
    """Whether a reduce or aggregate function declares ``order_insensitive = True``
    (a wrapper declares what the function it wraps declares)."""
    return getattr(function, "order_insensitive", False) is True


def check_order_insensitive(function: Any) -> None:
    """Refuse, when the pipeline is defined, an ``order_insensitive`` declaration that
    is not a bool, or an aggregate function that declares it without ``merge``.

    Raises
    ------
    WindowSpecError
        Naming the function, the rule and the fix.
    """
    declared = getattr(function, "order_insensitive", False)
    name = getattr(function, "__name__", type(function).__name__)
    if not isinstance(declared, bool):
        raise WindowSpecError(
            f"`order_insensitive` of {name} must be True or False; got {declared!r}: set "
            "the class attribute order_insensitive = True only where the result does not "
            "depend on the order elements are added or combined in"
        )
    if declared and isinstance(function, AggregateFunction):
        if type(function).merge is AggregateFunction.merge:
            raise WindowSpecError(
                f"`aggregate_function` {name} declares order_insensitive = True but has no "
                "merge(): the partial accumulators of the parts of the input are merged "
                "with it; define merge(acc_a, acc_b), or drop the declaration"
            )


_FACTORIES = ("of", "create", "with_gap", "with_dynamic_gap")


def refuse_class(parameter: str, value: Any) -> None:
    """Refuse a class where an instance is needed (``CountSum`` for ``CountSum()``): Python
    would call it later as the function, with a confusing error, or not at all."""
    if not isinstance(value, type):
        return
    name = value.__name__
    factory = next((f for f in _FACTORIES if hasattr(value, f)), None)
    instance = f"{name}.{factory}(...)" if factory else f"{name}()"
    raise WindowSpecError(
        f"`{parameter}` must be an instance, not the class {name}: pass {instance}; got {value!r}"
    )
