"""One key's events in a bounded run (BATCH or replay), for "why did this window (not) fire?".

:meth:`result.explain(key=...) <tidemark.spark.api.results.ExplainableResult.explain>` asks the engine
(:func:`tidemark.explain.explain_events`) to replay one key's input as the Spark run fed
it. This module finds that input, without re-implementing any of the run:

- the key's rows are selected in Spark from the mode's own element frame
  (:func:`tidemark.spark.execution.element_frame`: a replay's rows carry the watermark
  its scan stamped on each, over all keys), by the key columns (compared as the worker
  compares keys, :mod:`tidemark.spark.protocol.keys`) or by the key function's encoded key;
- those rows run through the very path of the run (:func:`~.run.run_partitioned`, the
  same :class:`~.worker.BatchDriver` or :class:`~.worker.ReplayDriver`, sort and
  :func:`~.run.engine_spec`) in one Spark task, on an operator that notes each call the
  driver makes: each element, each watermark step (a replay advances through the
  stream's watermarks its timers need), each processing-time advance, and the end of
  the input;
- only those events, one key's, come back to the driver.

So BATCH gives the key's elements in the order BATCH feeds them (time, then the tie
order), then :class:`~tidemark.explain.events.EndOfInput`; a replay gives each element
after the watermark (and arrival time) the stream had when it arrived, the steps in
between that fire timers, the stream's final clocks, then the end. A replay read by
partition (``partition_column``) also reports each partition's share of the watermark at
the end of the stream (:class:`~tidemark.explain.events.PartitionState`).

Supported: every bounded execution (the SQL fast path, the vectorized and the
pre-aggregated ``window_all`` runs are the same as BATCH, and BATCH's events explain
them); replays from a watermark strategy, from recorded watermarks, by partition (with
idleness) and with arrival times driving processing time; ``window_all`` (the key None);
a window over a window's results, the stage asked. Not supported: a streaming result
(its checkpoint is explained by ``tidemark.spark.explain_checkpoint``); BATCH on
processing time (the wall clock is not recorded); the partitions' states at another
moment than the end of the stream.

The guide: ``docs/why-no-result.md`` ("On Spark: BATCH and replay").
"""

from __future__ import annotations

import datetime
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F

from tidemark._engine.spec import OperatorSpec
from tidemark.errors import WindowSpecError
from tidemark.explain import explain_events
from tidemark.explain.events import (
    Element,
    EndOfInput,
    Event,
    PartitionState,
    ProcessingTime,
    Watermark,
)
from tidemark.explain.partitions import partition_states
from tidemark.spark import execution
from tidemark.spark.batch.frames import ElementFrame
from tidemark.spark.batch.run import engine_spec, run_partitioned
from tidemark.spark.batch.worker import BatchDriver, PartitionDriver, ReplayDriver, RunnerConfig
from tidemark.spark.plan import KeySpec, Source, WindowOp
from tidemark.spark.protocol.column_values import arrow_column
from tidemark.spark.protocol.columns import KEY, ORDER, PT, TS, encode_key, with_function_key
from tidemark.spark.protocol.keys import function_key_value, key_normaliser
from tidemark.spark.runtime.surfacing import raising_tidemark_errors
from tidemark.time import LONG_MAX, TimeDomain, exact_int, from_datetime
from tidemark.watermarks import PartitionWatermarks

__all__ = [
    "KeyEvents",
    "key_events",
    "all_key_events",
    "explanation",
    "explained",
    "engine_key",
    "NO_KEY",
]

NO_KEY: Any = object()
"""``explain``'s ``key`` when none is given (right for ``window_all``)."""

_EVENTS_SCHEMA = "key binary, events binary"
_PLAIN = ("StringType", "LongType", "IntegerType", "ShortType", "ByteType", "BooleanType")
_TIMESTAMPS = ("TimestampType", "TimestampNTZType")


@dataclass(frozen=True)
class KeyEvents:
    """What :func:`tidemark.explain.explain_events` is given for one key of a bounded run:
    the spec the run's workers build their operator from, the key (as the engine holds
    it), its events, the mode (``"batch"`` or ``"replay"``), the partitions' shares of
    the watermark and whether idleness is on (a replay read by partition) and the zone
    to show times in."""

    spec: OperatorSpec
    key: Any
    events: list[Event]
    mode: str
    partitions: tuple[PartitionState, ...] = ()
    time_zone: str | None = None
    idleness: bool | None = None  # a replay read by partition: whether idleness is on


def key_events(op: WindowOp, spark: Any, key: Any = NO_KEY) -> KeyEvents:
    """The events of ``key`` in the bounded run of ``op`` (see the module docstring).

    Raises
    ------
    WindowSpecError
        ``op`` reads a stream (its explanation is read from the checkpoint), runs BATCH
        on processing time (the wall clock, which no run records), ``key`` does not fit
        the window's key, or no element of the input has it.
    """
    frame = _checked_frame(op, spark)
    wanted = engine_key(op, key)
    selected = replace(frame, df=_key_rows(frame, op.key, wanted))
    recorded = _recorded(op, selected, spark)
    if not recorded:
        raise _no_such_key(op, frame, key)
    return replace(_around(op, frame, spark), key=wanted, events=recorded[0][1])


def all_key_events(op: WindowOp, spark: Any) -> dict[Any, KeyEvents]:
    """Every key's events in the bounded run of ``op``, from one Spark job (what the
    tests check :func:`key_events` against: each key's events, replayed, give that
    key's share of the run's outputs)."""
    frame = _checked_frame(op, spark)
    recorded = _recorded(op, frame, spark)
    around = _around(op, frame, spark)
    return {key: replace(around, key=key, events=events) for key, events in recorded}


def _around(op: WindowOp, frame: ElementFrame, spark: Any) -> KeyEvents:
    """What every key's events of the run share (no key, no events yet)."""
    source, zone = op.source, _time_zone(op.source, spark)
    spec = engine_spec(op, frame)
    if not frame.replay:
        return KeyEvents(spec, None, [], "batch", time_zone=zone)
    partitions = _partition_states(source, spark)
    idleness = None if not partitions else source.strategy.idleness_ms is not None
    return KeyEvents(spec, None, [], "replay", partitions, zone, idleness)


# ------------------------------------------------------------------ what is explained


def _checked_frame(op: WindowOp, spark: Any) -> ElementFrame:
    """The element frame ``op``'s bounded run reads, after refusing what has no
    recorded answer here."""
    if op.source.streaming:
        raise WindowSpecError(
            "explain() needs a bounded DataFrame's result (BATCH or replay); got one of a "
            "streaming DataFrame, whose windows are explained from the query's checkpoint, "
            "where its micro-batches' watermarks and state are: call "
            "tidemark.spark.explain_checkpoint(spark, checkpoint, key, pipeline=result) "
            "with the location write_outputs started the query with (running or stopped)"
        )
    frame = execution.element_frame(op.upstream, spark)
    if not frame.replay and _uses_processing_time(op):
        raise WindowSpecError(
            f"explain() on a BATCH run whose windows use processing time ({op.assigner!r}, "
            f"trigger {op.trigger!r}): BATCH reads the wall clock as it runs and records "
            "no clock, so no explanation can replay it; replay the input with "
            "from_dataframe(..., order_by=<arrival column>, processing_time=<arrival time "
            "column>) to explain processing time from recorded arrival times (a trigger of "
            "your own on event time only: declare it, timer_domains())"
        )
    return frame


def _uses_processing_time(op: WindowOp) -> bool:
    """Whether a BATCH run of ``op`` depends on the wall clock: its windows or its
    trigger (as it declares; an undeclared trigger may) use processing time."""
    uses = TimeDomain.PROCESSING_TIME in op.assigner.timer_domains()
    trigger = op.trigger
    return uses or (trigger is not None and TimeDomain.PROCESSING_TIME in trigger.timer_domains())


def engine_key(op: WindowOp, key: Any) -> Any:
    """``key`` as the run's engine holds it: the key columns' value (a tuple for several),
    normalised as the worker normalises keys (one NaN key, ``-0.0`` is ``0.0``, a
    timestamp as a naive UTC ``datetime``), or a key function's value normalised the
    same way; None for ``window_all``.

    Raises
    ------
    WindowSpecError
        A key for ``window_all``, none for a keyed window, or not one value per key column.
    """
    spec = op.key
    if spec is None:
        if key is not NO_KEY and key is not None:
            raise WindowSpecError(
                f"`key` must be left out for window_all (its one key is None); got key={key!r}"
            )
        return None
    if key is NO_KEY:
        raise WindowSpecError(
            f"`key` is needed: the window is keyed by {spec.describe()}; give one key's value, "
            "e.g. result.explain(key='ann')"
        )
    if spec.function is not None:
        return function_key_value(key)
    return _column_key(op, spec, key)


def _column_key(op: WindowOp, spec: KeySpec, key: Any) -> Any:
    schema = op.upstream.schema
    names = [type(schema[c].dataType).__name__ for c in spec.columns]
    values = (key,) if len(spec.columns) == 1 else key
    if len(spec.columns) > 1 and (not isinstance(key, (tuple, list)) or len(key) != len(names)):
        raise WindowSpecError(
            f"`key` must be a tuple of {len(names)} values, one per key column "
            f"{list(spec.columns)}; got key={key!r}"
        )
    values = tuple(_fitted(c, n, v) for c, n, v in zip(spec.columns, names, values))
    normalise = key_normaliser(names)
    plain = values[0] if len(values) == 1 else values
    return plain if normalise is None else normalise(plain)


_PYTHON_TYPES = {"StringType": (str,), "BooleanType": (bool,)}


def _fitted(column: str, kind: str, value: Any) -> Any:
    """A key column's value as the engine's Rows hold it (a timestamp as a naive UTC
    ``datetime``, an integer as an int). One of another type than a plain column's is
    refused: Spark's comparison would cast it (``'1'`` equal to ``1``) where the
    engine's keys differ."""
    if kind in _TIMESTAMPS and isinstance(value, datetime.datetime) and value.tzinfo:
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    if kind not in _PLAIN:
        return value
    fits = _PYTHON_TYPES.get(kind)
    fitted = (value if isinstance(value, fits) else None) if fits else exact_int(value)
    if fitted is None:
        raise WindowSpecError(
            f"`key` must hold the values of key column {column!r} ({kind[:-4].lower()}) "
            f"as the window's functions see them; got {value!r} ({type(value).__name__})"
        )
    return fitted


# ------------------------------------------------------------------ the key's rows


def _key_rows(frame: ElementFrame, key: KeySpec | None, wanted: Any) -> Any:
    """``frame``'s rows of the key ``wanted``, selected in Spark."""
    df = frame.df
    if key is None:
        return df
    if key.function is not None:
        names = frame.value_schema.fieldNames()
        keyed = with_function_key(df, names, key.function)
        return keyed.where(F.col(KEY) == F.lit(encode_key(wanted))).drop(KEY)
    values = (wanted,) if len(key.columns) == 1 else wanted
    types = [type(df.schema[c].dataType).__name__ for c in key.columns]
    for column, value, kind in zip(key.columns, values, types):
        if kind in _PLAIN:  # Spark's equality is the key's here: filter before Python
            df = df.where(F.col(f"`{column}`") == F.lit(value))
    if all(kind in _PLAIN for kind in types):
        return df
    return df.mapInArrow(_KeyMatch(list(key.columns), types, wanted), df.schema)


class _KeyMatch:
    """``mapInArrow`` function: the rows whose key, read and normalised as the worker
    reads it (:meth:`~.worker.PartitionDriver._keys`), is ``wanted``."""

    def __init__(self, columns: list[str], types: list[str], wanted: Any):
        self.columns, self.types, self.wanted = columns, types, wanted

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        normalise = key_normaliser(self.types)
        for batch in batches:
            values = [arrow_column(batch, c) for c in self.columns]
            keys = values[0] if len(values) == 1 else list(zip(*values))
            if normalise is not None:
                keys = [None if k is None else normalise(k) for k in keys]
            yield batch.filter(pa.array([k == self.wanted for k in keys], pa.bool_()))


# ------------------------------------------------------------------ recording the run


def _recorded(op: WindowOp, frame: ElementFrame, spark: Any) -> list[tuple[Any, list[Event]]]:
    """``(key, events)`` of each key of ``frame``, as the run's driver feeds them."""
    driver = ReplayDriver if frame.replay else BatchDriver
    recording = run_partitioned(op, frame, spark, _Recording.of(driver), _EVENTS_SCHEMA)
    with raising_tidemark_errors():
        rows = recording.collect()
    hidden = {*(op.key.columns if op.key is not None else ()), op.source.timestamp}
    return [(pickle.loads(r.key), _labelled(pickle.loads(r.events), hidden)) for r in rows]


def _labelled(events: list[Event], hidden: set[Any]) -> list[Event]:
    """``events`` with each element named by its fields other than ``hidden`` (the key
    columns and the event-time column, which the answer shows already)."""
    return [_label(e, hidden) if isinstance(e, Element) else e for e in events]


def _label(element: Element, hidden: set[Any]) -> Element:
    value = element.value
    names = getattr(value, "__fields__", None)
    if not names:
        return element
    shown = [f"{name}={v!r}" for name, v in zip(names, value) if name not in hidden]
    return replace(element, label=" ".join(shown) or None)


@dataclass(frozen=True)
class _RecordingConfig(RunnerConfig):
    """The run's config, whose operator notes the driver's calls (:class:`_Recorder`)."""

    recorders: list[_Recorder] = field(default_factory=list)

    def make_operator(self) -> Any:
        recorder = _Recorder(super().make_operator())
        self.recorders.append(recorder)
        return recorder


class _Recording:
    """``mapInArrow`` function: a driver of the run over its partition, each key's
    events (pickled) its output instead of the run's rows."""

    def __init__(self, driver: type[PartitionDriver], config: RunnerConfig):
        values = {name: getattr(config, name) for name in config.__dataclass_fields__}
        self.config = _RecordingConfig(**values)
        self.driver = driver(self.config)

    @classmethod
    def of(cls, driver: type[PartitionDriver]) -> Callable[[RunnerConfig], _Recording]:
        """The driver factory :func:`~.run.run_partitioned` takes."""
        return lambda config: cls(driver, config)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        self.config.recorders.clear()  # (one task's)
        for _ in self.driver(batches):
            pass  # the run's own rows: the events are what is asked
        keys, events = [], []
        for recorder in self.config.recorders:
            for key, noted in recorder.finished:
                keys.append(encode_key(key))
                events.append(pickle.dumps(noted, protocol=5))
        yield pa.RecordBatch.from_arrays(
            [pa.array(keys, pa.binary()), pa.array(events, pa.binary())], names=["key", "events"]
        )


class _Recorder:
    """Stands for the operator a driver feeds, noting each call as an event.

    The driver's calls are the events: ``process_element(s)`` an :class:`Element` each,
    ``process_watermark`` a :class:`Watermark` when it advances (``LONG_MAX``, the end
    of the input, :class:`EndOfInput`), a processing-time advance (a replay's, through
    the timer service) a :class:`ProcessingTime`. ``evict_key`` ends a key's events.
    Everything else is the operator's own."""

    def __init__(self, op: Any):
        self._op = op
        self._events: list[Event] = []
        self.finished: list[tuple[Any, list[Event]]] = []
        self.processing_time_timers = _RecordedTimers(op.processing_time_timers, self._note)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)

    def _note(self, event: Event) -> None:
        self._events.append(event)

    def process_element(self, key: Any, value: Any, timestamp: Any) -> Any:
        self._note(Element(value, timestamp))
        return self._op.process_element(key, value, timestamp)

    def process_elements(self, key: Any, values: list[Any], timestamps: list[Any]) -> Any:
        self._events.extend(map(Element, values, timestamps))
        return self._op.process_elements(key, values, timestamps)

    def process_watermark(self, watermark: int) -> None:
        if watermark == LONG_MAX:
            self._note(EndOfInput())
        elif watermark > self._op.current_watermark:
            self._note(Watermark(watermark))
        self._op.process_watermark(watermark)

    def evict_key(self, key: Any) -> Any:
        self.finished.append((key, self._events))
        self._events = []
        return self._op.evict_key(key)


class _RecordedTimers:
    """A timer service whose advances are noted as :class:`ProcessingTime` events (a
    replay advances processing time through it, a due timer at a time)."""

    def __init__(self, timers: Any, note: Callable[[Event], None]):
        self._timers, self._note = timers, note

    def __getattr__(self, name: str) -> Any:
        return getattr(self._timers, name)

    def begin_advance(self, time: int) -> bool:
        if time > self._timers.current_time:
            self._note(ProcessingTime(time))
        return bool(self._timers.begin_advance(time))


# ------------------------------------------------------------------ around the events


def _partition_states(source: Source, spark: Any) -> tuple[PartitionState, ...]:
    """Each source partition's share of the watermark the replay ended with (none for a
    stream read as one input). That watermark is the one in force at the last arrival
    (the replay runs per-partition watermarks as recorded ones), so each partition is
    shown as it stood then, judged by :class:`~tidemark.watermarks.PartitionWatermarks`
    as the replay's scan judged it: its largest timestamp, its own watermark, and
    whether idleness had left it out."""
    if source.partitions is None:
        return ()
    df = execution.element_frame(source, spark).df
    arrival = F.col(PT) if PT in df.columns else F.lit(None).cast("long")
    with raising_tidemark_errors():
        ends = df.agg(
            F.min_by(arrival, ORDER).alias("first"),
            F.max_by(arrival, ORDER).alias("last"),
            F.max(ORDER).alias("order"),
        ).first()
        column = F.col(f"`{source.partitions.column}`")
        before = df.where(F.col(ORDER) < F.lit(ends.order)).groupBy(column.alias("p"))
        rows = before.agg(F.max(TS).alias("ts"), F.max(arrival).alias("at")).collect()
    return _judged(source, {r.p: r for r in rows}, ends.first, ends.last)


def _judged(
    source: Source, found: dict[Any, Any], first: int | None, last: int | None
) -> tuple[PartitionState, ...]:
    """The partitions' states (:func:`tidemark.explain.partition_states`) from each
    one's largest timestamp and last arrival (``found``), the stream's first arrival and
    the arrival they are judged at."""
    assert source.partitions is not None
    values = source.partitions.values or tuple(sorted(found, key=repr))
    watermarks = PartitionWatermarks(source.strategy, values)
    watermarks.watermark_at(first)  # the stream's first arrival, where idleness counts from
    for partition, row in found.items():
        watermarks.on_event(partition, row.ts, row.at)
    return tuple(partition_states(watermarks, last))


def _time_zone(source: Source, spark: Any) -> str | None:
    """The zone to show event times in: the session's for a zoned timestamp column,
    UTC for a wall clock read as UTC (``TimestampNTZ``, a date, a string), none (plain
    milliseconds) for a long column or a timestamp assigner."""
    if source.timestamp is None or source.timestamp not in source.schema.fieldNames():
        return None
    kind = type(source.schema[source.timestamp].dataType).__name__
    if kind == "TimestampType":
        return str(spark.conf.get("spark.sql.session.timeZone"))
    return "UTC" if kind in ("TimestampNTZType", "DateType", "StringType") else None


def _no_such_key(op: WindowOp, frame: ElementFrame, key: Any) -> WindowSpecError:
    """The refusal of a key no element has, naming a few keys that are there."""
    spec = op.key
    if spec is None:  # window_all's one key has every element: there are none
        raise WindowSpecError(
            "explain() needs an element to explain: this window_all's input is empty"
        )
    df = frame.df
    if spec.function is not None:
        df = with_function_key(df, frame.value_schema.fieldNames(), spec.function)
        found = [pickle.loads(r[0]) for r in df.select(KEY).distinct().limit(5).collect()]
    else:
        picked = df.select(*[F.col(f"`{c}`") for c in spec.columns]).distinct().limit(5)
        found = [r[0] if len(r) == 1 else tuple(r) for r in picked.collect()]
    return WindowSpecError(
        f"`key` {key!r} ({type(key).__name__}) is the key of no element of this window's "
        f"input (keyed by {spec.describe()}); keys there include {found}: give one of them, "
        "with the type the window's functions see"
    )


# ------------------------------------------------------------------ the question


def explanation(
    op: WindowOp,
    spark: Any,
    key: Any = NO_KEY,
    window: Any = None,
    timestamp: Any = None,
    time_range: Any = None,
) -> Any:
    """:meth:`~tidemark.spark.api.streams.WindowResultStream.explain`: the engine's answer
    (:func:`tidemark.explain.explain_events`) for ``key``'s events in the bounded run
    of ``op``; ``window``, ``timestamp`` and ``time_range`` narrow the question (int ms
    or ``datetime``; a naive one is UTC)."""
    window, time_range = _interval(window, "window"), _interval(time_range, "time_range")
    timestamp = None if timestamp is None else _instant(timestamp, "timestamp")
    found = key_events(op, spark, key)
    return explained(found, window=window, timestamp=timestamp, time_range=time_range)


def explained(found: KeyEvents, **question: Any) -> Any:
    """The engine's explanation (:func:`tidemark.explain.explain_events`) of ``found``;
    ``question``: its ``window``, ``timestamp`` or ``time_range``."""
    return explain_events(
        found.spec,
        found.key,
        found.events,
        mode=found.mode,
        partitions=found.partitions,
        time_zone=found.time_zone,
        idleness=found.idleness,
        **question,
    )


def _interval(value: Any, name: str) -> tuple[int, int] | None:
    """``(start, end)`` in int ms of a window or time range given as two instants."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise WindowSpecError(
            f"`{name}` must be (start, end), half-open, in int ms or datetimes; got {name}={value!r}"
        )
    return _instant(value[0], name), _instant(value[1], name)


def _instant(value: Any, name: str) -> int:
    """An instant given as int ms or a ``datetime`` (naive: UTC), as int ms."""
    if isinstance(value, datetime.datetime):
        return from_datetime(value)
    millis = exact_int(value)
    if millis is None:
        raise WindowSpecError(
            f"`{name}` must be int milliseconds or a datetime; got {value!r} "
            f"({type(value).__name__})"
        )
    return millis
