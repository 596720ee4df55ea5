"""The DataStream-style API a PySpark user writes: ``from_dataframe`` ... ``to_dataframe``.

A pipeline is built lazily from immutable descriptions (a source, then window
operations); nothing runs until ``to_dataframe()``. The same pipeline runs on a bounded
DataFrame (BATCH semantics, or a replay of a recorded stream when ``order_by`` is given)
and on a streaming DataFrame.

Examples
--------
A keyed tumbling window (needs Spark, so not run as a doctest)::

    import tidemark as tm
    stream = tm.from_dataframe(df, timestamp="ts")
    totals = (stream.key_by("user")
              .window(tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(1)))
              .sum("amount"))
    totals.to_dataframe().show()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tidemark._engine.create import create_window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec, validate_window_spec
from tidemark.assigners import GlobalWindows, WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.evictors import CountEvictor, Evictor
from tidemark.functions import AggregateFunction
from tidemark.outputs import OutputTag
from tidemark.spark import aggregations
from tidemark.spark.codec import RowResultReduce
from tidemark.spark.session import get_spark
from tidemark.time import TimeLike, to_millis
from tidemark.triggers import CountTrigger, PurgingTrigger, Trigger
from tidemark.watermarks import WatermarkStrategy

__all__ = [
    "from_dataframe",
    "DataStream",
    "KeyedStream",
    "WindowedStream",
    "WindowResultStream",
    "SideOutputStream",
]


@dataclass(frozen=True)
class Source:
    """A DataFrame read as a stream of its rows."""

    df: Any
    timestamp: str | None
    order_by: str | None
    strategy: WatermarkStrategy
    processing_time: str | None
    watermark: str | None = None

    @property
    def schema(self) -> Any:
        return self.df.schema

    @property
    def replay(self) -> bool:
        return self.order_by is not None


@dataclass(frozen=True)
class WindowOp:
    """A window operation on an upstream stream."""

    upstream: DataStream
    key: KeySpec | None
    assigner: WindowAssigner
    trigger: Trigger | None = None
    evictor: Evictor | None = None
    allowed_lateness_ms: int = 0
    late_tag: OutputTag | None = None
    function: Any = None
    window_function: Any = None
    output_schema: Any = None

    def operator_factory(self) -> OperatorFactory:
        """A picklable ``() -> WindowOperator`` for Spark's workers (no DataFrames in it)."""
        return OperatorFactory(
            self.assigner,
            self.trigger,
            self.evictor,
            self.allowed_lateness_ms,
            self.late_tag,
            self.function,
            self.window_function,
            fast_paths_enabled(self.upstream._spark),
        )


@dataclass(frozen=True)
class OperatorFactory:
    """Builds the engine's window operator of a window operation, on a Spark worker."""

    assigner: WindowAssigner
    trigger: Trigger | None
    evictor: Evictor | None
    allowed_lateness_ms: int
    late_tag: OutputTag | None
    function: Any
    window_function: Any
    fast_paths: bool = True
    # The spec of each (batch_mode, record_output_watermarks), built once per process:
    # a streaming query makes an operator per key and micro-batch.
    _specs: dict[tuple[bool, bool], OperatorSpec] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __call__(self, *, batch_mode: bool = False, record_output_watermarks: bool = False) -> Any:
        options = (batch_mode, record_output_watermarks)
        spec = self._specs.get(options)
        if spec is None:
            spec = self._specs[options] = OperatorSpec(
                self.assigner,
                window_logic(self.function, self.window_function),
                self.trigger,
                self.evictor,
                self.allowed_lateness_ms,
                self.late_tag,
                batch_mode=batch_mode,
                record_output_watermarks=record_output_watermarks,
                fast_paths=self.fast_paths,
            )
        return create_window_operator(spec)


FAST_PATHS_CONF = "spark.tidemark.fastPaths"


def fast_paths_enabled(spark: Any) -> bool:
    """False when the Spark conf ``spark.tidemark.fastPaths`` is ``false``: every
    pipeline then runs on the general engine operator, and no BATCH pipeline on the SQL
    fast path (which ``spark.tidemark.sqlFastPath=false`` alone turns off)."""
    return str(spark.conf.get(FAST_PATHS_CONF, "true")).lower() != "false"


@dataclass(frozen=True)
class KeySpec:
    """How elements are keyed: by columns (the key is the value, or a tuple of values)
    or by a function of the Row."""

    columns: tuple[str, ...] = ()
    function: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        return ", ".join(self.columns) if self.columns else repr(self.function)


class DataStream:
    """A stream of elements (pyspark Rows) with timestamps."""

    def __init__(self, plan: Source | WindowOp, spark: Any):
        self._plan = plan
        self._spark = spark

    @property
    def schema(self) -> Any:
        """The Spark schema of the elements."""
        if isinstance(self._plan, Source):
            return self._plan.schema
        return self._plan.output_schema

    @property
    def source(self) -> Source:
        plan: Any = self._plan
        while isinstance(plan, WindowOp):
            plan = plan.upstream._plan
        return plan

    def key_by(self, key: str | Sequence[str] | Callable[[Any], Any]) -> KeyedStream:
        """Partition the stream by ``key``: a column name, several, or a function of Row."""
        return KeyedStream(self, _key_spec(key, self.schema))

    def window_all(self, assigner: WindowAssigner) -> WindowedStream:
        """Window the whole stream as one key (runs in a single partition, as in Flink)."""
        return WindowedStream(WindowOp(self, None, assigner), self._spark)

    def count_window_all(self, size: int, slide: int | None = None) -> WindowedStream:
        """Count windows over the whole stream (see :meth:`KeyedStream.count_window`)."""
        return _count_window(WindowOp(self, None, GlobalWindows.create()), size, slide, self._spark)

    def to_dataframe(self) -> Any:
        """The elements as a DataFrame (for a source: the input rows)."""
        if isinstance(self._plan, Source):
            return self._plan.df
        raise NotImplementedError  # WindowResultStream overrides


class KeyedStream:
    """A stream partitioned by key; windows are evaluated per key."""

    def __init__(self, stream: DataStream, key: KeySpec):
        self._stream = stream
        self._key = key

    def window(self, assigner: WindowAssigner) -> WindowedStream:
        return WindowedStream(WindowOp(self._stream, self._key, assigner), self._stream._spark)

    def count_window(self, size: int, slide: int | None = None) -> WindowedStream:
        """Windows of ``size`` elements per key (every ``slide`` elements when given).

        As in Flink: ``count_window(n)`` is GlobalWindows with PurgingTrigger(CountTrigger(n));
        ``count_window(n, s)`` is GlobalWindows with CountEvictor(n) and CountTrigger(s).
        """
        op = WindowOp(self._stream, self._key, GlobalWindows.create())
        return _count_window(op, size, slide, self._stream._spark)


def _count_window(op: WindowOp, size: int, slide: int | None, spark: Any) -> WindowedStream:
    if not isinstance(size, int) or size < 1:
        raise WindowSpecError(f"`size` must be an int >= 1; got size={size!r}")
    if slide is None:
        return WindowedStream(replace(op, trigger=PurgingTrigger.of(CountTrigger.of(size))), spark)
    if not isinstance(slide, int) or slide < 1:
        raise WindowSpecError(f"`slide` must be an int >= 1; got slide={slide!r}")
    return WindowedStream(
        replace(op, trigger=CountTrigger.of(slide), evictor=CountEvictor.of(size)), spark
    )


class WindowedStream:
    """A keyed (or all-) windowed stream, configured by chaining, finished by a function."""

    def __init__(self, op: WindowOp, spark: Any):
        validate_window_spec(op.assigner, op.trigger, op.evictor, op.allowed_lateness_ms, op.late_tag)
        self._op = op
        self._spark = spark

    def _with(self, **changes: Any) -> WindowedStream:
        return WindowedStream(replace(self._op, **changes), self._spark)

    def trigger(self, trigger: Trigger) -> WindowedStream:
        return self._with(trigger=trigger)

    def evictor(self, evictor: Evictor) -> WindowedStream:
        return self._with(evictor=evictor)

    def allowed_lateness(self, lateness: TimeLike) -> WindowedStream:
        return self._with(allowed_lateness_ms=to_millis(lateness, "allowed_lateness"))

    def side_output_late_data(self, tag: OutputTag) -> WindowedStream:
        return self._with(late_tag=tag)

    def reduce(
        self, reduce_function: Any, window_function: Any = None, output_schema: Any = None
    ) -> WindowResultStream:
        """Reduce each window's elements; without a window function the result keeps the
        input schema."""
        if window_function is None and output_schema is None:
            output_schema = self._op.upstream.schema
        window_logic(reduce_function, window_function)  # validates the function as given
        if not isinstance(reduce_function, aggregations.FieldReduce):
            reduce_function = RowResultReduce(reduce_function)
        return self._finish(reduce_function, window_function, output_schema)

    def aggregate(
        self, aggregate_function: Any, window_function: Any = None, output_schema: Any = None
    ) -> WindowResultStream:
        return self._finish(aggregate_function, window_function, output_schema)

    def process(self, process_window_function: Any, output_schema: Any = None) -> WindowResultStream:
        return self._finish(process_window_function, None, output_schema)

    def apply(self, window_function: Any, output_schema: Any = None) -> WindowResultStream:
        return self._finish(window_function, None, output_schema)

    def sum(self, field: str) -> WindowResultStream:
        """Sum ``field``; the other fields come from the window's first element."""
        return self._shorthand(aggregations.Sum, field)

    def min(self, field: str) -> WindowResultStream:
        """Minimum of ``field``; the other fields come from the first element."""
        return self._shorthand(aggregations.Min, field)

    def max(self, field: str) -> WindowResultStream:
        return self._shorthand(aggregations.Max, field)

    def min_by(self, field: str) -> WindowResultStream:
        """The element with the smallest ``field`` (the first one on ties)."""
        return self._shorthand(aggregations.MinBy, field)

    def max_by(self, field: str) -> WindowResultStream:
        return self._shorthand(aggregations.MaxBy, field)

    def _shorthand(self, kind: Any, field: str) -> WindowResultStream:
        schema = self._op.upstream.schema
        if field not in schema.fieldNames():
            raise WindowSpecError(
                f"`field` must be a column of the stream; got {field!r}, "
                f"columns: {schema.fieldNames()}"
            )
        function = kind(field)
        if isinstance(function, AggregateFunction):
            return self.aggregate(function, output_schema=schema)
        return self.reduce(function)

    def _finish(self, function: Any, window_function: Any, output_schema: Any) -> WindowResultStream:
        window_logic(function, window_function)  # validates the combination now
        if output_schema is None:
            raise WindowSpecError(
                "`output_schema` is needed: tidemark cannot infer what this window function "
                "returns; pass a StructType or a DDL string like 'user string, n long'"
            )
        from tidemark.spark.codec import parse_schema

        schema = parse_schema(output_schema, self._spark)
        op = replace(
            self._op, function=function, window_function=window_function, output_schema=schema
        )
        return WindowResultStream(op, self._spark)


class WindowResultStream(DataStream):
    """The results of a window operation: elements stamped with ``window.max_timestamp()``,
    so further windows can be chained on them."""

    _plan: WindowOp

    def __init__(self, op: WindowOp, spark: Any):
        super().__init__(op, spark)
        self._combined: Any = None

    def combined_dataframe(self) -> Any:
        """Results and side outputs of one run of the operator (internal columns)."""
        if self._combined is None:
            from tidemark.spark.runner import run_window

            self._combined = run_window(self._plan, self._spark)
        return self._combined

    def to_dataframe(self) -> Any:
        """The window results as a DataFrame with the output schema."""
        from tidemark.spark.runner import main_output

        return main_output(self.combined_dataframe(), self._plan.output_schema)

    def num_late_records_dropped(self) -> int:
        """How many late elements were dropped: late for every window they belonged to,
        with no late-data side output to go to (Flink's ``numLateRecordsDropped``).

        Bounded input only (it runs the pipeline); a streaming query reports the count
        per batch on its ``"__late_records_dropped"`` output (see :meth:`write_outputs`).
        """
        if self._plan.upstream.source.df.isStreaming:
            raise WindowSpecError(
                "num_late_records_dropped() needs a bounded DataFrame; on a stream, give "
                "write_outputs a sink for '__late_records_dropped'"
            )
        from tidemark.spark.runner import num_late_records_dropped

        return num_late_records_dropped(self.combined_dataframe())

    def write_outputs(
        self, sinks: dict[Any, Any], checkpoint: str, trigger: dict[str, Any] | None = None
    ) -> Any:
        """Streaming: start ONE query sending the results and each side output to a sink.

        ``sinks`` maps ``"main"`` (the results) or an :class:`OutputTag` to
        ``sink(batch_df, batch_id)``; the operator runs once per micro-batch however many
        outputs are written. Returns the ``StreamingQuery``.
        """
        from tidemark.spark.streaming.query import write_outputs

        named = {getattr(k, "tag_id", k): v for k, v in sinks.items()}
        schemas = {}
        for key in sinks:
            if isinstance(key, OutputTag) and key != self._plan.late_tag and key.type_info:
                schemas[key.tag_id] = self.get_side_output(key).schema
        return write_outputs(self.combined_dataframe(), named, checkpoint, trigger,
                             schemas=schemas)

    def get_side_output(self, tag: OutputTag) -> SideOutputStream:
        """The side output ``tag``: late data (input schema) or what a process function
        emitted with ``context.output(tag, value)`` (schema: ``tag.type_info``)."""
        if not isinstance(tag, OutputTag):
            raise WindowSpecError(f"`tag` must be an OutputTag; got {tag!r}")
        if tag == self._plan.late_tag:
            schema = self._plan.upstream.schema
        elif tag.type_info is not None:
            from tidemark.spark.codec import parse_schema

            schema = parse_schema(tag.type_info, self._spark)
        else:
            raise WindowSpecError(
                f"side output {tag!r} needs a schema: create it as OutputTag({tag.tag_id!r}, "
                "'col type, ...')"
            )
        return SideOutputStream(self, tag, schema)


@dataclass
class SideOutputStream:
    """One side output of a window operation."""

    parent: WindowResultStream
    tag: OutputTag
    schema: Any

    def to_dataframe(self) -> Any:
        from tidemark.spark.runner import side_output

        return side_output(self.parent.combined_dataframe(), self.tag, self.schema)


def _key_spec(key: Any, schema: Any) -> KeySpec:
    if callable(key) and not isinstance(key, str):
        return KeySpec(function=key)
    columns = (key,) if isinstance(key, str) else tuple(key)
    if not columns or not all(isinstance(c, str) for c in columns):
        raise WindowSpecError(
            f"`key` must be a column name, a list of them, or a function of Row; got {key!r}"
        )
    missing = [c for c in columns if c not in schema.fieldNames()]
    if missing:
        raise WindowSpecError(
            f"`key` names columns that do not exist: {missing}; columns: {schema.fieldNames()}"
        )
    return KeySpec(columns=columns)


def from_dataframe(
    df: Any,
    timestamp: str | None = None,
    *,
    order_by: str | None = None,
    watermark_strategy: WatermarkStrategy | None = None,
    processing_time: str | None = None,
    watermark: str | None = None,
    spark: Any = None,
) -> DataStream:
    """Read a DataFrame as a stream of Rows.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        Bounded (batch) or streaming.
    timestamp : str, optional
        The event-time column: long milliseconds, or a Spark timestamp. Optional when
        ``watermark_strategy`` has a timestamp assigner, or for processing-time windows.
    order_by : str, optional
        Arrival order of a recorded stream: run as a faithful replay (watermark after
        every element, across all keys). Omit for Flink's BATCH semantics.
    watermark_strategy : WatermarkStrategy, optional
        Defaults to monotonous timestamps.
    processing_time : str, optional
        Replay only: the arrival time (long ms or timestamp) that drives processing time.
    watermark : str, optional
        Replay only: the watermark in force when each element arrived (long ms), as
        recorded with the stream; replaces the watermarks of ``watermark_strategy``.
    """
    spark = get_spark(spark if spark is not None else df.sparkSession)
    strategy = watermark_strategy or WatermarkStrategy.for_monotonous_timestamps()
    if not isinstance(strategy, WatermarkStrategy):
        raise WindowSpecError(f"`watermark_strategy` must be a WatermarkStrategy; got {strategy!r}")
    names = df.columns
    for param, column in (
        ("timestamp", timestamp),
        ("order_by", order_by),
        ("processing_time", processing_time),
        ("watermark", watermark),
    ):
        if column is not None and column not in names:
            raise WindowSpecError(f"`{param}` names a missing column {column!r}; columns: {names}")
    for param, column in (("processing_time", processing_time), ("watermark", watermark)):
        if column is not None and order_by is None and not df.isStreaming:
            raise WindowSpecError(
                f"`{param}` belongs to a replay: give `order_by` (the arrival order) too"
            )
    return DataStream(
        Source(df, timestamp, order_by, strategy, processing_time, watermark), spark
    )
