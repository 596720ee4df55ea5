"""The Spark operators that call the key groups (:class:`.groups.WindowGroups`): thin
adapters, each a :class:`~.groups.GroupStore` of its operator's state and timers.

A window not in a chain, in the row state layout, runs in ``applyInPandasWithState``
(:class:`WindowGroupFunction`):
Spark hands each call its group's row with the rows and takes it back with the results,
and holds one timeout per group, set at every call to the group's earliest timer in the
domain Spark serves. A call makes no round trip to the JVM, Spark turns each Arrow batch
into pandas frames per group without visiting rows one by one, and the query is planned
without a Python process on the driver. Spark allows one ``applyInPandasWithState`` per
query, and its output carries no event-time column a later stateful operator could
follow, so the windows of a chain (:mod:`~tidemark.spark.streaming.driver.chain`) run
in ``transformWithStateInPandas`` (:class:`~.processor.WindowStatefulProcessor`, which
runs :class:`ProcessorCalls`): the group's row is a ValueState, its timers Spark timers
(one per time domain). So does every window of a query in the deltas state layout
(:mod:`.deltas`: a base and versioned deltas per group, in state variables of the same
handle). All run the same key groups, so the equivalence of the streaming guide
(``docs/streaming.md``) holds in each.

A timeout is due once Spark's clock passes it (``timeout < watermark``, or ``< batch
time``); a Spark timer once the clock reaches it (``timer <= watermark``), so a group's
timeout is its timer less 1 ms.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, Protocol

import pandas as pd
import pyspark
from pyspark.errors import PySparkRuntimeError
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle, TimerValues

from tidemark.errors import SessionSetupError
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.deltas import DeltaState, value_bytes_limit
from tidemark.spark.streaming.worker.groups import WindowGroups
from tidemark.spark.streaming.worker.packing import unpacked_frames
from tidemark.spark.streaming.worker.pyspark40 import patch as patch_pyspark40
from tidemark.spark.streaming.worker.state import StoredGroup
from tidemark.spark.streaming.worker.time_advance import BatchClock, Timers
from tidemark.spark.streaming.worker.variables import DELTAS

__all__ = ["ProcessorCalls", "WindowGroupFunction", "row_too_large"]

patch_pyspark40()  # before Spark reads a batch for the function (see its module)


class ProcessorCalls:
    """What :class:`~.processor.WindowStatefulProcessor` runs once its first call loaded
    it: the key groups, the group's state in the variables its ``init`` registered
    (:mod:`.variables`), its timers the handle's Spark timers."""

    def __init__(self, config: ProcessorConfig, handle: StatefulProcessorHandle, variables: Any):
        self._handle, self._groups = handle, WindowGroups(config)
        self._unpacking = config.unpacking
        if config.state_layout.name == DELTAS:
            self._state: _GroupState = DeltaState(
                variables, config.max_parallelism, config.state_layout
            )
        else:
            self._state = _OneRow(variables, config.max_parallelism)

    def rows(self, rows: Iterator[pd.DataFrame], timers: TimerValues) -> Iterator[pd.DataFrame]:
        """A call with the group's rows."""
        frames = rows if self._unpacking is None else unpacked_frames(rows, self._unpacking)
        return self._groups.call(self._store(timers, None), frames)

    def expired(self, timers: TimerValues, expired: int | None) -> Iterator[pd.DataFrame]:
        """A call for the group's Spark timer ``expired``."""
        return self._groups.call(self._store(timers, expired), [])

    def _store(self, timers: TimerValues, expired: int | None) -> _HandleStore:
        holds_event_timers = self._groups.holds_event_timers
        return _HandleStore(self._handle, self._state, timers, expired, holds_event_timers)


class _GroupState(Protocol):
    """A group's state in a ``StatefulProcessorHandle``'s state variables, in one layout."""

    def read(self) -> StoredGroup: ...

    def write(self, group: StoredGroup) -> None: ...

    def clear(self, group: StoredGroup) -> None: ...


class _OneRow:
    """The row layout: a group's row in one ValueState, read and written whole."""

    def __init__(self, state: Any, max_parallelism: int):
        self._state, self._max_parallelism = state, max_parallelism

    def read(self) -> StoredGroup:
        return StoredGroup.decode(self._state.get(), self._max_parallelism)

    def write(self, group: StoredGroup) -> None:
        row = group.encode(self._max_parallelism)
        try:
            self._state.update(row)
        except PySparkRuntimeError as exc:
            limit = value_bytes_limit()
            if limit is None or len(row[1]) <= limit:
                raise
            raise row_too_large(len(row[1])) from exc

    def clear(self, group: StoredGroup) -> None:
        if group.exists:
            self._state.clear()


def row_too_large(size: int, version: str = pyspark.__version__) -> SessionSetupError:
    """The error for a group's row that PySpark 4.0's state server failed to take
    (:func:`~.deltas.value_bytes_limit`): a row is one value, which the row layout cannot
    split."""
    return SessionSetupError(
        f"PySpark {version}'s state server failed to read a key group's state row of "
        f"{size:,} bytes whole (SPARK-53870: Spark 4.0 may read a large state value in "
        "part; fixed in 4.1.0). Nothing of the failed micro-batch was committed: restart "
        "the query on PySpark 4.1 or later, or start it on a new checkpoint in the deltas "
        "state layout (spark.tidemark.streaming.stateLayout=deltas), which writes no value "
        "that large on 4.0"
    )


class _HandleStore:
    """A group's state in a handle's state variables (``state``, in either layout), its
    timers Spark timers (``handle``'s): a timer is due once the clock reaches it
    (``timer <= watermark``). ``expired``: the timer this call is for;
    ``holds_event_timers``: whether Spark holds the group's event-time timer (else the
    state only notes it, see :mod:`.time_advance`)."""

    def __init__(
        self,
        handle: StatefulProcessorHandle,
        state: _GroupState,
        timers: TimerValues,
        expired: int | None,
        holds_event_timers: bool,
    ):
        self._handle, self._state, self._timers = handle, state, timers
        self._expired, self._holds_event_timers = expired, holds_event_timers
        self.now = timers.getCurrentProcessingTimeInMs()

    def watermark(self) -> int:
        return self._timers.getCurrentWatermarkInMs()

    def read(self) -> StoredGroup:
        return self._state.read()

    def save(self, group: StoredGroup, timers: Timers, clock: BatchClock) -> None:
        """Write the group's state once and move its Spark timers to ``timers``."""
        expired = self._expired
        event_timer, processing_timer = timers
        registered_event, registered_processing = group.event_timer, group.processing_timer
        if not self._holds_event_timers:
            registered_event = None  # the state's note of the earliest, not a Spark timer
        if expired is not None:
            # Spark deletes the expired timer after this call: re-registering the same
            # time would be lost, so a timer still due waits for the next batch (+1 ms).
            if registered_event == expired:
                registered_event = None
                event_timer = expired + 1 if event_timer == expired else event_timer
            if registered_processing == expired:
                registered_processing = None
                processing_timer = expired + 1 if processing_timer == expired else processing_timer
        if self._holds_event_timers:
            self._move_timer(registered_event, event_timer)
        self._move_timer(registered_processing, processing_timer)
        if not group.keys:
            self._state.clear(group)
            return
        group.event_timer, group.processing_timer = event_timer, processing_timer
        self._state.write(group)

    def _move_timer(self, registered: int | None, wanted: int | None) -> None:
        if registered == wanted:
            return
        if registered is not None:
            self._handle.deleteTimer(registered)  # harmless when it already fired
        if wanted is not None:
            self._handle.registerTimer(wanted)


class WindowGroupFunction:
    """The key groups in ``applyInPandasWithState``: the function Spark calls with a
    group's rows and its ``GroupState`` (the group's row and its one timeout)."""

    def __init__(self, config: ProcessorConfig):
        self._config = config
        self._timeout = config.spark_time_mode().timeout

    @functools.cached_property
    def _groups(self) -> WindowGroups:
        return WindowGroups(self._config)  # in the worker, at its first call

    def timeout(self) -> str:
        """The ``GroupStateTimeout`` of the query."""
        return self._timeout

    def __call__(
        self, key: Any, rows: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        # a timed-out group comes with an empty frame
        frames = [] if state.hasTimedOut else rows
        store = _GroupStateStore(state, self._timeout, self._config.max_parallelism)
        return self._groups.call(store, frames)


class _GroupStateStore:
    """A group's row in a ``GroupState`` with one timeout (of kind ``timeout``), which
    Spark unsets at every call: a timeout is due once Spark's clock passes it
    (``timeout < watermark``, or ``< batch time``), so it is the group's timer less 1 ms."""

    def __init__(self, state: Any, timeout: str, max_parallelism: int):
        self._state, self._timeout, self._max_parallelism = state, timeout, max_parallelism
        self.now = state.getCurrentProcessingTimeMs()

    def watermark(self) -> int:
        return self._state.getCurrentWatermarkMs()

    def read(self) -> StoredGroup:
        row = self._state.get if self._state.exists else None
        return StoredGroup.decode(row, self._max_parallelism)

    def save(self, group: StoredGroup, timers: Timers, clock: BatchClock) -> None:
        """Write the group's row and set its timeout: the timer less 1 ms, at least the
        current watermark, at least 1 ms ahead in processing time."""
        state, timeout = self._state, self._timeout
        event_timer, processing_timer = timers
        if not group.keys:
            if state.exists:
                state.remove()
            return
        group.event_timer, group.processing_timer = event_timer, processing_timer
        state.update(group.encode(self._max_parallelism))
        if timeout == "EventTimeTimeout" and event_timer is not None:
            state.setTimeoutTimestamp(max(event_timer - 1, clock.spark_watermark_ms))
        elif timeout == "ProcessingTimeTimeout" and processing_timer is not None:
            state.setTimeoutDuration(max(processing_timer - 1 - clock.now, 1))
