"""Keyed state that triggers and window functions keep, named as in PyFlink.

A trigger asks its context for ``get_partitioned_state(descriptor)``: state scoped to
the current key and window. A :class:`~tidemark.functions.ProcessWindowFunction` gets
``context.window_state()`` (per key and window) and ``context.global_state()`` (per key).
State values live in plain dicts owned by the engine, so a key's whole state can be
snapshotted (for Spark's state store) with ``pickle``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

__all__ = [
    "State",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    "ValueState",
    "ListState",
    "MapState",
    "ReducingState",
    "AggregatingState",
    "KeyedStateStore",
]


S = TypeVar("S", bound="State")


class StateDescriptor(Generic[S]):
    """Names a piece of state and says what kind it is (``S``: the handle it creates)."""

    def __init__(self, name: str, type_info: Any = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"`name` must be a non-empty str; got {name!r}")
        self.name = name
        self.type_info = type_info

    def create(self, store: dict[str, Any]) -> S:
        """The handle of this state over ``store`` (the engine's dict of one scope)."""
        raise NotImplementedError

    def merge_values(self, target: Any, source: Any) -> Any:
        """Combine two stored values when windows merge (Flink's ``mergeNamespaces``)."""
        raise TypeError(f"state {self.name!r} ({type(self).__name__}) cannot be merged")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class State:
    """Base of all state handles; ``clear()`` removes the value."""

    __slots__ = ("_store", "_name")

    def __init__(self, store: dict[str, Any], name: str):
        self._store = store
        self._name = name

    def clear(self) -> None:
        self._store.pop(self._name, None)


class ValueState(State):
    """One value; ``value()`` is ``None`` until ``update``."""

    def value(self) -> Any:
        return self._store.get(self._name)

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._store[self._name] = value


class ListState(State):
    """An appendable list."""

    def get(self) -> list[Any]:
        return list(self._store.get(self._name, ()))

    def add(self, value: Any) -> None:
        self._store.setdefault(self._name, []).append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        self._store.setdefault(self._name, []).extend(values)

    def update(self, values: Iterable[Any]) -> None:
        items = list(values)
        if items:
            self._store[self._name] = items
        else:
            self.clear()


class MapState(State):
    """A dict of user keys to values."""

    def _map(self) -> dict[Any, Any]:
        return self._store.setdefault(self._name, {})

    def get(self, key: Any) -> Any:
        return self._store.get(self._name, {}).get(key)

    def put(self, key: Any, value: Any) -> None:
        self._map()[key] = value

    def put_all(self, items: dict[Any, Any]) -> None:
        self._map().update(items)

    def remove(self, key: Any) -> None:
        self._store.get(self._name, {}).pop(key, None)

    def contains(self, key: Any) -> bool:
        return key in self._store.get(self._name, {})

    def keys(self) -> Iterator[Any]:
        return iter(list(self._store.get(self._name, {})))

    def values(self) -> Iterator[Any]:
        return iter(list(self._store.get(self._name, {}).values()))

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._store.get(self._name, {}).items()))

    def is_empty(self) -> bool:
        return not self._store.get(self._name)


class ReducingState(State):
    """A value folded with a reduce function as values are added."""

    __slots__ = ("_reduce",)

    def __init__(self, store: dict[str, Any], name: str, reduce: Callable[[Any, Any], Any]):
        super().__init__(store, name)
        self._reduce = reduce

    def get(self) -> Any:
        return self._store.get(self._name)

    def add(self, value: Any) -> None:
        current = self._store.get(self._name)
        self._store[self._name] = value if current is None else self._reduce(current, value)


class AggregatingState(State):
    """An accumulator fed through an :class:`~tidemark.functions.AggregateFunction`."""

    __slots__ = ("_function",)

    def __init__(self, store: dict[str, Any], name: str, function: Any):
        super().__init__(store, name)
        self._function = function

    def get(self) -> Any:
        if self._name not in self._store:
            return None
        return self._function.get_result(self._store[self._name])

    def add(self, value: Any) -> None:
        accumulator = self._store.get(self._name)
        if accumulator is None:
            accumulator = self._function.create_accumulator()
        self._store[self._name] = self._function.add(value, accumulator)


class ValueStateDescriptor(StateDescriptor[ValueState]):
    def create(self, store: dict[str, Any]) -> ValueState:
        return ValueState(store, self.name)


class ListStateDescriptor(StateDescriptor[ListState]):
    def create(self, store: dict[str, Any]) -> ListState:
        return ListState(store, self.name)

    def merge_values(self, target: Any, source: Any) -> Any:
        return list(target) + list(source)


class MapStateDescriptor(StateDescriptor[MapState]):
    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None):
        super().__init__(name, (key_type_info, value_type_info))

    def create(self, store: dict[str, Any]) -> MapState:
        return MapState(store, self.name)


class ReducingStateDescriptor(StateDescriptor[ReducingState]):
    """Reducing state; ``reduce_function`` is a callable or has ``reduce(a, b)``."""

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None):
        super().__init__(name, type_info)
        self.reduce_function = getattr(reduce_function, "reduce", reduce_function)
        if not callable(self.reduce_function):
            raise ValueError(
                f"`reduce_function` must be callable or have reduce(a, b); got {reduce_function!r}"
            )

    def create(self, store: dict[str, Any]) -> ReducingState:
        return ReducingState(store, self.name, self.reduce_function)

    def merge_values(self, target: Any, source: Any) -> Any:
        return self.reduce_function(target, source)


class AggregatingStateDescriptor(StateDescriptor[AggregatingState]):
    def __init__(self, name: str, agg_function: Any, type_info: Any = None):
        super().__init__(name, type_info)
        self.agg_function = agg_function

    def create(self, store: dict[str, Any]) -> AggregatingState:
        return AggregatingState(store, self.name, self.agg_function)

    def merge_values(self, target: Any, source: Any) -> Any:
        return self.agg_function.merge(target, source)


class KeyedStateStore:
    """State of one scope (a key and window, or a key), handed to user functions.

    >>> store = KeyedStateStore({})
    >>> seen = store.get_state(ValueStateDescriptor("seen"))
    >>> seen.update(3); seen.value()
    3
    """

    __slots__ = ("_store",)

    def __init__(self, store: dict[str, Any]):
        self._store = store

    def get_state(self, descriptor: ValueStateDescriptor) -> ValueState:
        return descriptor.create(self._store)

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        return descriptor.create(self._store)

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        return descriptor.create(self._store)

    def get_reducing_state(self, descriptor: ReducingStateDescriptor) -> ReducingState:
        return descriptor.create(self._store)

    def get_aggregating_state(self, descriptor: AggregatingStateDescriptor) -> AggregatingState:
        return descriptor.create(self._store)
