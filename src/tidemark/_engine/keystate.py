"""Everything the window operator keeps for one key.

One object per key, made only of dicts, sets and user values, so that a key's state
pickles as a unit (Spark keeps it in its state store, per grouping key). The usual
state of a time window (contents and timers only) also has a form made of built-in
values alone (:meth:`KeyState.packed`), which pickles without a class to look up or a
reduction to call: several times faster to store and restore (benchmarks/README.md).
"""

from __future__ import annotations

import copyreg
from typing import Any

from tidemark.windows import TimeWindow, Window

__all__ = ["KeyState"]


class KeyState:
    """A key's window contents, trigger state, merging set, function state and timers.

    Attributes
    ----------
    contents : dict
        State window -> contents (a list of values or ``(value, timestamp)`` pairs, or an
        incremental accumulator). The sliced operator keeps sliding windows' slices here
        too: slice start (int ms) -> runs (``tidemark._engine.slices``).
    trigger_state : dict
        Window -> {state name: value} for the trigger's partitioned state.
    merging : dict
        Window -> state window, for merging assigners (empty otherwise).
    window_state, global_state : dict
        Per-window and per-key state of the process window function.
    event_timers, processing_timers : dict
        ``(time, window)`` of each timer registered for this key -> its registration
        sequence number (which orders timers of equal time).
    """

    __slots__ = (
        "contents",
        "trigger_state",
        "merging",
        "window_state",
        "global_state",
        "event_timers",
        "processing_timers",
    )

    def __init__(self) -> None:
        self.contents: dict[Window, Any] = {}
        self.trigger_state: dict[Window, dict[str, Any]] = {}
        self.merging: dict[Window, Window] = {}
        self.window_state: dict[Window, dict[str, Any]] = {}
        self.global_state: dict[str, Any] = {}
        self.event_timers: dict[tuple[int, Window], int] = {}
        self.processing_timers: dict[tuple[int, Window], int] = {}

    def is_empty(self) -> bool:
        """True when nothing of this key is left but (possibly) its global state."""
        return not (
            self.contents
            or any(self.trigger_state.values())
            or self.merging
            or any(self.window_state.values())
            or self.event_timers
            or self.processing_timers
            or self.global_state
        )

    def num_state_entries(self) -> int:
        """State entries as Flink's harness counts them (one per state and namespace)."""
        return (
            len(self.contents)
            + sum(len(states) for states in self.trigger_state.values())
            + (1 if self.merging else 0)
            + sum(len(states) for states in self.window_state.values())
            + len(self.global_state)
        )

    def packed(self) -> tuple[list[Any], list[Any], list[Any]] | None:
        """Contents and timers of time windows as built-in values: ``[start, end, value,
        ...]`` for the contents, ``[time, start, end, sequence, ...]`` per time domain for
        the timers. None for any other state (trigger, merging or function state, a
        slice, another kind of window): pickle the KeyState itself then.

        >>> ks = KeyState()
        >>> ks.contents[TimeWindow(0, 10)] = (1, 5)
        >>> ks.event_timers[(9, TimeWindow(0, 10))] = 0
        >>> ks.packed()
        ([0, 10, (1, 5)], [9, 0, 10, 0], [])
        >>> back = KeyState.from_packed(ks.packed())
        >>> back.contents, back.event_timers, back.processing_timers
        ({TimeWindow[0, 10): (1, 5)}, {(9, TimeWindow[0, 10)): 0}, {})
        """
        if self.trigger_state or self.merging or self.window_state or self.global_state:
            return None
        contents: list[Any] = []
        for window, value in self.contents.items():
            if type(window) is not TimeWindow:
                return None
            contents += (window[0], window[1], value)
        event, processing = (
            _packed_timers(self.event_timers),
            _packed_timers(self.processing_timers),
        )
        if event is None or processing is None:
            return None
        return contents, event, processing

    @classmethod
    def from_packed(cls, packed: tuple[list[Any], list[Any], list[Any]]) -> KeyState:
        """The KeyState :meth:`packed` gave."""
        contents, event, processing = packed
        ks = cls.__new__(cls)
        if len(contents) == 3:  # one window: no loop
            ks.contents = {_new_tuple(TimeWindow, (contents[0], contents[1])): contents[2]}
        else:
            ks.contents = {
                _new_tuple(TimeWindow, (contents[i], contents[i + 1])): contents[i + 2]
                for i in range(0, len(contents), 3)
            }
        ks.trigger_state, ks.merging, ks.window_state, ks.global_state = {}, {}, {}, {}
        ks.event_timers = _timers_from(event)
        ks.processing_timers = _timers_from(processing)
        return ks

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # What pickle makes of __getstate__ (``copyreg.__newobj__`` is written as NEWOBJ,
        # the state applied by __setstate__), byte for byte, without the generic
        # reduction's lookups: streaming state pickles every key a call touches.
        return copyreg.__newobj__, (KeyState,), self.__getstate__()  # type: ignore[attr-defined]

    def __getstate__(self) -> tuple[Any, ...]:
        return (
            self.contents,
            self.trigger_state,
            self.merging,
            self.window_state,
            self.global_state,
            self.event_timers,
            self.processing_timers,
        )

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        (
            self.contents,
            self.trigger_state,
            self.merging,
            self.window_state,
            self.global_state,
            self.event_timers,
            self.processing_timers,
        ) = state


_new_tuple = tuple.__new__


def _packed_timers(timers: dict[tuple[int, Window], int]) -> list[Any] | None:
    flat: list[Any] = []
    for (time, window), sequence in timers.items():
        if type(window) is not TimeWindow:
            return None
        flat += (time, window[0], window[1], sequence)
    return flat


def _timers_from(flat: list[Any]) -> dict[tuple[int, Window], int]:
    if not flat:
        return {}
    if len(flat) == 4:  # one timer: no loop
        return {(flat[0], _new_tuple(TimeWindow, (flat[1], flat[2]))): flat[3]}
    return {
        (flat[i], _new_tuple(TimeWindow, (flat[i + 1], flat[i + 2]))): flat[i + 3]
        for i in range(0, len(flat), 4)
    }
