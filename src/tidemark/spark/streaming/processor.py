"""The window operator per key group, whichever Spark operator calls it (:mod:`.bindings`).

Spark groups the rows by key group (see :mod:`.state`) and calls once per key group and
micro-batch: for a group with input rows, or for a group whose Spark timer (timeout)
expired. Each call

1. reads the group's row (handed over with the rows, or one state-store get) and splits
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
5. emits results, side outputs and the late-record count as rows of the combined schema;
6. writes the group's row back once (or clears it when no key is left) and moves the
   group's one Spark timer per time domain (its one timeout) to its keys' earliest.

Keys the call does not visit keep their stored bytes untouched.

A pipeline whose timers are in both time domains (``time_mode="EventTimeAndProcessingTime"``)
and one with idleness (``ProcessorConfig.idleness_ms``) need a micro-batch at every trigger
interval without data, so Spark runs them in ProcessingTime mode
(:meth:`ProcessorConfig.spark_time_mode`), where Spark's watermark is still readable but
Spark holds no event-time timer. The engine's event-time timers are then served by calls:
a group whose keys wait for the watermark registers a processing-time timer for the next
micro-batch, and step 2 visits a key when Spark's watermark reaches the key's own
event-time timer, exactly when an EventTime query's Spark timer would have fired. With
idleness step 3 advances the key to the idle watermark
(:func:`~tidemark.spark.streaming.clock.idle_watermark`) of its idle clock, which moves
with processing time, so a key with pending event-time timers is visited in every
micro-batch.

In a chain of windows (``ProcessorConfig.upstream``, :mod:`.chain`) the input is an
earlier window's combined frame, and step 4 feeds the results it fired on advancing to
the batch's watermark first (under the key's previous watermark), then advances, then
feeds the rest; its other outputs pass through, renamed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd

from tidemark._engine.keystate import KeyState
from tidemark._engine.operator import WindowOperator
from tidemark.errors import WindowSpecError
from tidemark.spark.codec import column_values, row_type_of
from tidemark.spark.columns import (
    DROPPED_OUTPUT,
    EARLY,
    MAIN,
    ON_ELEMENTS,
    encode_side,
)
from tidemark.spark.streaming.clock import (
    END_OF_INPUT_MS,
    MIN_TIMESTAMP_MS,
    check_timestamp,
    engine_watermark,
    idle_watermark,
    spark_event_timer,
)
from tidemark.spark.streaming.config import ProcessorConfig
from tidemark.spark.streaming.modes import PROCESSING_TIME
from tidemark.spark.streaming.state import (
    NEW_KEY,
    StoredGroup,
    StoredKey,
    dump_key_state,
)
from tidemark.spark.worker_gc import fewer_gc_passes

__all__ = ["WindowGroups", "BatchClock", "KeyRun", "object_frame"]

# A key's rows in one call: (Rows, timestamps) fed before the watermark, and after it.
KeyRun = tuple[list[Any], list[Any], list[Any], list[Any]]


@dataclass(frozen=True)
class BatchClock:
    """What Spark presents to every call of one micro-batch."""

    now: int  # the batch's processing time (ms)
    spark_watermark_ms: int  # Spark's watermark, on Spark's clock
    watermark: int  # its engine watermark, before idleness


@dataclass
class _Visit:
    """One key in one call: its stored entry and the clocks it moves to."""

    key: Any
    stored: StoredKey
    watermark: int  # the key's engine watermark once advanced
    processing_time: int
    advances_watermark: bool  # whether the operator advances to ``watermark`` with it
    advances_processing_time: bool  # and to ``processing_time``
    seen_watermark: int | None = None
    seen_at: int | None = None


class WindowGroups:
    """The window operator per key group, whatever Spark operator calls it: split a
    call's rows by key, visit the keys, and work out the group's row and Spark timers
    (module docstring, steps 1-6). A binding reads the group's row, presents the batch's
    clocks and stores the row and timers back: :class:`WindowStatefulProcessor`
    (``transformWithStateInPandas``) or :class:`WindowGroupFunction`
    (``applyInPandasWithState``)."""

    def __init__(self, config: ProcessorConfig):
        self._config = config
        self._row_type: Any = None  # built on the worker: a namedtuple class

    def _prepare(self) -> None:
        """What every call needs, derived once per worker."""
        # A call builds and drops many small objects (Rows, key states) and no cycles.
        fewer_gc_passes()
        config = self._config
        self._idle = config.idleness_ms is not None
        # In a ProcessingTime query Spark holds no event-time timer: calls serve them.
        self._polls_watermark = config.event_time and config.spark_time_mode() == PROCESSING_TIME
        self._row_type = row_type_of(config.value_names)

    # ------------------------------------------------------------------ input

    def _split_frames(
        self, frames: Iterable[pd.DataFrame]
    ) -> tuple[dict[Any, KeyRun], list[tuple[Any, ...]], dict[Any, int]]:
        """A call's rows split by key (see :meth:`_split`): the keys' runs, an upstream's
        passed-through outputs, and the watermarks the keys' early rows follow."""
        runs: dict[Any, KeyRun] = {}
        passed: list[tuple[Any, ...]] = []
        forwarded: dict[Any, int] = {}
        for pdf in frames:
            self._split(pdf, runs, passed, forwarded)
        return runs, passed, forwarded

    def _split(
        self,
        pdf: pd.DataFrame,
        runs: dict[Any, KeyRun],
        passed: list[tuple[Any, ...]],
        forwarded: dict[Any, int],
    ) -> None:
        """Append each row of ``pdf`` to its key's run (Rows, timestamps; before or after
        the watermark), in order; an upstream's other outputs go to ``passed``, and the
        watermark a key's early rows follow to ``forwarded``.

        The Rows are built in one pass and put in key order by one stable sort (each
        key's rows keep Spark's order): what is done in Python per key, not per row, is
        appending the key's rows to its run."""
        config = self._config
        phases: Any = None
        follows: Any = None
        if config.upstream is not None:
            pdf, phases, follows = config.upstream.split(pdf, passed)
        columns = _ColumnValues(pdf)
        timestamps: Any = columns.at(config.timestamp_position, "LongType")
        keys: Any = columns.keys(config.key_positions, config.key_types)
        values = [
            columns.at(i, t)
            for i, t in zip(config.value_positions, config.value_types, strict=True)
        ]
        tuples = zip(*values) if values else repeat((), len(timestamps))
        rows: Any = list(map(tuple.__new__, repeat(self._row_type), tuples))
        kept = self._kept_rows(timestamps, keys)
        if kept is not None:
            keys, timestamps, rows, phases, follows = (
                None if seq is None else [seq[i] for i in kept]
                for seq in (keys, timestamps, rows, phases, follows)
            )
        if not rows:
            return
        order, segments = _key_segments(keys, self._engine_key, phases)
        rows, timestamps = _reorder(rows, order), _reorder(timestamps, order)
        follows = None if follows is None else _reorder(follows, order)
        for key, early, start, end in segments:
            run = runs.get(key)
            if run is None:
                run = runs[key] = ([], [], [], [])
            at = 0 if early else 2
            run[at].extend(rows[start:end])
            run[at + 1].extend(timestamps[start:end])
            if early:
                follow = max((f for f in follows[start:end] if f is not None), default=None)
                if follow is not None:
                    forwarded[key] = max(follow, forwarded.get(key, follow))

    def _kept_rows(self, timestamps: list[Any], keys: list[Any]) -> list[int] | None:
        """The rows to feed (None: all of them): a timestamp the event-time mapping cannot
        carry fails, naming its key; an end-of-input marker only moves the watermark."""
        config = self._config
        markers = END_OF_INPUT_MS if config.upstream is None else None
        low: Any = None
        high: Any = None
        try:
            low, high = min(timestamps, default=0), max(timestamps, default=0)
        except TypeError:  # a null timestamp among others
            pass
        if low is not None and low >= MIN_TIMESTAMP_MS and (markers is None or high < markers):
            return None
        kept = []
        for row, (timestamp, key) in enumerate(zip(timestamps, keys, strict=True)):
            if timestamp is None or timestamp < MIN_TIMESTAMP_MS:
                check_timestamp(timestamp, key, config.event_time)
            elif markers is not None and timestamp >= markers:
                continue
            kept.append(row)
        return kept

    def _engine_key(self, spark_key: Any) -> Any:
        single = len(self._config.key_positions) == 1
        as_tuple = (spark_key,) if single else tuple(spark_key)
        engine_key = self._config.engine_key
        if engine_key is not None:
            return engine_key(as_tuple)
        return as_tuple[0] if single else as_tuple

    # ------------------------------------------------------------------ one call

    def _run(
        self,
        group: StoredGroup,
        runs: dict[Any, KeyRun],
        clock: BatchClock,
        passed: list[tuple[Any, ...]],
        forwarded: dict[Any, int],
    ) -> list[tuple[Any, ...]]:
        """Visit the keys (steps 2-5); ``group`` then holds the keys' new state."""
        cohorts: dict[tuple[int, int, int | None], list[_Visit]] = {}
        for key in self._keys_to_visit(group, runs, clock):
            visit = self._visit(key, group.keys.get(key, NEW_KEY), clock)
            cohort = _cohort(visit, runs.get(key), forwarded.get(key))
            cohorts.setdefault(cohort, []).append(visit)
        # What this window forwarded last (the watermark of its previous call: see _save)
        follows = None if group.watermark is None else engine_watermark(group.watermark)
        records = passed
        for (_, _, early), visits in cohorts.items():
            self._run_cohort(visits, runs, group, clock, records, early, follows)
        group.watermark = clock.spark_watermark_ms
        return records

    def _frames(self, records: list[tuple[Any, ...]]) -> Iterator[pd.DataFrame]:
        if not records:
            return iter([])
        return iter([object_frame(self._config.output_columns(), records)])

    def _clock(self, now: int, spark_watermark_ms: Callable[[], int]) -> BatchClock:
        """The batch's clocks; Spark's watermark is only read where the query has one."""
        watermark_ms = spark_watermark_ms() if self._config.event_time else 0
        return BatchClock(now, watermark_ms, engine_watermark(watermark_ms))

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

    def _visit(self, key: Any, stored: StoredKey, clock: BatchClock) -> _Visit:
        """The clocks ``key`` moves to, as a processor called for it alone moves them."""
        config = self._config
        processing_time = max(clock.now, stored.processing_time)
        # Past processing-time timers fire as soon as possible, as in Flink.
        ticks = config.processing_time
        if not config.event_time:
            return _Visit(key, stored, stored.watermark, processing_time, False, ticks)
        target = clock.watermark
        seen_watermark, seen_at = stored.seen_watermark, stored.seen_at
        if self._idle:
            assert config.idleness_ms is not None
            if seen_watermark != clock.spark_watermark_ms or seen_at is None:
                seen_watermark, seen_at = clock.spark_watermark_ms, clock.now
            target = idle_watermark(target, seen_at, clock.now, config.idleness_ms)
        advances = target > stored.watermark
        watermark = target if advances else stored.watermark
        return _Visit(
            key, stored, watermark, processing_time, advances, ticks, seen_watermark, seen_at
        )

    def _run_cohort(
        self,
        visits: list[_Visit],
        runs: dict[Any, KeyRun],
        group: StoredGroup,
        clock: BatchClock,
        records: list[tuple[Any, ...]],
        early: int | None,
        follows: int | None,
    ) -> None:
        """One operator for keys that share their clocks: advance, feed, take state back.

        The watermark moves first (the one Spark moved to after the previous batch), then
        processing time (the batch's): each key sees the order the engine fed those
        clocks in that order would give it; a key joins the operator just before the
        first clock it advances, so a clock it does not advance fires none of its timers.
        A chain's early rows go in just before the watermark moves, under ``early``, the
        watermark the earlier window forwarded before them (:mod:`.chain`); this window's
        results fired on the watermark follow ``follows``, the one it forwarded last.
        """
        first = visits[0]
        operator = self._config.make_operator()
        operator.current_watermark = first.watermark if early is None else early
        operator.current_processing_time = first.processing_time
        waiting = visits
        if any(v.advances_watermark for v in visits):
            waiting = _restore_where(operator, waiting, lambda v: v.advances_watermark)
            for visit in visits:
                run = runs.get(visit.key)
                if visit.advances_watermark and run is not None and run[0]:
                    operator.process_elements(visit.key, run[0], run[1])
            operator.process_watermark(first.watermark)
        if any(v.advances_processing_time for v in visits):
            waiting = _restore_where(operator, waiting, lambda v: v.advances_processing_time)
            operator.advance_processing_time(first.processing_time)
        _restore_where(operator, waiting, lambda v: True)
        before_elements = len(operator.output)
        for visit in visits:
            run = runs.get(visit.key)
            if run is None:
                continue
            if run[0] and not visit.advances_watermark:
                operator.process_elements(visit.key, run[0], run[1])
            operator.process_elements(visit.key, run[2], run[3])
        records.extend(self._output_records(operator, before_elements, follows))
        for visit in visits:
            self._take_back(operator, visit, group, clock)

    # ------------------------------------------------------------------ output

    def _output_records(
        self, operator: WindowOperator, before_elements: int, follows: int | None
    ) -> list[tuple[Any, ...]]:
        """The operator's results, side outputs and dropped count as combined-schema rows;
        the first ``before_elements`` results were emitted on the watermark."""
        config = self._config
        blanks = (None,) * len(config.result_names)
        phased = config.feeds_downstream
        late = (ON_ELEMENTS, None) if phased else ()
        records: list[tuple[Any, ...]] = []
        for n, (value, timestamp) in enumerate(operator.output):
            result = tuple(config.result_to_row(value, timestamp))
            if len(result) != len(blanks):
                raise WindowSpecError(
                    f"`result_to_row` must return {len(blanks)} values {list(config.result_names)};"
                    f" got {result!r}"
                )
            phase: tuple[Any, ...] = ()
            if phased:
                phase = (EARLY, follows) if n < before_elements else (ON_ELEMENTS, None)
            records.append((MAIN, timestamp, *result, None, None, *phase))
        for tag, items in operator.side_outputs.items():
            for value, timestamp in items:
                records.append((tag.tag_id, timestamp, *blanks, encode_side(value), None, *late))
        if operator.num_late_records_dropped:
            dropped = operator.num_late_records_dropped
            records.append((DROPPED_OUTPUT, None, *blanks, None, dropped, *late))
        return records

    # ------------------------------------------------------------------ state and timers

    def _take_back(
        self, operator: WindowOperator, visit: _Visit, group: StoredGroup, clock: BatchClock
    ) -> None:
        """Store ``visit.key``'s state and clocks in the group (or drop the key)."""
        key_state = operator.snapshot_key(visit.key)
        if key_state is not None and key_state.is_empty():
            key_state = None
        event_times = [t for t, _ in key_state.event_timers] if key_state else []
        processing_times = [t for t, _ in key_state.processing_timers] if key_state else []
        self._check_timer_domains(visit.key, event_times, processing_times)
        # A key without state keeps its idle clock while its watermark is ahead of Spark's:
        # a new element of the key is judged by the idle-advanced watermark.
        keep_clock = self._idle and visit.watermark > clock.watermark
        if key_state is None and not keep_clock:
            group.keys.pop(visit.key, None)
            return
        event_timer, processing_timer = self._spark_timers(
            visit, event_times, processing_times, keep_clock
        )
        group.keys[visit.key] = StoredKey(
            None if key_state is None else dump_key_state(key_state),
            visit.watermark,
            visit.processing_time,
            event_timer,
            processing_timer,
            visit.seen_watermark,
            visit.seen_at,
        )

    def _spark_timers(
        self,
        visit: _Visit,
        event_times: list[int],
        processing_times: list[int],
        keep_clock: bool,
    ) -> tuple[int | None, int | None]:
        """The Spark (event-time, processing-time) timers the key needs, if any."""
        processing_timer = min(processing_times) if processing_times else None
        if self._idle:
            assert self._config.idleness_ms is not None
            now = visit.processing_time
            # A pending event-time timer may fire in any later micro-batch (the watermark
            # moved or the idle advance reached it): visit the key in the next one. A
            # kept clock is checked once per idleness, to be cleared when Spark catches up.
            if event_times:
                return None, _earliest(processing_timer, now + 1)
            visit_again = now + self._config.idleness_ms if keep_clock else None
            return None, _earliest(processing_timer, visit_again)
        event_timer = None
        if event_times:
            event_timer = spark_event_timer(min(event_times), visit.watermark)
        return event_timer, processing_timer

    def _wanted_timers(
        self, group: StoredGroup, clock: BatchClock
    ) -> tuple[int | None, int | None]:
        """The group's (event-time, processing-time) Spark timers after a call: its keys'
        earliest.

        Where Spark holds no event-time timer (a ProcessingTime query), the group's
        earliest event-time timer is kept in its row only, and a processing-time timer
        brings the group back in the next micro-batch to compare it with the watermark.
        A window that feeds a later one is called at every watermark advance while it
        holds keys, so its row knows the watermark it forwarded last (:mod:`.chain`).
        """
        event_timer, processing_timer = group.earliest_timers()
        if self._config.feeds_downstream and group.keys and not self._polls_watermark:
            event_timer = _earliest(event_timer, clock.spark_watermark_ms + 1)
        if self._polls_watermark and event_timer is not None:
            processing_timer = _earliest(processing_timer, clock.now + 1)
        return event_timer, processing_timer

    def _check_timer_domains(
        self, key: Any, event_times: list[int], processing_times: list[int]
    ) -> None:
        """Fail on a timer in a time domain the query does not serve, naming the fix."""
        config, mode = self._config, self._config.time_mode
        if processing_times and not config.processing_time:
            raise WindowSpecError(
                f"a processing-time timer was registered (key={key!r}, times="
                f"{sorted(processing_times)[:3]}) in a query with time_mode={mode!r}, which "
                "serves no processing time: the trigger must declare "
                "TimeDomain.PROCESSING_TIME in timer_domains() (window_stream: "
                "time_mode='EventTimeAndProcessingTime')"
            )
        if event_times and not config.event_time:
            raise WindowSpecError(
                f"an event-time timer was registered (key={key!r}, times="
                f"{sorted(event_times)[:3]}) in a query with time_mode={mode!r}, which has "
                "no watermark: give the stream an event-time column and a WatermarkStrategy "
                "with bounded out-of-orderness (window_stream: out_of_orderness_ms and "
                "time_mode='EventTimeAndProcessingTime'), or declare timer_domains() "
                "without TimeDomain.EVENT_TIME if the trigger never uses it"
            )


def _cohort(
    visit: _Visit, run: KeyRun | None, forwarded: int | None
) -> tuple[int, int, int | None]:
    """The operator ``visit``'s key shares: its clocks and, when it advances with rows
    to feed before the watermark (a chain), the watermark they are fed under: the one
    the earlier window forwarded before them, or the key's own if that is later."""
    if not (visit.advances_watermark and run is not None and run[0]):
        return visit.watermark, visit.processing_time, None
    early = visit.stored.watermark if forwarded is None else max(forwarded, visit.stored.watermark)
    return visit.watermark, visit.processing_time, early


def _restore(operator: WindowOperator, visit: _Visit) -> None:
    key_state: KeyState | None = visit.stored.load_state()
    if key_state is not None:
        operator.restore_key(visit.key, key_state)


def _restore_where(
    operator: WindowOperator, visits: list[_Visit], wanted: Callable[[_Visit], bool]
) -> list[_Visit]:
    """Restore the ``wanted`` visits into ``operator``; return the others."""
    rest = []
    for visit in visits:
        if wanted(visit):
            _restore(operator, visit)
        else:
            rest.append(visit)
    return rest


def _earliest(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def object_frame(names: list[str], records: list[tuple[Any, ...]]) -> pd.DataFrame:
    """A pandas frame of Python values; object columns keep ints exact and None as null."""
    return pd.DataFrame(records, columns=names, dtype=object)


class _ColumnValues:
    """A pandas frame's columns as Python values (:func:`column_values`), each column
    converted once: one column can be a key, a value and the timestamp."""

    def __init__(self, pdf: pd.DataFrame):
        self._series = [column for _, column in pdf.items()]  # cheaper than iloc per column
        self._converted: dict[int, list[Any]] = {}

    def at(self, position: int, type_name: str) -> list[Any]:
        values = self._converted.get(position)
        if values is None:
            values = self._converted[position] = column_values(self._series[position], type_name)
        return values

    def keys(self, positions: tuple[int, ...], type_names: tuple[str, ...]) -> list[Any]:
        """Each row's Spark key: the key column's value, or a tuple of several."""
        columns = [self.at(i, t) for i, t in zip(positions, type_names, strict=True)]
        return columns[0] if len(columns) == 1 else list(zip(*columns))


def _key_segments(
    keys: list[Any], engine_key: Callable[[Any], Any], phases: list[Any] | None
) -> tuple[list[int], list[tuple[Any, bool, int, int]]]:
    """The rows' order by key (stable) and its segments: (engine key, early, start, end),
    keys in the order of their first row, a key's early rows (a chain's, ``phases``)
    apart from its others. Spark keys that are one engine key are one segment."""
    n = len(keys)
    first_rows: dict[Any, int] = {}
    codes = np.fromiter(map(first_rows.setdefault, keys, range(n)), dtype=np.int64, count=n)
    owners: dict[Any, int] = {}  # engine key -> the first row of its first Spark key
    engine_keys: dict[int, Any] = {}
    merged: dict[int, int] = {}
    for spark_key, row in first_rows.items():
        key = engine_key(spark_key)
        owner = owners.setdefault(key, row)
        if owner == row:
            engine_keys[row] = key
        else:
            merged[row] = owner
    if merged:
        codes = np.fromiter((merged.get(c, c) for c in codes.tolist()), np.int64, count=n)
    late = 1 if phases is None else np.fromiter((p != EARLY for p in phases), np.int64, n)
    codes = codes * 2 + late
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()]
    ends = [*starts[1:], n]
    firsts = ordered[starts].tolist()
    segments = [
        (engine_keys[code >> 1], not code & 1, start, end)
        for code, start, end in zip(firsts, starts, ends, strict=True)
    ]
    return order.tolist(), segments


def _reorder(values: list[Any], order: list[int]) -> Any:
    """``values`` in ``order`` (a sequence)."""
    return itemgetter(*order)(values) if len(order) > 1 else values
