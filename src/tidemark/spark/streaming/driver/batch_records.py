"""What each micro-batch of a query ended with, recorded beside its checkpoint.

Spark's checkpoint keeps the query's one watermark (in ``offsets/<batch>``, on Spark's
clock), never each input's: with per-partition watermarks
(``partition_column``/``partitions``, ``docs/streaming.md``, "Per-partition watermarks")
Spark holds one watermark per partition in the driver's memory only. To answer "why did
this window (not) fire?" from a checkpoint (:mod:`tidemark.spark.explain_stream`,
``docs/why-no-result.md``) tidemark records, per micro-batch, in
``tidemark-batches/<batch id>`` beside the checkpoint, one JSON object:

- ``batch``, ``run`` (Spark's run id: a restart starts a new run);
- ``ran_under_ms`` and ``ended_ms``: the engine's watermark (not Spark's shifted clock,
  :mod:`~..worker.clock`) the micro-batch ran under and the one it ended with (null:
  none yet, ``Long.MIN_VALUE``);
- ``out_of_orderness_ms``, ``idleness_ms`` (the strategy's, or null), ``partition_column``;
- ``inputs``: per input (a partition, or the stream's one input, partition null) its
  largest event time in the micro-batch and since the run started (Spark counts an
  input again from its first row after a restart), its watermark (that less the
  out-of-orderness and 1) and the last micro-batch that brought it rows;
- ``figures``: tidemark's observed figures of the micro-batch (``docs/watching.md``).

How: each input observes the largest event time of its rows (``DataFrame.observe``,
:func:`observe_input`; one ``max`` in the scan Spark runs anyway), and a
``StreamingQueryListener`` (one per session, :func:`record_batches`) writes a record
when a micro-batch's progress arrives, on Spark's listener thread, not in the query's
path. The watermark is then computed as Spark does (``WatermarkTracker``: each input
``max - delay`` once it has rows, the minimum over inputs, never moving back). Each
record is written atomically (a hidden file renamed into place) on the checkpoint's file
system, and only the last ``spark.sql.streaming.minBatchesToRetain`` records are kept,
as Spark keeps its own logs. A query whose listener event was lost (the driver killed
between a micro-batch and its progress) lacks that micro-batch's record; readers say so.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from tidemark.spark.protocol.figures import metrics_of
from tidemark.spark.runtime.session import is_connect
from tidemark.spark.streaming.driver.checkpoint import _local_directory
from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS
from tidemark.time import LONG_MAX, LONG_MIN

__all__ = [
    "RECORDS_DIR",
    "RETAIN_CONF",
    "WatermarkSetup",
    "watermark_setup",
    "InputRecord",
    "BatchRecord",
    "observe_input",
    "input_observation",
    "observed_input",
    "record_batches",
    "BatchRecording",
    "read_batch_records",
    "BatchRecorder",
]

RECORDS_DIR = "tidemark-batches"
"""Beside the checkpoint: one record per micro-batch (this module's docstring)."""

RETAIN_CONF = "spark.sql.streaming.minBatchesToRetain"
_DEFAULT_RETAIN = 100


@dataclass(frozen=True)
class WatermarkSetup:
    """How a query's watermark is made: what its records need to compute it.

    Attributes
    ----------
    out_of_orderness_ms : int
        The strategy's bound: an input's watermark is its largest event time less this
        and 1.
    partition_column : str or None
        The column holding each row's partition (None: the stream is one input).
    partitions : tuple
        The partitions, one input each, in the order of the inputs (``(None,)``: one).
    idleness_ms : int or None
        The strategy's idleness (on a stream it moves no watermark, ``docs/kafka.md``).
    """

    out_of_orderness_ms: int
    partition_column: str | None = None
    partitions: tuple[Any, ...] = (None,)
    idleness_ms: int | None = None


def watermark_setup(
    upstream: Any, time_mode: Any, out_of_orderness_ms: int | None, partitions: Any
) -> WatermarkSetup | None:
    """How the watermark of a window is made: its ``upstream`` window's (a chain's
    watermark is its source's), else its source's (None without event time);
    ``partitions``: the source's :class:`~tidemark.spark.plan.SourcePartitions`, if any.
    The strategy's idleness is added by the pipeline (it moves no watermark here)."""
    if upstream is not None:
        return upstream.watermarks
    if not time_mode.event_time or out_of_orderness_ms is None:
        return None
    if partitions is None or partitions.values is None:
        return WatermarkSetup(out_of_orderness_ms)
    return WatermarkSetup(out_of_orderness_ms, partitions.column, tuple(partitions.values))


def input_observation(index: int) -> str:
    """The prefix of the observation of input ``index``'s largest event time in a
    micro-batch (each window's observation adds a token of its own, so that Spark,
    which refuses two observations of one name in a plan, lets a user union two
    windows' outputs and tidemark refuse that query naming the fix).

    >>> input_observation(2)
    'tidemark_input2_'
    """
    return f"tidemark_input{index}_"


def observe_input(rows: Any, index: int, timestamp_ms: Any) -> Any:
    """``rows`` (an input of the window, before its watermark) observing the largest
    ``timestamp_ms`` of each micro-batch as :func:`input_observation` and a token. A
    maximum, so that Spark before 4.3, which sums a batch's observations over each
    read of it, reports it unchanged."""
    name = input_observation(index) + uuid.uuid4().hex[:12]
    return rows.observe(name, F.max(timestamp_ms).alias("max_ts"))


def observed_input(progress: Any, index: int) -> dict[str, Any]:
    """Input ``index``'s observation in a query's progress (a query runs one window, so
    one name has the prefix), as a dict; empty where it has none.

    >>> observed_input({"observedMetrics": {"tidemark_input0_ab12": {"max_ts": 7}}}, 0)
    {'max_ts': 7}
    """
    if isinstance(progress, Mapping):
        observed = progress.get("observedMetrics") or {}
    else:
        observed = getattr(progress, "observedMetrics", None) or {}
    prefix = input_observation(index)
    name = next((n for n in observed if n.startswith(prefix)), None)
    return (metrics_of(progress, name) or {}) if name is not None else {}


@dataclass
class InputRecord:
    """One input's share of the watermark after a micro-batch."""

    partition: Any
    batch_max_ms: int | None
    max_event_time_ms: int | None
    watermark_ms: int
    last_batch: int | None

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "watermark_ms": _nullable(self.watermark_ms)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InputRecord:
        return cls(
            data["partition"],
            data["batch_max_ms"],
            data["max_event_time_ms"],
            _clock(data["watermark_ms"]),
            data["last_batch"],
        )


@dataclass
class BatchRecord:
    """One micro-batch's record (the module docstring says what each field holds)."""

    batch: int
    run: str
    ran_under_ms: int
    ended_ms: int
    out_of_orderness_ms: int
    idleness_ms: int | None
    partition_column: str | None
    inputs: list[InputRecord]
    figures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        data = {**vars(self), "inputs": [i.to_json() for i in self.inputs]}
        data["ran_under_ms"], data["ended_ms"] = (
            _nullable(self.ran_under_ms),
            _nullable(self.ended_ms),
        )
        return json.dumps(data, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> BatchRecord:
        data = json.loads(text)
        data["inputs"] = [InputRecord.from_json(i) for i in data["inputs"]]
        data["ran_under_ms"] = _clock(data["ran_under_ms"])
        data["ended_ms"] = _clock(data["ended_ms"])
        return cls(**data)

    def holding(self) -> InputRecord | None:
        """The input whose watermark is the minimum (the first of equals); None with one
        input, which holds nothing back."""
        if len(self.inputs) < 2:
            return None
        return min(self.inputs, key=lambda i: i.watermark_ms)


def _nullable(ms: int) -> int | None:
    return None if ms == LONG_MIN else ms


def _clock(ms: int | None) -> int:
    return LONG_MIN if ms is None else int(ms)


def input_watermark(max_event_time_ms: int | None, out_of_orderness_ms: int) -> int:
    """An input's watermark: none before its first row, the end of input after an
    end-of-input row.

    >>> input_watermark(10_000, 2_000), input_watermark(None, 2_000) == LONG_MIN
    (7999, True)
    """
    if max_event_time_ms is None:
        return LONG_MIN
    if max_event_time_ms >= END_OF_INPUT_MS:
        return LONG_MAX
    return max_event_time_ms - out_of_orderness_ms - 1


class BatchRecorder:
    """The records of one run of one query: each input's largest event time since the
    run started, and the watermark, carried from one micro-batch's progress to the next."""

    def __init__(self, spark: Any, checkpoint: str, setup: WatermarkSetup):
        self._spark, self._checkpoint, self._setup = spark, checkpoint, setup
        self._retain = int(spark.conf.get(RETAIN_CONF, str(_DEFAULT_RETAIN)))
        self._files = _RecordFiles(spark, f"{checkpoint.rstrip('/')}/{RECORDS_DIR}")
        last = self._files.last()
        self._watermark = LONG_MIN if last is None else last.ended_ms
        self._max: list[int | None] = [None] * len(setup.partitions)
        self._last_batch: list[int | None] = [None] * len(setup.partitions)
        if last is not None and len(last.inputs) == len(setup.partitions):
            self._last_batch = [i.last_batch for i in last.inputs]
        self._pruned = False

    def on_progress(self, progress: Any) -> None:
        """Record the micro-batch ``progress`` reports; drop the record that falls out of
        the retained ones (at a run's first record, every older one)."""
        batch = int(progress.batchId)
        record = self.record_of(batch, str(progress.runId), progress)
        self._files.write(batch, record.to_json())
        if self._pruned:
            self._files.remove(batch - self._retain)
        else:
            self._files.prune(batch - self._retain + 1)
            self._pruned = True

    def record_of(self, batch: int, run: str, progress: Any) -> BatchRecord:
        setup = self._setup
        ran_under = self._watermark
        inputs = []
        for index, partition in enumerate(setup.partitions):
            observed = observed_input(progress, index)
            batch_max = observed.get("max_ts")
            if batch_max is not None:
                previous = self._max[index]
                self._max[index] = batch_max if previous is None else max(previous, batch_max)
                self._last_batch[index] = batch
            mark = input_watermark(self._max[index], setup.out_of_orderness_ms)
            inputs.append(
                InputRecord(partition, batch_max, self._max[index], mark, self._last_batch[index])
            )
        self._watermark = max(self._watermark, min(i.watermark_ms for i in inputs))
        return BatchRecord(
            batch,
            run,
            ran_under,
            self._watermark,
            setup.out_of_orderness_ms,
            setup.idleness_ms,
            setup.partition_column,
            inputs,
            metrics_of(progress) or {},
        )


class _RecordFiles:
    """The records' directory on the checkpoint's file system: the driver's disk
    directly where it is local (:func:`~.checkpoint._local_directory`), else Hadoop's
    ``FileSystem`` of the checkpoint (a hidden file renamed into place)."""

    def __init__(self, spark: Any, path: str):
        self._local = _local_directory(spark, path)
        self._hadoop = None if self._local is not None else _HadoopDirectory(spark, path)

    def write(self, batch: int, text: str) -> None:
        if self._local is None:
            assert self._hadoop is not None
            self._hadoop.write(str(batch), text)
            return
        os.makedirs(self._local, exist_ok=True)
        staged = os.path.join(self._local, f".{batch}.{uuid.uuid4().hex}.tmp")
        with open(staged, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(staged, os.path.join(self._local, str(batch)))

    def prune(self, below: int) -> None:
        """Remove the records of batches before ``below`` (the one just out of the window
        at each write; all of them at a run's first write, :meth:`batches`)."""
        for batch in self.batches():
            if batch < below:
                self.remove(batch)

    def remove(self, batch: int) -> None:
        if self._local is None:
            assert self._hadoop is not None
            self._hadoop.remove(str(batch))
        else:
            try:
                os.remove(os.path.join(self._local, str(batch)))
            except FileNotFoundError:
                pass

    def batches(self) -> list[int]:
        if self._local is not None:
            names = os.listdir(self._local) if os.path.isdir(self._local) else []
        else:
            assert self._hadoop is not None
            names = self._hadoop.names()
        return sorted(int(name) for name in names if name.isdigit())

    def read(self, batch: int) -> BatchRecord | None:
        if self._local is None:
            assert self._hadoop is not None
            text = self._hadoop.read(str(batch))
        else:
            try:
                with open(os.path.join(self._local, str(batch)), encoding="utf-8") as file:
                    text = file.read()
            except FileNotFoundError:
                text = None
        return None if text is None else BatchRecord.from_json(text)

    def last(self) -> BatchRecord | None:
        batches = self.batches()
        return self.read(batches[-1]) if batches else None


class _HadoopDirectory:
    """A directory of small files on the checkpoint's Hadoop file system."""

    def __init__(self, spark: Any, path: str):
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._path = jvm.org.apache.hadoop.fs.Path(path)
        self._fs = self._path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())

    def _child(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self._path, name)

    def write(self, name: str, text: str) -> None:
        self._fs.mkdirs(self._path)
        staged = self._child(f".{name}.{uuid.uuid4().hex}.tmp")
        stream = self._fs.create(staged, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        self._fs.delete(self._child(name), False)
        self._fs.rename(staged, self._child(name))

    def remove(self, name: str) -> None:
        self._fs.delete(self._child(name), False)

    def names(self) -> list[str]:
        if not self._fs.exists(self._path):
            return []
        return [str(s.getPath().getName()) for s in self._fs.listStatus(self._path)]

    def read(self, name: str) -> str | None:
        child = self._child(name)
        if not self._fs.exists(child):
            return None
        stream = self._fs.open(child)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()


def read_batch_records(spark: Any, checkpoint: str) -> list[BatchRecord]:
    """The records beside ``checkpoint``, by batch id (none: a query started before
    records were written, or not by ``write_outputs``)."""
    files = _RecordFiles(spark, f"{checkpoint.rstrip('/')}/{RECORDS_DIR}")
    records = [files.read(batch) for batch in files.batches()]
    return [record for record in records if record is not None]


_EARLY = 16
"""Progress events kept per query not yet registered (its first micro-batches may end
before :func:`record_batches` registers it, right after the query started)."""


class _Listener(StreamingQueryListener):
    """The session's listener: hands each progress to the recorder of its query
    (registered by :func:`record_batches`; the events of a query not yet registered
    wait for it), drops a recorder when its query ends."""

    def __init__(self) -> None:
        super().__init__()
        self.recorders: dict[str, BatchRecorder] = {}
        self.early: dict[str, list[Any]] = {}
        self.lock = threading.Lock()

    def register(self, query_id: str, recorder: BatchRecorder) -> None:
        with self.lock:
            self.recorders[query_id] = recorder
            for progress in self.early.pop(query_id, []):
                _record(recorder, progress)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        query_id = str(progress.id)
        with self.lock:
            recorder = self.recorders.get(query_id)
            if recorder is not None:
                _record(recorder, progress)
            elif metrics_of(progress) is not None:  # a tidemark query, maybe not yet registered
                self.early.setdefault(query_id, []).append(progress)
                del self.early[query_id][:-_EARLY]

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        with self.lock:
            self.recorders.pop(str(event.id), None)
            self.early.pop(str(event.id), None)


def _record(recorder: BatchRecorder, progress: Any) -> None:
    try:
        recorder.on_progress(progress)
    except Exception:  # a record lost is said by its readers; the query goes on
        pass


_LISTENERS: weakref.WeakKeyDictionary[Any, _Listener] = weakref.WeakKeyDictionary()


def _listener_of(spark: Any) -> _Listener:
    """The session's listener, added to its ``spark.streams`` once."""
    context = spark.sparkContext
    listener = _LISTENERS.get(context)
    if listener is None:
        listener = _Listener()
        spark.streams.addListener(listener)
        _LISTENERS[context] = listener
        # else a progress event still queued when Python exits finds no Python to call,
        # and Spark logs a Java trace for each
        atexit.register(_remove, spark, listener)
    return listener


def _remove(spark: Any, listener: _Listener) -> None:
    """Let the events already posted reach the listener (a query that just ended posts
    its last progress after it returned), then take it off the session."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(5_000)
    except Exception:  # a bus still busy after 5 s, or private API changed: remove anyway
        pass
    try:
        spark.streams.removeListener(listener)
    except Exception:  # the session is gone already: nothing to remove
        pass


class BatchRecording:
    """Recording of a query about to start on ``checkpoint``: built before the query
    starts (the session's listener is then listening), given the started query by
    :meth:`attach`. A classic session only: over Spark Connect a listener runs in
    another process, and nothing is recorded (an explanation then says so)."""

    def __init__(self, spark: Any, checkpoint: str, setup: WatermarkSetup):
        self._listener = None if is_connect(spark) else _listener_of(spark)
        self._recorder = None if self._listener is None else BatchRecorder(spark, checkpoint, setup)

    def attach(self, query: Any) -> None:
        if self._listener is not None and self._recorder is not None:
            self._listener.register(str(query.id), self._recorder)


def record_batches(spark: Any, checkpoint: str, setup: WatermarkSetup) -> BatchRecording:
    """Record each micro-batch of the query about to start on ``checkpoint`` beside it:
    call before the query starts, then :meth:`BatchRecording.attach` the query."""
    return BatchRecording(spark, checkpoint, setup)
