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
