"""What a streaming query keeps beside its checkpoint, and the restarts it refuses.

Spark's checkpoint holds the state tidemark wrote, but not what that state means. So two
small files sit beside the checkpoint's own ``offsets/`` and ``state/``, written at the
query's first start and compared at every restart, before the query starts:

- ``tidemark-max-parallelism``: the number of key groups (:mod:`.keygroups`): a group's
  state lives under its slot, and another number would find little of it;
- ``tidemark-pipeline``: what each window's state depends on (:func:`describe_window`:
  the assigner, the trigger, the evictor, the allowed lateness, the kind of function,
  an aggregate function's class and accumulator type, under a Dataflow trigger the
  accumulation mode, in RETRACTING mode the output schema (the state keeps the last
  results, to retract them), the key and value columns with their types, the time
  mode). A restart with a changed window would read state built for another one (a
  10-minute window's contents as a 20-minute one's, discarding panes' state as
  accumulating ones', sums as maxima, retractions in the old schema), so it is
  refused, naming what changed;
- ``tidemark-spark-clock``: how far Spark's event-time clock runs ahead of the engine's
  (:mod:`~..worker.clock`): Spark's watermark and the timers in the state are on that
  clock. A checkpoint started before this file existed ran 2**50 ms ahead and keeps
  doing so.
- ``tidemark-state-layout``: how the key groups' state is kept (:mod:`~..worker.deltas`):
  ``row`` (one row per group) or ``deltas`` (a base and versioned deltas, in another
  Spark operator). A checkpoint started before this file existed is in the row layout
  and keeps it; asking for the other layout on a checkpoint is refused, naming the fix.

A checkpoint written before the pipeline file existed gets it at its next start; one
written before a field was described (:data:`LATER_FIELDS`) is checked without it and
gains it. Each
file is text, as Spark writes it: on a classic session read and written with the
checkpoint's Hadoop file system (on any file system Spark writes checkpoints to), or,
where that is the driver's local disk, directly by the driver's Python (Hadoop's local
file system starts a ``chmod`` process per file and directory it creates without its
native library, tens of milliseconds a record); over Spark Connect, which has no JVM on
the client, with a small Spark job.
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import types
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException

from tidemark._engine.spec import OperatorSpec
from tidemark.errors import WindowSpecError
from tidemark.panes import AccumulationMode
from tidemark.spark.runtime.confs import STATE_CACHE_KEYS, STATE_COMPACT_BYTES, STATE_LAYOUT
from tidemark.spark.runtime.session import is_connect
from tidemark.spark.streaming.worker.clock import SPARK_OFFSET_MS
from tidemark.spark.streaming.worker.state import parallelism_changed
from tidemark.spark.streaming.worker.variables import DELTAS, ROW, StateLayout

__all__ = [
    "CheckpointRecords",
    "read_records",
    "GROUPS_FILE",
    "PIPELINE_FILE",
    "check_checkpoint",
    "check_checkpoint_groups",
    "checkpoint_clock",
    "check_checkpoint_clock",
    "describe",
    "describe_window",
    "LATER_FIELDS",
    "results_kept",
    "LAYOUT_CONF",
    "state_layout",
    "check_checkpoint_layout",
    "read_record",
    "create_record",
    "qualified",
]

GROUPS_FILE = "tidemark-max-parallelism"
"""Beside the checkpoint's ``offsets/`` and ``state/``: the query's number of key groups."""

PIPELINE_FILE = "tidemark-pipeline"
"""Beside the checkpoint: what the state of each window of the query depends on (JSON)."""

CLOCK_FILE = "tidemark-spark-clock"
"""Beside the checkpoint: the offset of Spark's event-time clock, ms (:mod:`.clock`)."""

LAYOUT_FILE = "tidemark-state-layout"
"""Beside the checkpoint: the state layout, ``row`` or ``deltas`` (:mod:`~..worker.deltas`)."""

LAYOUT_CONF = STATE_LAYOUT.name
"""The state layout of a query's first start (``row`` or ``deltas``); a restart keeps its
checkpoint's, and refuses another one asked for here."""
CACHE_KEYS_CONF = STATE_CACHE_KEYS.name
COMPACT_BYTES_CONF = STATE_COMPACT_BYTES.name
DEFAULT_LAYOUT = DELTAS
"""The layout of a new checkpoint when the session asks for none: the one whose cost
follows the keys a micro-batch touches (a checkpoint without a layout record, written
before layouts were, stays in the row layout)."""
ONE_KEY_LAYOUT = ROW
"""The same for a window of one key (a ``window_all``): its key is its whole state,
written whole at every call in either layout, and the row layout's operator starts
without a Python process on the driver and runs on any state store."""

Pipeline = tuple[dict[str, str], ...]
"""One description per window of a query (a chain's in order), see :func:`describe_window`."""


@dataclass(frozen=True)
class CheckpointRecords:
    """What a checkpoint recorded beside it, read once (:func:`read_records`) when the
    window of the query that will start on it is built: the window is decided from it
    (its key groups, Spark's clock, its state layout), and the query's start compares
    the window with it (:func:`check_checkpoint_clock`, :func:`check_checkpoint_layout`,
    :func:`check_checkpoint`), recording what is missing.

    Attributes
    ----------
    checkpoint : str
        The checkpoint location.
    groups : int or None
        Its number of key groups; None before its first start.
    recorded_clock : int or None
        The offset of Spark's event-time clock as recorded (None: no record; see
        :attr:`clock`).
    recorded_layout : str or None
        The state layout as recorded (None: no record; see :attr:`layout`).
    pipeline : tuple of dict, or None
        What each window's state depends on (:func:`describe_window`); None: no record.
    """

    checkpoint: str
    groups: int | None
    recorded_clock: int | None
    recorded_layout: str | None
    pipeline: Pipeline | None

    @property
    def started(self) -> bool:
        """Whether a query started on the checkpoint (it recorded its key groups)."""
        return self.groups is not None

    @property
    def clock(self) -> int | None:
        """The offset of Spark's event-time clock the checkpoint's query runs with: the
        recorded one, else :data:`~.clock.SPARK_OFFSET_MS` for a query started before
        it was recorded; None before a first start."""
        if self.recorded_clock is not None:
            return self.recorded_clock
        return SPARK_OFFSET_MS if self.started else None

    @property
    def layout(self) -> str | None:
        """The state layout the checkpoint's query runs with: the recorded one, else the
        row layout for a query started before it was recorded; None before a first
        start."""
        if self.recorded_layout is not None:
            return self.recorded_layout
        return ROW if self.started else None


def read_records(spark: Any, checkpoint: str) -> CheckpointRecords:
    """The records beside ``checkpoint``, each read once."""
    groups = _read_lines(spark, _beside(checkpoint, GROUPS_FILE))
    clock = _read_lines(spark, _beside(checkpoint, CLOCK_FILE))
    layout = _read_lines(spark, _beside(checkpoint, LAYOUT_FILE))
    pipeline = _read_lines(spark, _beside(checkpoint, PIPELINE_FILE))
    return CheckpointRecords(
        checkpoint,
        int(groups[0]) if groups else None,
        int(clock[0]) if clock else None,
        layout[0].strip() if layout else None,
        tuple(json.loads(pipeline[0])) if pipeline else None,
    )


def check_checkpoint(
    spark: Any, records: CheckpointRecords, groups: int, pipeline: Pipeline
) -> None:
    """Refuse to start a query on the checkpoint of ``records`` with another number of
    key groups or another pipeline than it first started with; record both at a first
    start."""
    check_checkpoint_groups(spark, records, groups)
    path = _beside(records.checkpoint, PIPELINE_FILE)
    stored = records.pipeline
    if stored is None:
        _write_line(spark, path, json.dumps(list(pipeline), sort_keys=True))
        return
    changes = _changes(stored, pipeline)
    if changes:
        raise WindowSpecError(
            f"the pipeline must stay what the checkpoint {records.checkpoint!r} was started "
            f"with: its state was built for that one, and {'; '.join(changes)}. Restart with "
            "the pipeline the checkpoint was started with, or start a new checkpoint"
        )
    if stored != tuple(pipeline):  # written before a field was described: add it now
        _write_line(spark, path, json.dumps(list(pipeline), sort_keys=True))


def check_checkpoint_groups(spark: Any, records: CheckpointRecords, groups: int) -> None:
    """Refuse to start a query on the checkpoint of ``records`` with another number of
    key groups than it first started with; record the number at a first start."""
    if records.groups is None:
        _write_line(spark, _beside(records.checkpoint, GROUPS_FILE), str(groups))
        return
    if records.groups != groups:
        raise parallelism_changed(records.groups, groups, f"the checkpoint {records.checkpoint!r}")


def checkpoint_clock(records: CheckpointRecords, shift: bool | None) -> int:
    """The offset a query on the checkpoint of ``records`` runs with: the checkpoint's;
    at a first start :data:`~.clock.SPARK_OFFSET_MS` when ``shift``, else 0.

    Raises
    ------
    WindowSpecError
        ``shift`` was given and asks for the other clock than the checkpoint's.
    """
    wanted = None if shift is None else (SPARK_OFFSET_MS if shift else 0)
    stored = records.clock
    if stored is None:
        return wanted if wanted is not None else 0
    if wanted is not None and wanted != stored:
        raise WindowSpecError(
            f"`shift_spark_clock` must be what the checkpoint {records.checkpoint!r} was "
            f"started with: its watermark and timers run {_clock(stored)}; got "
            f"shift_spark_clock={shift!r}. Leave it out to keep the checkpoint's clock, or "
            "start a new checkpoint"
        )
    return stored


def check_checkpoint_clock(spark: Any, records: CheckpointRecords, offset_ms: int) -> None:
    """Refuse to start a query on the checkpoint of ``records`` with another clock than
    it first started with; record the clock (at a first start, or the first time a
    checkpoint that predates the record is restarted). Call it before
    :func:`check_checkpoint`, which records the key groups that tell an old checkpoint
    from a new one."""
    stored = records.clock
    if stored is not None and stored != offset_ms:
        raise WindowSpecError(
            f"the checkpoint {records.checkpoint!r} was started with Spark's event-time clock "
            f"{_clock(stored)}, and this query runs {_clock(offset_ms)}: the watermark and "
            "timers it holds would be read 35,700 years apart. Build the window with "
            f"spark_offset_ms={stored} (write_outputs of a pipeline reads it from the "
            "checkpoint), or start a new checkpoint"
        )
    if records.recorded_clock is None:
        _write_line(spark, _beside(records.checkpoint, CLOCK_FILE), str(offset_ms))


def state_layout(
    spark: Any, records: CheckpointRecords | None, one_key: bool = False
) -> StateLayout:
    """The state layout of a query about to start on the checkpoint of ``records``
    (None: no checkpoint): the checkpoint's, else the session's :data:`LAYOUT_CONF`,
    else :data:`DEFAULT_LAYOUT` (:data:`ONE_KEY_LAYOUT` for a window of ``one_key``);
    with the session's cache and compaction settings.

    Raises
    ------
    WindowSpecError
        The session asks for another layout than the checkpoint's, or for none known, or
        sets a cache or compaction size that is not a positive whole number.
    """
    asked = STATE_LAYOUT.read(spark)
    cache_keys = STATE_CACHE_KEYS.read(spark)
    compact_bytes = STATE_COMPACT_BYTES.read(spark)
    stored = None if records is None else records.layout
    if asked and stored and asked != stored:
        assert records is not None
        raise _layout_changed(records.checkpoint, stored, f"{LAYOUT_CONF}={asked!r}")
    return StateLayout(
        stored or asked or (ONE_KEY_LAYOUT if one_key else DEFAULT_LAYOUT),
        StateLayout.cache_keys if cache_keys is None else cache_keys,
        StateLayout.compact_bytes if compact_bytes is None else compact_bytes,
    )


def check_checkpoint_layout(spark: Any, records: CheckpointRecords, layout: str) -> None:
    """Refuse to start a query on the checkpoint of ``records`` in another state layout
    than it first started with; record the layout (at a first start, or the first time
    a checkpoint that predates the record is restarted). Call it before
    :func:`check_checkpoint`."""
    stored = records.layout
    if stored is not None and stored != layout:
        raise _layout_changed(
            records.checkpoint, stored, f"a window built in the {layout!r} layout"
        )
    if records.recorded_layout is None:
        _write_line(spark, _beside(records.checkpoint, LAYOUT_FILE), layout)


def _layout_changed(checkpoint: str | None, stored: str, asked: str) -> WindowSpecError:
    other = DELTAS if stored == ROW else ROW
    return WindowSpecError(
        f"the state layout must stay what the checkpoint {checkpoint!r} was started with: "
        f"its state is in the {stored!r} layout, and this query asks for {asked}. Set "
        f"{LAYOUT_CONF}={stored!r} (or unset it and build the window with the "
        f"checkpoint: write_outputs of a pipeline does), or start a new checkpoint to "
        f"run in the {other!r} layout"
    )


def _clock(offset_ms: int) -> str:
    return "2**50 ms ahead of the engine's" if offset_ms else "unshifted (the engine's own)"


def describe_window(spec: OperatorSpec, **columns: Any) -> dict[str, str]:
    """What a window's state depends on, as text that compares equal across processes:
    its spec's assigner, trigger, evictor, allowed lateness and kind of function,
    its accumulation mode under a Dataflow trigger (a pipeline without one describes
    none, as before the mode existed), and ``columns`` (e.g. the key and value columns
    with their types, the time mode).

    >>> from tidemark import TumblingEventTimeWindows
    >>> from tidemark._engine.functions import window_logic
    >>> from tidemark._engine.spec import OperatorSpec
    >>> spec = OperatorSpec(TumblingEventTimeWindows.of(600_000), window_logic(max))
    >>> describe_window(spec, key="user string")["assigner"]
    'TumblingEventTimeWindows(offset_ms=0, size_ms=600000)'
    """
    logic = spec.logic
    function = type(logic).__name__
    if logic.window_function is not None:
        function += f" with a {_function_kind(logic.window_function)}"
    described = {
        "assigner": describe(spec.assigner),
        "trigger": describe(spec.window_trigger),
        "evictor": describe(spec.evictor),
        "allowed lateness": f"{spec.allowed_lateness_ms}ms",
        "function": function,
    }
    if spec.accumulation_mode is not None:  # a Dataflow trigger's; none described before
        described["accumulation mode"] = describe(spec.accumulation_mode)
    aggregate = getattr(logic, "aggregate", None)
    if aggregate is not None:  # the state holds its accumulators
        described["accumulator"] = _accumulator(aggregate)
    described.update({name: str(value) for name, value in columns.items()})
    return described


def _accumulator(function: Any) -> str:
    """An aggregate function's class and the type of its accumulator, which the state
    holds; tidemark's own shorthands (``sum("v")``) with their field."""
    kind = type(function)
    if kind.__module__.startswith("tidemark."):
        name = f"{kind.__qualname__}({getattr(function, 'field', '')!r})"
    else:
        name = kind.__qualname__
    try:
        accumulator = type(function.create_accumulator()).__qualname__
    except Exception:  # the function's own error is for its first element to raise
        accumulator = "unknown"
    return f"{name} with a {accumulator} accumulator"


def results_kept(spec: OperatorSpec, result_schema: Any) -> dict[str, str]:
    """What a pipeline record says of results its state keeps (``describe_window``'s
    ``columns``): in RETRACTING mode each window's last results, to retract them, in
    ``result_schema``; nothing in any other mode."""
    if spec.accumulation_mode is not AccumulationMode.RETRACTING:
        return {}
    return {"output schema": result_schema.simpleString()}


def describe(value: Any, depth: int = 0) -> str:
    """A description of ``value`` that is the same in every process: a class and its
    fields, recursively (functions by name), never an object's address."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(describe(v, depth + 1) for v in value) + "]"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return f"function {getattr(value, '__qualname__', type(value).__name__)}"
    fields = getattr(value, "__dict__", None)
    name = type(value).__qualname__
    if not isinstance(fields, dict) or depth > 4:
        return name
    inner = ", ".join(
        f"{key.lstrip('_')}={describe(field, depth + 1)}"
        for key, field in sorted(fields.items())
        if not key.startswith("__")
    )
    return f"{name}({inner})"


def _function_kind(function: Any) -> str:
    """The Flink base class of a window function (its kind, not the user's class)."""
    for base in type(function).__mro__:
        if base.__module__.startswith("tidemark."):
            return base.__name__
    return type(function).__name__


LATER_FIELDS = frozenset({"accumulator", "output schema"})
"""Fields a pipeline record written by an earlier release lacks: compared only where the
stored record has them (the record then gains them)."""


def _changes(stored: Pipeline, wanted: Pipeline) -> list[str]:
    if len(stored) != len(wanted):
        return [f"it had {len(stored)} windows in its chain, this query {len(wanted)}"]
    changes = []
    for n, (old, new) in enumerate(zip(stored, wanted), start=1):
        where = f"window {n} of the chain: " if len(wanted) > 1 else ""
        for name in sorted(old.keys() | new.keys()):
            if name in LATER_FIELDS and name not in old:
                continue
            if old.get(name) != new.get(name):
                changes.append(f"{where}{name} was {old.get(name)}, now {new.get(name)}")
    return changes


def _beside(checkpoint: str, name: str) -> str:
    return f"{checkpoint.rstrip('/')}/{name}"


def _read_lines(spark: Any, path: str) -> list[str]:
    """The non-empty lines of the text directory at ``path`` (none when it is absent)."""
    if is_connect(spark):
        try:
            lines = [row[0] for row in spark.read.text(path).collect()]
        except AnalysisException:
            lines = []
    else:
        local = _local_directory(spark, path)
        lines = _HadoopFiles(spark, path).read_lines() if local is None else _local_lines(local)
    return [line for line in lines if line.strip()]


def _write_line(spark: Any, path: str, line: str) -> None:
    if is_connect(spark):
        frame = spark.createDataFrame([(line,)], "value string")
        frame.coalesce(1).write.mode("overwrite").text(path)
        return
    local = _local_directory(spark, path)
    if local is None:
        _HadoopFiles(spark, path).write_line(line)
    else:
        _write_local(local, line)


def read_record(spark: Any, path: str) -> list[str]:
    """The lines of the record (a directory of text files) at ``path``; none when absent.
    Laid out and read as the checkpoint's own records (module docstring)."""
    return _read_lines(spark, path)


def create_record(spark: Any, path: str, line: str) -> bool:
    """Write ``line`` as the record at ``path`` unless one is there: False when it was.
    Atomic on the driver's disk (a directory renamed into place) and where Hadoop's
    ``create`` without overwrite is (HDFS); over Spark Connect a job writing with
    ``errorifexists``, which checks first (two racing clients may both write)."""
    if is_connect(spark):
        frame = spark.createDataFrame([(line,)], "value string").coalesce(1)
        try:
            frame.write.mode("errorifexists").text(path)
        except AnalysisException as exc:
            if "PATH_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                raise
            return False
        return True
    local = _local_directory(spark, path)
    if local is None:
        return _HadoopFiles(spark, path).create_line(line)
    return _create_local(local, line)


def qualified(spark: Any, path: str) -> str:
    """``path`` as the file system names it (scheme, absolute), to compare two paths;
    over Spark Connect, which has no JVM on the client, as given."""
    if is_connect(spark):
        return path.rstrip("/")
    hadoop_path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    return str(fs.makeQualified(hadoop_path).toString()).rstrip("/")


_RESOLVED: weakref.WeakKeyDictionary[Any, dict[str, str | None]] = weakref.WeakKeyDictionary()
"""Per Spark context: a record's path -> its directory on the driver's disk, or None."""


def _local_directory(spark: Any, path: str) -> str | None:
    """Where ``path`` lies on the driver's own disk, when the checkpoint's Hadoop file
    system is the local one (the driver's Python shares the driver JVM's host); None
    on any other file system. Resolved by Hadoop (a relative path is the JVM's, a path
    without a scheme the default file system's), once per path and Spark context."""
    resolved = _RESOLVED.setdefault(spark.sparkContext, {})
    if path not in resolved:
        hadoop_path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
        fs = hadoop_path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
        local = fs.getScheme() == "file"
        resolved[path] = fs.makeQualified(hadoop_path).toUri().getPath() if local else None
    return resolved[path]


def _local_lines(directory: str) -> list[str]:
    """The lines of the visible files in ``directory`` (Hadoop's ``.crc`` checksums and
    ``_SUCCESS`` are not), as :meth:`_HadoopFiles.read_lines` reads them."""
    if not os.path.isdir(directory):
        return []
    lines: list[str] = []
    for name in sorted(os.listdir(directory)):
        file = os.path.join(directory, name)
        if not name.startswith(("_", ".")) and os.path.isfile(file):
            with open(file, encoding="utf-8") as text:
                lines.extend(text.read().splitlines())
    return lines


def _write_local(directory: str, line: str) -> None:
    """``line`` as the directory's one record, laid out as :class:`_HadoopFiles` writes
    it; the part file replaced at once, and every other file of the directory removed
    after (a checksum Hadoop wrote for an earlier record would fail Hadoop's read of
    this one; a record Spark's text writer wrote is another part file)."""
    os.makedirs(directory, exist_ok=True)
    part = os.path.join(directory, "part-00000.txt")
    written = os.path.join(directory, ".part-00000.txt.tidemark")
    with open(written, "w", encoding="utf-8") as text:
        text.write(f"{line}\n")
    os.replace(written, part)
    for name in os.listdir(directory):
        file = os.path.join(directory, name)
        if name not in ("part-00000.txt", "_SUCCESS") and os.path.isfile(file):
            os.remove(file)
    open(os.path.join(directory, "_SUCCESS"), "w").close()


def _create_local(directory: str, line: str) -> bool:
    """:func:`_write_local` into a directory of its own, renamed to ``directory``: the
    rename fails when ``directory`` exists with a record in it (another writer's)."""
    parent, name = os.path.split(directory.rstrip("/"))
    os.makedirs(parent, exist_ok=True)
    staged = os.path.join(parent, f".{name}-{uuid.uuid4().hex}")
    _write_local(staged, line)
    try:
        os.rename(staged, directory)
    except OSError:
        shutil.rmtree(staged, ignore_errors=True)
        return False
    return True


class _HadoopFiles:
    """A directory of text files on the file system of a classic session's JVM, laid
    out as Spark's text writer leaves it (``part-00000.txt`` and ``_SUCCESS``), so that
    ``spark.read.text`` reads it too."""

    def __init__(self, spark: Any, path: str):
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._path = jvm.org.apache.hadoop.fs.Path(path)
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        self._fs = self._path.getFileSystem(conf)

    def read_lines(self) -> list[str]:
        if not self._fs.exists(self._path):
            return []
        lines: list[str] = []
        for status in self._fs.listStatus(self._path):
            name = status.getPath().getName()
            if status.isFile() and not name.startswith(("_", ".")):
                stream = self._fs.open(status.getPath())
                try:
                    text = self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
                finally:
                    stream.close()
                lines.extend(text.splitlines())
        return lines

    def create_line(self, line: str) -> bool:
        """Write the record's part file unless it exists (False then)."""
        self._fs.mkdirs(self._path)
        part = self._jvm.org.apache.hadoop.fs.Path(self._path, "part-00000.txt")
        try:
            stream = self._fs.create(part, False)
        except Exception as exc:  # py4j's error of Hadoop's FileAlreadyExistsException
            if "FileAlreadyExists" in str(exc) or "already exists" in str(exc):
                return False
            raise
        try:
            stream.write(bytearray(f"{line}\n".encode()))
        finally:
            stream.close()
        return True

    def write_line(self, line: str) -> None:
        self._fs.mkdirs(self._path)
        for name, content in (("part-00000.txt", f"{line}\n"), ("_SUCCESS", "")):
            stream = self._fs.create(self._jvm.org.apache.hadoop.fs.Path(self._path, name), True)
            try:
                stream.write(bytearray(content.encode()))
            finally:
                stream.close()
