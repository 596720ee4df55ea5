"""The window operator per key group, whichever Spark operator calls it (:mod:`.bindings`).

Spark groups the rows by key group (see :mod:`.state`) and calls once per key group and
micro-batch: for a group with input rows, or for a group whose Spark timer (timeout)
expired. Each call

1. reads the group's state (handed over with the rows, or read from the state store) and splits
   the batch's rows by key, each key's rows in Spark's order;
2. picks the keys to visit: those with rows, and those whose own Spark timer (the one a
   query with a Spark key per engine key would have registered) is due;
3. for each visited key works out the clocks it moves to, exactly as a processor called
   for that key alone would: ``process_watermark(W)`` when Spark's watermark maps to an
   engine watermark ``W`` later than the key's (event time), then
   ``advance_processing_time(T)`` with the batch's processing time ``T`` (processing
   time);
4. runs one window operator per distinct pair of clocks (nearly always one per call):
   restores the keys whose watermark advances and advances it, restores the keys whose
   processing time advances and advances that (due timers fire, in the engine's order),
   restores the other keys, feeds each key's rows, and takes the keys' state back;
5. emits results, side outputs and the late-record count as rows of the combined schema,
   and, where the query is watched, one row of the call's figures (:mod:`.metrics`);
6. writes the group's state back once (or clears it when no key is left) and moves the
   group's one Spark timer per time domain (its one timeout) to its keys' earliest.

Keys the call does not visit keep their stored bytes untouched; the keys it visited are
noted in ``StoredGroup.changed``, which the deltas layout writes (:mod:`.deltas`) and the
row layout ignores: how the group is stored is the :class:`GroupStore`'s business.

What varies between queries is chosen once, when a worker first calls, from the frozen
:class:`~.config.ProcessorConfig`, so the per-call path has no
branch on it: where the rows come from (:mod:`.inputs`: the source, or an earlier
window in a chain, whose early results step 4 feeds before advancing), how time advances
(:mod:`.time_advance`: Spark-held timers, the watermark polled in a ProcessingTime query,
the idle clock), and whether output rows carry a chain's phase (:mod:`.output_rows`). The
Spark operators that call it are thin adapters (:mod:`.bindings`) over one
:class:`GroupStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import pandas as pd

from tidemark._engine.contract import OperatorHandle
from tidemark._engine.keystate import KeyState
from tidemark.errors import WindowSpecError
from tidemark.spark.runtime.worker_gc import fewer_gc_passes, freeze_survivors
from tidemark.spark.streaming.worker.clock import engine_watermark
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.inputs import KeyRun, row_reader
from tidemark.spark.streaming.worker.metrics import CallFigures, figures_for
from tidemark.spark.streaming.worker.output_rows import outputs_for
from tidemark.spark.streaming.worker.state import NEW_KEY, StoredGroup, StoredKey, dump_key_state
from tidemark.spark.streaming.worker.time_advance import (
    BatchClock,
    Timers,
    Visit,
    time_advance_for,
)

__all__ = ["GroupStore", "WindowGroups", "object_frame"]


class GroupStore(Protocol):
    """A key group's row and Spark timers, as one Spark operator keeps them: what a
    binding (:mod:`.bindings`) gives :meth:`WindowGroups.call`."""

    now: int
    """The batch's processing time (ms)."""

    def watermark(self) -> int:
        """Spark's current watermark (ms; read only where the query has one)."""
        ...

    def read(self) -> StoredGroup:
        """The group's keys and timers, decoded from its state (an empty group when it
        has none)."""
        ...

    def save(self, group: StoredGroup, timers: Timers, clock: BatchClock) -> None:
        """Write the group's state (or clear it when no key is left) and set its Spark
        timers to ``timers`` (event-time, processing-time; on Spark's clocks). A row
        is written whole; the deltas layout writes the keys in ``group.changed``."""
        ...


class WindowGroups:
    """The window operator per key group, whatever Spark operator calls it: split a
    call's rows by key, visit the keys, and work out the group's row and Spark timers
    (module docstring, steps 1-6). Built in the worker, at its first call."""

    def __init__(self, config: ProcessorConfig):
        # A call builds and drops many small objects (Rows, key states) and no cycles.
        fewer_gc_passes()
        self._config = config
        self._reader = row_reader(config)
        self._advance = time_advance_for(config)
        self._outputs = outputs_for(config)
        self._figures = figures_for(config)

    @property
    def holds_event_timers(self) -> bool:
        """Whether Spark holds the groups' event-time timers (see :mod:`.time_advance`)."""
        return self._advance.holds_event_timers

    def call(self, store: GroupStore, frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        """One call of Spark's for one key group: its rows (``frames``, empty for a
        timer) through the group's keys; returns the output rows."""
        output = self._call(store, frames)
        freeze_survivors()  # what the call kept (the deltas layout's cached keys)
        return output

    def _call(self, store: GroupStore, frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        clock = self._advance.clock(store.now, store.watermark)
        runs, passed, forwarded = self._reader.split_frames(frames, clock.spark_watermark_ms)
        group = store.read()
        figures = self._figures(clock.watermark)
        figures.fed(runs.values())
        records = self._run(group, runs, clock, passed, forwarded, figures)
        timers = self._outputs.group_timers(self._advance.group_timers(group, clock), group, clock)
        store.save(group, timers, clock)
        stats = figures.record()
        if stats is not None:
            records.append(stats)
        return self._frames(records)

    def _run(
        self,
        group: StoredGroup,
        runs: dict[Any, KeyRun],
        clock: BatchClock,
        passed: list[tuple[Any, ...]],
        forwarded: dict[Any, int],
        figures: CallFigures,
    ) -> list[tuple[Any, ...]]:
        """Visit the keys (steps 2-5); ``group`` then holds the keys' new state."""
        cohorts: dict[tuple[int, int, int | None], list[Visit]] = {}
        for key in self._keys_to_visit(group, runs, clock):
            visit = self._advance.visit(key, group.keys.get(key, NEW_KEY), clock)
            cohort = _cohort(visit, runs.get(key), forwarded.get(key))
            cohorts.setdefault(cohort, []).append(visit)
        # What this window forwarded last (the watermark of its previous call)
        offset = self._config.spark_offset_ms
        follows = None if group.watermark is None else engine_watermark(group.watermark, offset)
        records = passed
        for (_, _, early), visits in cohorts.items():
            self._run_cohort(visits, runs, group, clock, records, early, follows, figures)
        group.watermark = clock.spark_watermark_ms
        return records

    def _frames(self, records: list[tuple[Any, ...]]) -> Iterator[pd.DataFrame]:
        if not records:
            return iter([])
        names = self._config.output_columns()
        lossless = self._config.pandas_output
        if lossless:  # NaN flags, nested values pickled: pandas would lose them
            records = [lossless.record(record) for record in records]
            names += lossless.names()
        return iter([object_frame(names, records)])

    def _keys_to_visit(
        self, group: StoredGroup, runs: dict[Any, Any], clock: BatchClock
    ) -> list[Any]:
        """Keys with rows, then keys whose own Spark timer is due (as Spark would fire it)."""
        due_event = group.event_timer is not None and group.event_timer <= clock.spark_watermark_ms
        due_processing = group.processing_timer is not None and group.processing_timer <= clock.now
        keys = list(runs)
        if not (due_event or due_processing):
            return keys
        watermark_ms, now = clock.spark_watermark_ms, clock.now
        for key, stored in group.keys.items():
            if key in runs:
                continue
            event, processing = stored.event_timer, stored.processing_timer
            if (event is not None and event <= watermark_ms) or (
                processing is not None and processing <= now
            ):
                keys.append(key)
        return keys

    def _run_cohort(
        self,
        visits: list[Visit],
        runs: dict[Any, KeyRun],
        group: StoredGroup,
        clock: BatchClock,
        records: list[tuple[Any, ...]],
        early: int | None,
        follows: int | None,
        figures: CallFigures,
    ) -> None:
        """One operator for keys that share their clocks: advance, feed, take state back.

        The watermark moves first (the one Spark moved to after the previous batch), then
        processing time (the batch's): each key sees the order the engine fed those
        clocks in that order would give it; a key joins the operator just before the
        first clock it advances, so a clock it does not advance fires none of its timers.
        A chain's early rows go in just before the watermark moves, under ``early``, the
        watermark the earlier window forwarded before them (a chain); this window's
        results fired on the watermark follow ``follows``, the one it forwarded last.
        """
        first = visits[0]
        operator = self._config.make_operator()
        operator.current_watermark = first.watermark if early is None else early
        operator.current_processing_time = first.processing_time
        waiting = visits
        if any(v.advances_watermark for v in visits):
            waiting = _restore_where(operator, waiting, lambda v: v.advances_watermark, figures)
            for visit in visits:
                run = runs.get(visit.key)
                if visit.advances_watermark and run is not None and run.early_rows:
                    operator.process_elements(visit.key, run.early_rows, run.early_timestamps)
            operator.process_watermark(first.watermark)
        if any(v.advances_processing_time for v in visits):
            waiting = _restore_where(
                operator, waiting, lambda v: v.advances_processing_time, figures
            )
            operator.advance_processing_time(first.processing_time)
        _restore_where(operator, waiting, lambda v: True, figures)
        before_elements = len(operator.output)
        for visit in visits:
            run = runs.get(visit.key)
            if run is None:
                continue
            if run.early_rows and not visit.advances_watermark:
                operator.process_elements(visit.key, run.early_rows, run.early_timestamps)
            operator.process_elements(visit.key, run.rows, run.timestamps)
        records.extend(self._outputs.records(operator, before_elements, follows))
        figures.emitted(operator)
        for visit in visits:
            self._take_back(operator, visit, group, clock, figures)
        operator.release()

    def _take_back(
        self,
        operator: OperatorHandle,
        visit: Visit,
        group: StoredGroup,
        clock: BatchClock,
        figures: CallFigures,
    ) -> None:
        """Store ``visit.key``'s state and clocks in the group (or drop the key)."""
        key_state = operator.snapshot_key(visit.key)
        if key_state is not None and key_state.is_empty():
            key_state = None
        figures.kept(key_state)
        event_times = [t for t, _ in key_state.event_timers] if key_state else []
        processing_times = [t for t, _ in key_state.processing_timers] if key_state else []
        self._check_timer_domains(visit.key, event_times, processing_times)
        advance = self._advance
        keep_clock = advance.keeps_clock(visit, clock)
        if key_state is None and not keep_clock:
            group.replace(visit.key, visit.stored, None)
            return
        event_timer, processing_timer = advance.key_timers(
            visit, event_times, processing_times, keep_clock
        )
        stored = StoredKey(
            None if key_state is None else dump_key_state(key_state),
            visit.watermark,
            visit.processing_time,
            event_timer,
            processing_timer,
            visit.seen_watermark,
            visit.seen_at,
        )
        group.replace(visit.key, visit.stored, stored)

    def _check_timer_domains(
        self, key: Any, event_times: list[int], processing_times: list[int]
    ) -> None:
        """Fail on a timer in a time domain the query does not serve, naming the fix."""
        mode = self._config.time_mode
        if processing_times and not mode.processing_time:
            raise WindowSpecError(
                f"a processing-time timer was registered (key={key!r}, times="
                f"{sorted(processing_times)[:3]}) in a query with time_mode={mode.value!r}, which "
                "serves no processing time: the trigger must declare "
                "TimeDomain.PROCESSING_TIME in timer_domains() (window_stream: "
                "time_mode='EventTimeAndProcessingTime')"
            )
        if event_times and not mode.event_time:
            raise WindowSpecError(
                f"an event-time timer was registered (key={key!r}, times="
                f"{sorted(event_times)[:3]}) in a query with time_mode={mode.value!r}, which has "
                "no watermark: give the stream an event-time column and a WatermarkStrategy "
                "with bounded out-of-orderness (window_stream: out_of_orderness_ms and "
                "time_mode='EventTimeAndProcessingTime'), or declare timer_domains() "
                "without TimeDomain.EVENT_TIME if the trigger never uses it"
            )


def _cohort(visit: Visit, run: KeyRun | None, forwarded: int | None) -> tuple[int, int, int | None]:
    """The operator ``visit``'s key shares: its clocks and, when it advances with rows
    to feed before the watermark (a chain), the watermark they are fed under: the one
    the earlier window forwarded before them, or the key's own if that is later."""
    if not (visit.advances_watermark and run is not None and run.early_rows):
        return visit.watermark, visit.processing_time, None
    early = visit.stored.watermark if forwarded is None else max(forwarded, visit.stored.watermark)
    return visit.watermark, visit.processing_time, early


def _restore(operator: OperatorHandle, visit: Visit, figures: CallFigures) -> None:
    key_state: KeyState | None = visit.stored.load_state()
    if key_state is not None:
        figures.restored(key_state)
        operator.restore_key(visit.key, key_state)


def _restore_where(
    operator: OperatorHandle,
    visits: list[Visit],
    wanted: Callable[[Visit], bool],
    figures: CallFigures,
) -> list[Visit]:
    """Restore the ``wanted`` visits into ``operator``; return the others."""
    rest = []
    for visit in visits:
        if wanted(visit):
            _restore(operator, visit, figures)
        else:
            rest.append(visit)
    return rest


def object_frame(names: list[str], records: list[tuple[Any, ...]]) -> pd.DataFrame:
    """A pandas frame of Python values; object columns keep ints exact and None as null."""
    return pd.DataFrame(records, columns=names, dtype=object)
