"""Why did a window of a streaming query (not) fire? The answer from its checkpoint.

:func:`explain_checkpoint` answers for one key of a query ``write_outputs`` started,
running or stopped, from what its checkpoint holds:

- the key's state as a micro-batch left it (Spark's state data source,
  :mod:`.state_reader`): its open windows, their contents, trigger state and timers;
- the watermarks each micro-batch ran under and ended with, and each partition's share
  of them (:mod:`.batch_records`): which partition holds the watermark, its last event
  time, whether idleness is on;
- where Spark's logs allow it (a file source; Kafka), the key's elements of each
  retained micro-batch, read again from the source (:mod:`.history`), so that past
  firings and late elements are explained too.

Given the pipeline (the window's result object, or its ``OperatorSpec``: the checkpoint
records a description of the window, not its functions), the key's events go through
:func:`tidemark.explain.explain_events` (mode ``"streaming"``), started from the state
at the micro-batch before the first one re-read: the same answer the engine gives when
fed the same micro-batches. Without it, the answer is what the state holds (the open
windows and what each waits for). Reading the checkpoint takes no lock and writes
nothing: a running query goes on as before. The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

from tidemark._engine.keystate import KeyState
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import ExplainError, WindowSpecError
from tidemark.explain import (
    Element,
    EndOfInput,
    Event,
    Explanation,
    InitialState,
    MicroBatch,
    PartitionState,
    WaitFact,
    Watermark,
    WindowFact,
    explain_events,
)
from tidemark.explain.partitions import holding_partition
from tidemark.explain.timefmt import TimeText
from tidemark.spark.plan import source_of
from tidemark.spark.protocol.columns import ALL_KEY, is_internal
from tidemark.spark.streaming.driver.batch_records import BatchRecord
from tidemark.spark.streaming.driver.checkpoint import LATER_FIELDS, describe_window
from tidemark.spark.streaming.driver.history import (
    HistorySource,
    HistoryUnavailable,
    KeyRow,
    read_key_history,
)
from tidemark.spark.streaming.driver.recorded import (
    RecordedQuery,
    check_batch,
    key_columns,
    partition_states,
)
from tidemark.spark.streaming.driver.state_reader import (
    KeyStateRead,
    key_slot,
    read_key_state,
    state_batches,
)
from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS
from tidemark.time import LONG_MAX, LONG_MIN
from tidemark.windows import TimeWindow

__all__ = ["explain_checkpoint", "CheckpointExplanation", "element_label"]


@dataclass(frozen=True)
class CheckpointExplanation(Explanation):
    """An :class:`~tidemark.explain.Explanation` read from a streaming checkpoint, with
    where it came from.

    Attributes
    ----------
    checkpoint : str
        The checkpoint read.
    batch_id : int or None
        The micro-batch whose state the answer ends with.
    next_watermark : int or None
        The watermark the next micro-batch runs under (None: not recorded).
    partitions_after : tuple of PartitionState
        The partitions' shares of it, after ``batch_id`` (``partitions``: of the
        watermark ``batch_id`` ran under, the answer's).
    history_from : int or None
        The first micro-batch whose elements were read again (None: none; the answer
        starts from the state of ``batch_id``).
    notes : tuple of str
        What the answer could not read, and why.
    replayed : bool
        Whether the key's events were replayed on the engine (a pipeline was given);
        else the answer is the state's alone.
    """

    checkpoint: str = ""
    batch_id: int | None = None
    next_watermark: int | None = None
    partitions_after: tuple[PartitionState, ...] = ()
    history_from: int | None = None
    notes: tuple[str, ...] = ()
    replayed: bool = True

    def picture(self, path: Any) -> Any:
        """The key's timeline (:meth:`Explanation.picture`): a replay's only."""
        if not self.replayed:
            raise ExplainError(
                "`picture` draws the key's replayed events, and this answer is the state's "
                "alone: give the pipeline (explain_checkpoint(spark, checkpoint, key, "
                "pipeline)) to draw it"
            )
        return super().picture(path)

    def text(self) -> str:
        """The engine's answer (:meth:`Explanation.text`) after where it was read."""
        return _header(self) + super().text() + "".join(f"Note: {n}\n" for n in self.notes)


def explain_checkpoint(
    spark: Any,
    checkpoint: str,
    key: Any,
    pipeline: Any = None,
    *,
    window: tuple[int, int] | None = None,
    timestamp: int | None = None,
    batch_id: int | None = None,
    time_zone: str | None = None,
) -> CheckpointExplanation:
    """Why a window of ``key`` in a streaming query did (not) fire, from its checkpoint.

    Parameters
    ----------
    spark : SparkSession
        A session that can read the checkpoint (the query's own, or another).
    checkpoint : str
        The checkpoint location the query was started with (``write_outputs``).
    key : object
        The key: the key column's value, a tuple of the key columns' values; None for
        a ``window_all``.
    pipeline : WindowResultStream or OperatorSpec, optional
        The window the query runs (its functions are not in the checkpoint). Given, the
        answer replays the key's events on the engine: firings, panes and each
        element's fate; checked against the checkpoint's record of the window.
    window : (start, end), optional
        The window asked about, ``[start, end)`` ms.
    timestamp : int, optional
        An element's timestamp asked about (ms).
    batch_id : int, optional
        Answer as that micro-batch left the state (default: the latest committed).
    time_zone : str, optional
        IANA zone of the answer's times (default UTC).

    Returns
    -------
    CheckpointExplanation

    Raises
    ------
    WindowSpecError
        ``checkpoint`` is no tidemark query's; ``pipeline`` is not the checkpoint's.
    ExplainError
        A ``batch_id`` whose state is not retained; a ``window`` or ``timestamp`` not of
        the key's; a key without state or elements.

    Supported
    ---------
    - Every window of a query started by ``write_outputs``, in either state layout; a
      chain's last window.
    - Per-partition watermarks: the holding partition, from the records.
    - Re-reading past micro-batches from a file source's or Kafka's logs.

    Not supported
    -------------
    - Past micro-batches of other sources: the answer starts from the state, and says so.
    - A query over Spark Connect records no watermarks (the answer says so).
    """
    recorded = RecordedQuery.read(spark, checkpoint)
    spec, source = _pipeline_parts(pipeline, recorded, checkpoint)
    first_state, last_state = state_batches(spark, checkpoint)
    batch = check_batch(batch_id, first_state, last_state)
    record = recorded.at_or_before(batch)
    slot = _slot(spark, key, recorded)
    notes = [] if record is not None else [_NO_RECORDS]
    if spec is None:
        read = read_key_state(spark, checkpoint, key, slot, batch)
        x = _state_only(recorded, read, record, time_zone)
        notes.append(
            "without the pipeline (pipeline=...) the answer is what the state holds: "
            "give it for firings and each element's fate"
        )
        return _wrapped(x, checkpoint, batch, record, None, notes, window, replayed=False)
    events, initial, history_from = _events(
        spark, recorded, source, key, slot, first_state, batch, notes
    )
    if initial is None and not any(isinstance(e, Element) for e in events):
        raise ExplainError(
            f"`key` must be a key the query holds state or elements of at micro-batch "
            f"{batch}; got key={key!r}, which has neither (its windows may all have fired "
            "and been cleaned before the retained micro-batches)"
        )
    x = explain_events(
        spec,
        key,
        events,
        mode="streaming",
        partitions=_shares_before(recorded, batch, record),
        window=window,
        timestamp=timestamp,
        time_zone=time_zone,
        initial_state=initial,
        idleness=None if record is None else record.idleness_ms is not None,
    )
    return _wrapped(x, checkpoint, batch, record, history_from, notes, None)


_NO_RECORDS = (
    "the checkpoint has no record of its micro-batches' watermarks (a query started "
    "before tidemark recorded them, or over Spark Connect): the partitions' watermarks "
    "are unknown"
)


def _shares_before(
    recorded: RecordedQuery, batch: int, record: BatchRecord | None
) -> tuple[PartitionState, ...]:
    """The partitions' shares of the watermark micro-batch ``batch`` ran under: as the
    micro-batch before it left them (none seen yet before the first)."""
    if record is None or record.partition_column is None:
        return ()
    before = recorded.at_or_before(batch - 1)
    if before is not None:
        return partition_states(before)
    return tuple(PartitionState(i.partition, None, LONG_MIN) for i in record.inputs)


def _slot(spark: Any, key: Any, recorded: RecordedQuery) -> int | None:
    """The slot of ``key``'s group; None for a ``key_by`` function's key (every group
    is read)."""
    columns = key_columns(recorded.window)
    if [name for name, _ in columns] == [ALL_KEY]:
        return key_slot(spark, 0, columns, recorded.groups)
    if any(is_internal(name) for name, _ in columns):
        return None
    return key_slot(spark, key, columns, recorded.groups)


# ------------------------------------------------------------------ the pipeline


def _pipeline_parts(
    pipeline: Any, recorded: RecordedQuery, checkpoint: str
) -> tuple[OperatorSpec | None, HistorySource | None]:
    """The pipeline's spec (checked against the checkpoint's record) and its source."""
    if pipeline is None:
        return None, None
    op = getattr(pipeline, "_plan", None)
    spec = pipeline if isinstance(pipeline, OperatorSpec) else getattr(op, "spec", None)
    if not isinstance(spec, OperatorSpec):
        raise ExplainError(
            f"`pipeline` must be the window's result (what .window(...).process/sum/... "
            f"returned) or its OperatorSpec; got {type(pipeline).__name__}"
        )
    _check_matches(spec, recorded, checkpoint)
    return spec, None if op is None else _history_source(op)


def _check_matches(spec: OperatorSpec, recorded: RecordedQuery, checkpoint: str) -> None:
    given = describe_window(spec)
    stored = recorded.window
    changes = [
        f"{name} was {stored.get(name)}, given {value}"
        for name, value in sorted(given.items())
        if stored.get(name) != value and not (name in LATER_FIELDS and name not in stored)
    ]
    if changes:
        raise WindowSpecError(
            f"`pipeline` must be the window the checkpoint {checkpoint!r} runs: "
            f"{'; '.join(changes)}. Give the pipeline the query was started with"
        )


def _history_source(op: Any) -> HistorySource | None:
    """What reading the source again needs, where it can be read (else None)."""
    source = source_of(op)
    if op.key is None or op.key.function is not None or source.timestamp is None:
        return None
    partitions = source.partitions
    if partitions is None or partitions.values is None:
        return HistorySource(source.df, tuple(op.key.columns), source.timestamp)
    return HistorySource(
        source.df,
        tuple(op.key.columns),
        source.timestamp,
        partitions.column,
        tuple(partitions.values),
    )


# ------------------------------------------------------------------ the events


def _events(
    spark: Any,
    recorded: RecordedQuery,
    source: HistorySource | None,
    key: Any,
    slot: int | None,
    first_state: int,
    batch: int,
    notes: list[str],
) -> tuple[list[Event], InitialState | None, int | None]:
    """The key's events: from the earliest micro-batch whose elements can be read again
    (with the state before it), else from the state of ``batch`` alone."""
    checkpoint = recorded.checkpoint
    first = _first_replayable(recorded, first_state, batch)
    rows: list[KeyRow] | None = None
    why = "the pipeline's source cannot be read again (a key_by function, or a timestamp unit)"
    if source is not None and first is not None:
        try:
            rows = read_key_history(spark, checkpoint, source, key, first, batch)
        except HistoryUnavailable as exc:
            why = str(exc)
    if rows is None or first is None or source is None:
        notes.append(
            f"history before micro-batch {batch}'s state is not available ({why}): "
            "firings and elements before it are not explained"
        )
        read = read_key_state(spark, checkpoint, key, slot, batch)
        initial = _initial(read)
        return [MicroBatch(batch), *_watermark(recorded, batch)], initial, None
    initial = (
        None if first == 0 else _initial(read_key_state(spark, checkpoint, key, slot, first - 1))
    )
    events: list[Event] = []
    for number in range(first, batch + 1):
        events += [MicroBatch(number), *_watermark(recorded, number)]
        events += [
            Element(r.value, r.timestamp, element_label(r.value, source))
            for r in rows
            if r.batch == number
        ]
    return events, initial, first


def element_label(row: Any, source: HistorySource) -> str:
    """An element's name in answers and pictures: its columns other than the key's and
    the event time's (``n=1, partition=0``), else the whole row."""
    shown = (source.timestamp, *source.key_columns)
    fields = [f"{name}={value!r}" for name, value in row.asDict().items() if name not in shown]
    return ", ".join(fields) if fields else str(row)


def _first_replayable(recorded: RecordedQuery, first_state: int, batch: int) -> int | None:
    """The earliest micro-batch from which the watermark of every one up to ``batch`` is
    recorded (the record of the one before it) and whose state before it is retained
    (or the query's first)."""
    recorded_batches = {r.batch for r in recorded.batches}
    first = None
    candidate = batch
    while candidate == 0 or candidate - 1 in recorded_batches:
        if candidate == 0 or candidate - 1 >= first_state:
            first = candidate
        if candidate == 0:
            break
        candidate -= 1
    return first


def _watermark(recorded: RecordedQuery, batch: int) -> list[Event]:
    """The watermark micro-batch ``batch`` ran under: the one the micro-batch before it
    ended with (the end of input as such)."""
    before = recorded.batch(batch - 1)
    if before is None or before.ended_ms == LONG_MIN:
        return []
    if before.ended_ms >= LONG_MAX:
        return [EndOfInput()]
    return [Watermark(before.ended_ms)]


def _initial(read: KeyStateRead) -> InitialState | None:
    if read.stored is None:
        return None
    return InitialState(
        read.state if read.state is not None else KeyState(),
        read.stored.watermark,
        read.stored.processing_time,
    )


# ------------------------------------------------------------------ without the pipeline


_COUNT = re.compile(r"CountTrigger\(.*count=(\d+)\)")


def _state_only(
    recorded: RecordedQuery, read: KeyStateRead, record: BatchRecord | None, time_zone: str | None
) -> Explanation:
    """What the state holds: each open window and what it waits for."""
    if read.stored is None:
        raise ExplainError(
            f"`key` must be a key the query holds state of at micro-batch {read.batch_id}; "
            f"got key={read.key!r}, which holds none (its windows fired and were cleaned, "
            "or it never came): give pipeline=... to read its elements again"
        )
    state = read.state or KeyState()
    watermark = record.ran_under_ms if record is not None else read.stored.watermark
    partitions = _shares_before(recorded, read.batch_id, record)
    holder = holding_partition(partitions)
    times = TimeText(time_zone)
    description = recorded.window
    count = _COUNT.search(description.get("trigger", ""))
    windows = tuple(
        _open_window(state, w, watermark, record, holder, times, count)
        for w in sorted(state.contents, key=_window_order)
        if not isinstance(w, int)
    )
    lateness = re.match(r"(-?\d+)ms", description.get("allowed lateness", "0ms"))
    return Explanation(
        key=read.key,
        mode="streaming",
        watermark=watermark,
        processing_time=read.stored.processing_time,
        ended=watermark >= LONG_MAX,
        windows=windows,
        elements=(),
        firings=(),
        partitions=partitions,
        holder=holder,
        idleness=None if record is None else record.idleness_ms is not None,
        allowed_lateness=int(lateness.group(1)) if lateness else 0,
        pipeline=f"{description.get('assigner')}, trigger={description.get('trigger')}",
        time_zone=time_zone,
    )


def _window_order(window: Any) -> tuple[int, int]:
    if isinstance(window, TimeWindow):
        return window.start, window.end
    return LONG_MAX, LONG_MAX


def _open_window(
    state: KeyState,
    window: Any,
    watermark: int,
    record: BatchRecord | None,
    holder: Any,
    times: TimeText,
    count: Any,
) -> WindowFact:
    bounds = (window.start, window.end) if isinstance(window, TimeWindow) else (None, None)
    wait = _wait(state, window, watermark, record, holder, times, count)
    return WindowFact(
        window=bounds,
        status="open",
        elements=(),
        firings=(),
        cleanup_time=None,
        waiting=wait,
        waits=(wait,),
        detail=f"it has contents in the state, and {wait.detail}",
    )


def _wait(
    state: KeyState,
    window: Any,
    watermark: int,
    record: BatchRecord | None,
    holder: Any,
    times: TimeText,
    count: Any,
) -> WaitFact:
    """What an open window waits for, read off the state's trigger state and timers (a
    count trigger's window waits for its count; its event-time timer is its cleanup)."""
    counted = (state.trigger_state.get(window) or {}).get("count")
    if count is not None and counted is not None:
        return WaitFact(
            "count",
            f"the trigger's count is {counted} of {count.group(1)}",
            count=int(counted),
            count_of=int(count.group(1)),
        )
    event = sorted(t for t, w in state.event_timers if w == window)
    if event:
        timer = event[0]
        reached = [] if record is None else [i.max_event_time_ms for i in record.inputs]
        seen = max((m for m in reached if m is not None), default=None)
        d = 0 if record is None else record.out_of_orderness_ms
        behind = seen is None or (seen < END_OF_INPUT_MS and seen - d - 1 < timer)
        kind = "input_not_ended" if behind and holder is None else "event_time_timer"
        short = "" if watermark == LONG_MIN else f", {times.span(timer - watermark)} short"
        detail = (
            f"the watermark ({times.at(watermark)}) must reach its timer at "
            f"{times.at(timer)}{short}"
        )
        if holder is not None:
            detail += (
                f"; partition {holder.partition!r} holds it (last event time "
                f"{times.at(holder.max_event_time)})"
            )
        return WaitFact(
            kind,
            detail,
            timer=timer,
            watermark=watermark,
            gap=timer - watermark,
            max_event_time=seen,
            holder=holder,
        )
    processing = sorted(t for t, w in state.processing_timers if w == window)
    if processing:
        return WaitFact(
            "processing_time_timer",
            f"the processing-time clock must reach its timer at {times.at(processing[0])}",
            timer=processing[0],
        )
    return WaitFact("no_trigger", "it has no timer and no count: its trigger never fires it")


def _wrapped(
    x: Explanation,
    checkpoint: str,
    batch: int,
    record: BatchRecord | None,
    history_from: int | None,
    notes: list[str],
    window: tuple[int, int] | None,
    replayed: bool = True,
) -> CheckpointExplanation:
    values = {f.name: getattr(x, f.name) for f in fields(x)}
    if window is not None:
        x.window(*window)  # refuses a window not of the key's
        values["focus_window"] = tuple(window)
    return CheckpointExplanation(
        **values,
        checkpoint=checkpoint,
        batch_id=batch,
        next_watermark=None if record is None else record.ended_ms,
        partitions_after=() if record is None else partition_states(record),
        history_from=history_from,
        notes=tuple(notes),
        replayed=replayed,
    )


def _header(x: CheckpointExplanation) -> str:
    times = TimeText(x.time_zone)
    read = (
        f"its elements from micro-batch {x.history_from} on read again from the source"
        if x.history_from is not None
        else "the state it holds"
    )
    lines = [f"Checkpoint {x.checkpoint}, micro-batch {x.batch_id}: {read}."]
    if x.partitions:
        lines.append(f"Partitions as micro-batch {x.batch_id} ran: {_shares(x.partitions, times)}.")
    if x.next_watermark is not None and x.next_watermark > x.watermark:
        after = f" (partitions: {_shares(x.partitions_after, times)})" if x.partitions_after else ""
        lines.append(
            f"After micro-batch {x.batch_id} the watermark is {times.at(x.next_watermark)}"
            f"{after}: the next micro-batch runs under it."
        )
    return "\n".join(lines) + "\n"


def _shares(partitions: tuple[PartitionState, ...], times: TimeText) -> str:
    return "; ".join(
        f"{p.partition!r}: last event time {times.at(p.max_event_time)}"
        f"{'' if p.last_batch is None else f' (micro-batch {p.last_batch})'}, "
        f"watermark {times.at(p.watermark)}"
        for p in partitions
    )
