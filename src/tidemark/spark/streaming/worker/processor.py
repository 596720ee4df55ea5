"""The key groups in ``transformWithStateInPandas`` (a window of a chain, or any window
in the deltas layout): the ``StatefulProcessor`` Spark pickles, with the calls it runs
loaded at its first call.

Spark unpickles the processor in every task, and once more at a query's first
micro-batch (a start or a restart) in a new Python process on the driver, which only
runs :meth:`~WindowStatefulProcessor.init` to learn the state variables it registers
(PySpark's ``transform_with_state_driver_worker.py``). That process imports what the
pickle names, so the processor pickles its :class:`~.config.ProcessorConfig` (the
pipeline, the user's functions) as bytes, and this module and :mod:`.variables` import
neither pandas, pyarrow nor the engine: the planner loads these two and PySpark's own
modules (what that saves each start: ``benchmarks/README.md``, "A query's first
micro-batch"). A call loads the rest (:class:`~.bindings.ProcessorCalls`) once per
processor.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from tidemark.spark.streaming.worker.variables import register

if TYPE_CHECKING:
    import pandas as pd

    from tidemark.spark.streaming.worker.bindings import ProcessorCalls
    from tidemark.spark.streaming.worker.config import ProcessorConfig

__all__ = ["WindowStatefulProcessor"]


class WindowStatefulProcessor(StatefulProcessor):
    """The key groups in ``transformWithStateInPandas``: the group's state in the
    layout's state variables (:mod:`.variables`), its timers Spark timers (one per time
    domain)."""

    def __init__(self, config: ProcessorConfig):
        self._config: ProcessorConfig | None = config
        self._pickled: bytes | None = None
        self._layout, self._max_parallelism = config.state_layout, config.max_parallelism

    def __getstate__(self) -> dict[str, Any]:
        pickled = self._pickled if self._config is None else cloudpickle.dumps(self._config)
        return {"layout": self._layout, "max_parallelism": self._max_parallelism, "config": pickled}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._config, self._pickled = None, state["config"]
        self._layout, self._max_parallelism = state["layout"], state["max_parallelism"]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._variables = register(handle, self._layout)
        self._calls: ProcessorCalls | None = None

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        return self._loaded().rows(rows, timerValues)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        expired = expiredTimerInfo.getExpiryTimeInMs() if expiredTimerInfo else None
        return self._loaded().expired(timerValues, expired)

    def close(self) -> None:
        pass

    def _loaded(self) -> ProcessorCalls:
        """The calls, loaded at the first (see the module's docstring)."""
        if self._calls is None:
            from tidemark.spark.streaming.worker.bindings import ProcessorCalls

            if self._config is None:
                self._config = pickle.loads(self._pickled)  # type: ignore[arg-type]
            self._calls = ProcessorCalls(self._config, self._handle, self._variables)
        return self._calls
