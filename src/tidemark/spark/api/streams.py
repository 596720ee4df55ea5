"""The DataStream-style API a PySpark user writes: ``key_by`` ... ``window`` ... ``to_dataframe``
(the source is :func:`tidemark.spark.api.sources.from_dataframe`).

A pipeline is built lazily from immutable descriptions (a source, then window
operations); nothing runs until ``to_dataframe()``. The same pipeline runs on a bounded
DataFrame (BATCH semantics, or a replay of a recorded stream when ``order_by`` is given)
and on a streaming DataFrame. A first pipeline, step by step: ``docs/getting-started.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tidemark._engine.functions import window_logic
from tidemark._engine.spec import count_window_spec, validate_window_spec
from tidemark.assigners import WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.evictors import Evictor
from tidemark.functions import AggregateFunction
from tidemark.outputs import OutputTag
from tidemark.panes import AccumulationMode
from tidemark.spark import aggregations, execution
from tidemark.spark.api import results
from tidemark.spark.api.definition import finished_window
from tidemark.spark.api.results import ExplainableResult, SideOutputStream
from tidemark.spark.batch import columnar
from tidemark.spark.plan import (
    KeySpec,
    PlanNode,
    Source,
    WindowOp,
    check_replay_clock,
    key_spec,
    source_of,
    warn_default_watermarks,
)
from tidemark.spark.protocol import columns
from tidemark.spark.protocol.codec import RowResultReduce
from tidemark.spark.protocol.keys import checked_key
from tidemark.spark.protocol.pane_columns import check_accumulation_mode
from tidemark.time import TimeLike, to_millis
from tidemark.triggers import AnyTrigger

__all__ = [
    "DataStream",
    "KeyedStream",
    "WindowedStream",
    "WindowResultStream",
    "SideOutputStream",
]


class DataStream:
    """A stream of elements (pyspark Rows) with timestamps.

    Made by :func:`from_dataframe`, or the results of a window
    (:class:`WindowResultStream`). Nothing runs until an output is asked for.
    """

    def __init__(self, plan: PlanNode, spark: Any):
        self._plan = plan
        self._spark = spark

    @property
    def plan(self) -> PlanNode:
        """The plan node this stream reads (:mod:`tidemark.spark.plan`)."""
        return self._plan

    @property
    def schema(self) -> Any:
        """The Spark schema of the elements."""
        return self._plan.schema

    @property
    def source(self) -> Source:
        """The source at the start of the pipeline."""
        return source_of(self._plan)

    def key_by(self, key: str | Sequence[str] | Callable[[Any], Any]) -> KeyedStream:
        """Partition the stream by key; windows are then evaluated per key.

        Parameters
        ----------
        key : str, sequence of str, or callable
            A column name (the key is its value), several (the tuple of their values),
            or a function of the Row (its result must pickle, and equal keys must pickle
            to equal bytes).

        Returns
        -------
        KeyedStream
            Combine with :meth:`KeyedStream.window` or :meth:`KeyedStream.count_window`.

        Raises
        ------
        WindowSpecError
            ``key`` names no column, a column the stream does not have, or a map column.
        """
        return KeyedStream(self, checked_key(key_spec(key, self.schema), self.schema))

    def window_all(self, assigner: WindowAssigner) -> WindowedStream:
        """Window the whole stream as one key: it runs in a single partition, as in Flink,
        except in BATCH where its reduce or aggregate function declares
        ``order_insensitive = True``: then each partition pre-aggregates and one task
        merges, with the same results (``docs/concepts/functions.md``).

        Parameters
        ----------
        assigner : WindowAssigner
            E.g. ``TumblingEventTimeWindows.of(...)``.

        Returns
        -------
        WindowedStream
            Configure it (trigger, evictor, lateness), then finish it with a function.
        """
        return _windowed(self._plan, None, self._spark, assigner)

    def count_window_all(self, size: int, slide: int | None = None) -> WindowedStream:
        """Count windows over the whole stream (see :meth:`KeyedStream.count_window`)."""
        return WindowedStream(self._plan, None, self._spark, **count_window_spec(size, slide))

    def window(self, assigner: Any) -> WindowedStream:
        """Refused, as in Flink: ``window`` is per key. Raises WindowSpecError naming
        ``key_by(...).window(...)`` and ``window_all(...)``."""
        raise WindowSpecError(
            f"`window` needs a key, as in Flink: use key_by(...).window({assigner!r}) for "
            f"windows per key, or window_all({assigner!r}) for one window over all elements"
        )

    def to_dataframe(self) -> Any:
        """The elements as a DataFrame (for a source: the input rows, as given)."""
        if isinstance(self._plan, Source):
            return self._plan.df
        raise NotImplementedError  # WindowResultStream overrides


class KeyedStream:
    """A stream partitioned by key (:meth:`DataStream.key_by`); windows are per key."""

    def __init__(self, stream: DataStream, key: KeySpec):
        self._stream = stream
        self._key = key

    def window(self, assigner: WindowAssigner) -> WindowedStream:
        """Window each key's elements with ``assigner``.

        Parameters
        ----------
        assigner : WindowAssigner
            Tumbling, sliding, session or global windows, event or processing time.

        Returns
        -------
        WindowedStream
            Configure it (trigger, evictor, lateness), then finish it with a function.

        Raises
        ------
        WindowSpecError
            ``assigner`` is not a WindowAssigner.
        """
        return _windowed(self._stream.plan, self._key, self._stream._spark, assigner)

    def count_window(self, size: int, slide: int | None = None) -> WindowedStream:
        """Windows of ``size`` elements per key (every ``slide`` elements when given).

        As in Flink: ``count_window(n)`` is GlobalWindows with PurgingTrigger(CountTrigger(n));
        ``count_window(n, s)`` is GlobalWindows with CountEvictor(n) and CountTrigger(s).

        Raises
        ------
        WindowSpecError
            ``size`` or ``slide`` is not an int >= 1.
        """
        spec = count_window_spec(size, slide)
        return WindowedStream(self._stream.plan, self._key, self._stream._spark, **spec)


def _windowed(
    plan: PlanNode, key: KeySpec | None, spark: Any, assigner: WindowAssigner
) -> WindowedStream:
    """``plan`` windowed by ``assigner`` (per key unless ``key`` is None), warned of the
    default watermarks where they apply."""
    windowed = WindowedStream(plan, key, spark, assigner=assigner)
    warn_default_watermarks(plan, assigner)
    return windowed


class WindowedStream:
    """A keyed (or all-) windowed stream, configured by chaining, finished by a function.

    The configuration methods (:meth:`trigger`, :meth:`evictor`,
    :meth:`allowed_lateness`, :meth:`side_output_late_data`, :meth:`accumulation_mode`)
    return a new WindowedStream and may be chained in any order; each call validates the
    whole window specification at once. One of the finishing methods (:meth:`reduce`,
    :meth:`aggregate`, :meth:`process`, :meth:`apply` or a shorthand such as
    :meth:`sum`) then gives a :class:`WindowResultStream`. Nothing runs until one of its
    outputs is asked for. Under a Dataflow trigger (``tm.AfterWatermark`` ...) every
    result row ends with its pane: ``pane_timing``, ``pane_index``, ``pane_is_last``
    (and ``is_retraction`` in RETRACTING mode; :mod:`tidemark.spark.protocol.pane_columns`).

    Every combination the engine supports runs on bounded and streaming DataFrames,
    windows on a window's results included; what a stream does not run (chains in
    processing time; idleness on a stream read by partition) and how it runs the rest: ``docs/streaming.md``.
    """

    def __init__(
        self, upstream: PlanNode, key: KeySpec | None, spark: Any, mode: Any = None, **window: Any
    ):
        # ``window``: OperatorSpec's keywords so far; the spec is made when it is finished
        validate_window_spec(**window)
        check_replay_clock(upstream, window.get("assigner"), window.get("trigger"))
        self._upstream, self._key, self._spark = upstream, key, spark
        self._mode, self._window = mode, window

    def _with(self, mode: Any = None, **changes: Any) -> WindowedStream:
        window, mode = {**self._window, **changes}, mode if mode is not None else self._mode
        return WindowedStream(self._upstream, self._key, self._spark, mode, **window)

    def trigger(self, trigger: AnyTrigger) -> WindowedStream:
        """Fire windows with ``trigger`` (Flink's, or a Dataflow trigger: panes).

        Raises
        ------
        WindowSpecError
            ``trigger`` is neither a Trigger nor a DataflowTrigger, or cannot serve the
            assigner (e.g. a trigger that cannot merge on session windows).
        """
        return self._with(trigger=trigger)

    def evictor(self, evictor: Evictor) -> WindowedStream:
        """Remove elements from a window before or after its function runs.

        Raises
        ------
        WindowSpecError
            ``evictor`` is not an Evictor.
        """
        return self._with(evictor=evictor)

    def allowed_lateness(self, lateness: TimeLike) -> WindowedStream:
        """Keep windows ``lateness`` after the watermark passed their end: a late element
        within it fires the window again (a late firing).

        Parameters
        ----------
        lateness : Duration, timedelta or int milliseconds
            ``>= 0``; it matters to event-time windows only.

        Raises
        ------
        WindowSpecError
            ``lateness`` is negative.
        """
        return self._with(allowed_lateness_ms=to_millis(lateness, "allowed_lateness"))

    def side_output_late_data(self, tag: OutputTag) -> WindowedStream:
        """Send elements too late for every window to the side output ``tag`` (read it
        with :meth:`WindowResultStream.get_side_output`) instead of dropping them.

        Raises
        ------
        WindowSpecError
            ``tag`` is not an OutputTag.
        """
        return self._with(late_data_tag=tag)

    def accumulation_mode(self, mode: AccumulationMode) -> WindowedStream:
        """How the panes of a Dataflow trigger (``tm.AfterWatermark`` ...) relate: each
        holds the elements since the last (DISCARDING, the default), all so far
        (ACCUMULATING), or all so far after retracting the last (RETRACTING: the
        results gain the column ``is_retraction``). See ``docs/panes.md``.

        Raises
        ------
        WindowSpecError
            ``mode`` is not a ``tm.AccumulationMode``; when the window is finished, the
            trigger is not a Dataflow trigger.
        """
        check_accumulation_mode(mode)
        return self._with(mode)

    def reduce(
        self, reduce_function: Any, window_function: Any = None, output_schema: Any = None
    ) -> WindowResultStream:
        """Reduce each window's elements incrementally, pairwise, in arrival order.

        Parameters
        ----------
        reduce_function : ReduceFunction or callable
            ``(a, b) -> element`` of the input's type.
        window_function : ProcessWindowFunction or WindowFunction, optional
            Called with the reduced element when the window fires.
        output_schema : StructType or str, optional
            Needed with a window function; without one the result keeps the input schema.

        Returns
        -------
        WindowResultStream

        Raises
        ------
        WindowSpecError
            A function of the wrong kind, or no ``output_schema`` where one is needed.
        """
        if window_function is None and output_schema is None:
            output_schema = self._upstream.schema
        window_logic(reduce_function, window_function)  # validates the function as given
        if not isinstance(reduce_function, aggregations.FieldReduce):
            reduce_function = RowResultReduce(reduce_function)
        return self._finish(reduce_function, window_function, output_schema)

    def aggregate(
        self, aggregate_function: Any, window_function: Any = None, output_schema: Any = None
    ) -> WindowResultStream:
        """Aggregate each window's elements incrementally with an accumulator.

        Parameters
        ----------
        aggregate_function : AggregateFunction
            ``create_accumulator``, ``add``, ``get_result`` (and ``merge`` for sessions).
        window_function : ProcessWindowFunction or WindowFunction, optional
            Called with the aggregate's result when the window fires.
        output_schema : StructType or str
            The columns of a result (a DDL string like ``'user string, n long'``).

        Returns
        -------
        WindowResultStream

        Raises
        ------
        WindowSpecError
            A function of the wrong kind, or no ``output_schema``.
        """
        return self._finish(aggregate_function, window_function, output_schema)

    def aggregate_vectorized(
        self, function: Any, fields: Any, output_type: str = "double", output_name: str = "value"
    ) -> WindowResultStream:
        """Call ``function`` once per firing with the window's values of ``fields`` as
        NumPy float64 arrays (null: NaN); each firing gives one row: the key columns,
        ``window_start``, ``window_end`` (long ms) and ``output_name`` of
        ``output_type``. BATCH tumbling/sliding windows run columnar
        (``docs/concepts/columnar.md``).

        Raises
        ------
        WindowSpecError
            A key function, a field that is not a numeric column, an unknown output
            type or a taken ``output_name``, a function that is not a
            VectorizedAggregateFunction nor callable.
        """
        schema, key = self._upstream.schema, self._key
        fn, output = columnar.define(schema, key, function, fields, output_type, output_name)
        return self._finish(fn, None, output)

    def process(
        self, process_window_function: Any, output_schema: Any = None
    ) -> WindowResultStream:
        """Call ``process_window_function`` with all of a window's elements when it fires.

        The function may emit any number of results and side outputs
        (``context.output(tag, value)``) and use per-window and global state.

        Raises
        ------
        WindowSpecError
            Not a ProcessWindowFunction, or no ``output_schema``.
        """
        return self._finish(process_window_function, None, output_schema)

    def apply(self, window_function: Any, output_schema: Any = None) -> WindowResultStream:
        """Call ``window_function`` (a WindowFunction: key, window, elements) on firing.

        Raises
        ------
        WindowSpecError
            Not a WindowFunction, or no ``output_schema``.
        """
        return self._finish(window_function, None, output_schema)

    def sum(self, field: str) -> WindowResultStream:
        """Sum ``field``; the other fields come from the window's first element.

        Raises
        ------
        WindowSpecError
            ``field`` is not a column of the stream, is a key column, or is not numeric
            (as in Flink; Python's ``+`` would concatenate strings).
        """
        return self._shorthand("sum", aggregations.Sum, field)

    def min(self, field: str) -> WindowResultStream:
        """Minimum of ``field``; the other fields come from the first element.

        Raises
        ------
        WindowSpecError
            ``field`` is not a column, is a key column, or has no order (a map, array,
            struct or binary column; Flink needs ``Comparable``).
        """
        return self._shorthand("min", aggregations.Min, field)

    def max(self, field: str) -> WindowResultStream:
        """Maximum of ``field``; the other fields come from the first element.

        Raises
        ------
        WindowSpecError
            ``field`` is not a column, is a key column, or has no order (a map, array,
            struct or binary column; Flink needs ``Comparable``).
        """
        return self._shorthand("max", aggregations.Max, field)

    def min_by(self, field: str) -> WindowResultStream:
        """The element with the smallest ``field`` (the first one on ties).

        Raises
        ------
        WindowSpecError
            ``field`` is not a column, is a key column, or has no order (a map, array,
            struct or binary column; Flink needs ``Comparable``).
        """
        return self._shorthand("min_by", aggregations.MinBy, field)

    def max_by(self, field: str) -> WindowResultStream:
        """The element with the largest ``field`` (the first one on ties).

        Raises
        ------
        WindowSpecError
            ``field`` is not a column, is a key column, or has no order (a map, array,
            struct or binary column; Flink needs ``Comparable``).
        """
        return self._shorthand("max_by", aggregations.MaxBy, field)

    def _shorthand(self, method: str, kind: Any, field: str) -> WindowResultStream:
        schema = self._upstream.schema
        keys = self._key.columns if self._key is not None else ()
        aggregations.check_field(method, field, schema, keys)
        function = kind(field)
        if isinstance(function, AggregateFunction):
            return self.aggregate(function, output_schema=schema)
        return self.reduce(function)

    def _finish(
        self, function: Any, window_function: Any, output_schema: Any
    ) -> WindowResultStream:
        """The window's one record (``OperatorSpec``), made and validated now."""
        functions = (function, window_function)
        op = finished_window(
            self._upstream,
            self._key,
            self._window,
            self._mode,
            functions,
            output_schema,
            self._spark,
        )
        return WindowResultStream(op, self._spark)


class WindowResultStream(DataStream, ExplainableResult):
    """The results of a window operation: elements stamped with ``window.max_timestamp()``,
    so further windows can be chained on them.

    On a stream a chain runs as ONE query: each window reads the one before in the same
    micro-batch, fed its results and then the watermark, as Flink forwards them; the
    last window's :meth:`write_outputs` also writes the earlier windows' side outputs
    and dropped counts.

    Every output of one WindowResultStream (:meth:`to_dataframe`, each side output,
    :meth:`num_late_records_dropped`) comes from ONE run of the operator, which
    :mod:`tidemark.spark.execution` chooses: BATCH, the SQL fast path, a replay, or a
    streaming query. A bounded run with more than results to give (a replay, a late-data
    tag, a process window function) keeps its rows (memory, then disk) from the first
    action that reads an output until :meth:`unpersist`, or until this object is
    garbage-collected (see :mod:`tidemark.spark.execution`).
    """

    _plan: WindowOp

    def combined_dataframe(self) -> Any:
        """Results and side outputs of one run of the operator, with the internal columns
        of :mod:`tidemark.spark.protocol.columns`."""
        return execution.combined_frame(self._plan, self._spark)

    def to_dataframe(self) -> Any:
        """The window results as a DataFrame with the output schema.

        Lazy, as any DataFrame: the pipeline runs when the DataFrame is evaluated (a
        replay scans its input for watermarks here). On a streaming source the result is
        a streaming DataFrame; :meth:`write_outputs` writes all outputs from one query.
        """
        return columns.main_output(self.combined_dataframe(), self._plan.output_schema)

    def num_late_records_dropped(self) -> int:
        """How many elements were dropped: late ones with no late-data side output (Flink's
        ``numLateRecordsDropped``), and those in a gap of sampling windows (Flink loses them).

        Bounded input only: it runs the pipeline. A streaming query reports the count
        per batch on its ``"__late_records_dropped"`` output (see :meth:`write_outputs`).

        Raises
        ------
        WindowSpecError
            On a streaming DataFrame.
        """
        return results.late_records_dropped(self._plan, self._spark)

    def metrics(self) -> dict[str, Any]:
        """The figures of a bounded run (``docs/watching.md``), from its kept run: a dict
        of ``num_records_in`` (None on the SQL fast path), ``num_records_out``,
        ``num_late_records_side_output`` and ``num_late_records_dropped``.

        Raises
        ------
        WindowSpecError
            On a stream: each micro-batch's progress carries them.
        """
        return results.run_metrics(self._plan, self._spark)

    def write_outputs(
        self,
        sinks: dict[Any, Any],
        checkpoint: str | None = None,
        trigger: dict[str, Any] | None = None,
    ) -> Any:
        """Send the results and each side output to a sink, all from ONE run.

        On a stream this starts ONE query; each micro-batch is computed once and handed
        to every sink. On a bounded DataFrame it runs the pipeline once, now: each sink
        is called once, with its output's DataFrame and ``batch_id=0``, all read from
        one kept run (any run, with several sinks), which is released when the last
        sink returns (see :meth:`unpersist`).

        Parameters
        ----------
        sinks : dict
            ``"main"`` (the results), an :class:`OutputTag` or
            ``"__late_records_dropped"`` -> ``sink(df, batch_id)``; the operator runs
            once however many outputs are written. For an earlier window of a chain: its
            ``get_side_output(tag)``, or the pair ``(earlier, "__late_records_dropped")``
            (or ``(earlier, tag)``). The dropped count comes as one row (column
            ``num_late_records_dropped``) per micro-batch, 0 included; a bounded run is
            one batch.
        checkpoint : str, optional
            Streaming: the query's checkpoint location (required). Not used on a
            bounded DataFrame, so the same call serves both.
        trigger : dict, optional
            Streaming only: keyword arguments of ``DataStreamWriter.trigger``.

        Returns
        -------
        TidemarkStreamingQuery or None
            The started query on a stream (its failures are raised as tidemark's own
            errors); None on a bounded DataFrame, whose outputs are all written when the
            call returns.

        Raises
        ------
        WindowSpecError
            No sinks, a sink that is not callable, a side output without a schema, or an
            output of a window that is not this one or before it in the chain; on a
            stream, no ``checkpoint``; on a bounded DataFrame, a ``trigger``.
        """
        return results.write_outputs(self, sinks, checkpoint, trigger)

    def unpersist(self) -> WindowResultStream:
        """Release the rows a bounded run keeps for its outputs (and those of the windows
        before it in its chain).

        A bounded run that has more than its results to give (a replay, a late-data
        tag, a process window function) keeps its rows, in memory then on disk, from the
        first action that reads any of its outputs, so that the results, each side
        output and the dropped count come from one run of the pipeline. (A BATCH reduce,
        aggregate or shorthand without a late-data tag gives only results and keeps
        nothing.) The rows are also released when this object is garbage-collected.
        Outputs read after this run the pipeline again at each action. Nothing to
        release on a stream.

        Returns
        -------
        WindowResultStream
            ``self``.
        """
        if not self.source.streaming:
            execution.release(self._plan)
        return self

    def get_side_output(self, tag: OutputTag) -> SideOutputStream:
        """The side output ``tag``: late data (input schema) or what a process function
        emitted with ``context.output(tag, value)`` (schema: ``tag.type_info``).

        Raises
        ------
        WindowSpecError
            ``tag`` is not an OutputTag, or has no schema and is not the late-data tag.
        """
        return SideOutputStream(self, tag, results.side_output_schema(self._plan, tag, self._spark))
