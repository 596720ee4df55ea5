"""Stand-ins for what Spark hands a key-group call, to drive the bindings by hand.

``Handle``/``TimerValues`` are what ``transformWithStateInPandas`` gives
``WindowStatefulProcessor``; ``GroupState`` what ``applyInPandasWithState`` gives
``WindowGroupFunction``. They keep the group's row and timers where a test can read them.
"""

from __future__ import annotations

from typing import Any

from tidemark.spark.streaming.worker.clock import spark_watermark


class ValueState:
    def __init__(self) -> None:
        self.row: Any = None

    def get(self) -> Any:
        return self.row

    def update(self, row: Any) -> None:
        self.row = row

    def clear(self) -> None:
        self.row = None


class Handle:
    """One key group's state and Spark timers, as ``StatefulProcessorHandle`` keeps them."""

    def __init__(self) -> None:
        self.state = ValueState()
        self.timers: set[int] = set()

    def getValueState(self, name: str, schema: Any) -> ValueState:  # noqa: N802
        self.schema = schema
        return self.state

    def registerTimer(self, expiry: int) -> None:  # noqa: N802
        self.timers.add(expiry)

    def deleteTimer(self, expiry: int) -> None:  # noqa: N802
        self.timers.discard(expiry)


class TimerValues:
    """Spark's watermark (on Spark's clock) and the batch's processing time."""

    def __init__(self, watermark_ms: int, now_ms: int = 0) -> None:
        self.watermark_ms, self.now_ms = watermark_ms, now_ms

    @classmethod
    def at(cls, watermark: int | None, now_ms: int = 0) -> TimerValues:
        """Spark's watermark for the engine watermark ``watermark`` (None: Spark's 0)."""
        return cls(0 if watermark is None else spark_watermark(watermark), now_ms)

    def getCurrentWatermarkInMs(self) -> int:  # noqa: N802
        return self.watermark_ms

    def getCurrentProcessingTimeInMs(self) -> int:  # noqa: N802
        return self.now_ms


class GroupState:
    """PySpark's GroupState as ``applyInPandasWithState`` hands it to one call."""

    def __init__(self, row: Any, watermark: int, timed_out: bool, now_ms: int = 0) -> None:
        self.row, self.watermark, self.hasTimedOut, self.now_ms = row, watermark, timed_out, now_ms
        self.timeout: int | None = None  # Spark unsets it at every call

    @property
    def exists(self) -> bool:
        return self.row is not None

    @property
    def get(self) -> Any:
        return self.row

    def update(self, row: Any) -> None:
        self.row = row

    def remove(self) -> None:
        self.row = None

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802
        return self.watermark

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802
        return self.now_ms

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802
        assert ms >= self.watermark, "Spark refuses a timeout behind its watermark"
        self.timeout = ms

    def setTimeoutDuration(self, ms: int) -> None:  # noqa: N802
        assert ms > 0, "Spark refuses a timeout duration that is not positive"
        self.timeout = self.now_ms + ms


class MapState:
    """A ``MapState``: user key tuple -> value tuple; counts its iterations (cold reads)."""

    def __init__(self) -> None:
        self.rows: dict[tuple, tuple] = {}
        self.iterations = 0

    def getValue(self, key: tuple) -> Any:  # noqa: N802
        return self.rows.get(tuple(key))

    def updateValue(self, key: tuple, value: tuple) -> None:  # noqa: N802
        self.rows[tuple(key)] = tuple(value)

    def iterator(self) -> Any:
        self.iterations += 1
        return iter(list(self.rows.items()))

    def removeKey(self, key: tuple) -> None:  # noqa: N802
        self.rows.pop(tuple(key), None)

    def clear(self) -> None:
        self.rows.clear()


class StateHandle(Handle):
    """A handle with a state variable per name (the deltas layout's), whose contents a
    test can copy and put back, as Spark's state store rolls back a failed batch."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, ValueState] = {}
        self.maps: dict[str, MapState] = {}

    def getValueState(self, name: str, schema: Any) -> ValueState:  # noqa: N802
        return self.values.setdefault(name, ValueState())

    def getMapState(self, name: str, key_schema: Any, value_schema: Any) -> MapState:  # noqa: N802
        return self.maps.setdefault(name, MapState())

    def snapshot(self) -> tuple[dict[str, Any], dict[str, dict]]:
        return (
            {name: state.row for name, state in self.values.items()},
            {name: dict(state.rows) for name, state in self.maps.items()},
        )

    def restore(self, snapshot: tuple[dict[str, Any], dict[str, dict]]) -> None:
        rows, maps = snapshot
        for name, row in rows.items():
            self.values[name].row = row
        for name, contents in maps.items():
            self.maps[name].rows = dict(contents)
