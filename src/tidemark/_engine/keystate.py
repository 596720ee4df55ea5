"""Everything the window operator keeps for one key.

One object per key, made only of dicts, sets and user values, so that a key's state
pickles as a unit (Spark keeps it in its state store, per grouping key).
"""

from __future__ import annotations

from typing import Any

from tidemark.windows import Window

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

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)
