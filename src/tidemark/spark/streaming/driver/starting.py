"""A streaming window's outputs: :func:`select_output` picks one from its combined frame,
:func:`write_outputs` starts the window's ONE query and sends each output to its own
sink with ``foreachBatch`` (the operator runs once per micro-batch, however many sinks
read it).

Before the query starts, its checkpoint's records are compared with the window
(:mod:`.checkpoint`: the number of key groups, the pipeline) and each table sink claims
its table for the query and output (:mod:`tidemark.spark.streaming.driver.tables`); the query starts with
its state partitions capped (:func:`~.keygroups.state_partitions_cap`) and observes
each window's figures (:func:`observed_chain`, ``docs/watching.md``); each micro-batch's
watermarks are recorded beside the checkpoint (:mod:`.batch_records`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import (
    DROPPED,
    MAIN,
    OUTPUT,
    PHASE,
    SIDE,
    STATS_OUTPUT,
    TS,
    SideDecoder,
    dropped_counts,
    is_dropped_output,
    upstream_output_name,
)
from tidemark.spark.protocol.figures import OBSERVATION, observed
from tidemark.spark.runtime.preflight import streaming_settings
from tidemark.spark.runtime.surfacing import TidemarkStreamingQuery
from tidemark.spark.streaming.driver.batch_records import record_batches
from tidemark.spark.streaming.driver.checkpoint import (
    CheckpointRecords,
    check_checkpoint,
    check_checkpoint_clock,
    check_checkpoint_layout,
    read_records,
)
from tidemark.spark.streaming.driver.keygroups import SHUFFLE_PARTITIONS
from tidemark.spark.streaming.driver.query import (
    StreamingWindow,
    check_one_window,
    one_window_per_query,
)
from tidemark.spark.streaming.driver.stopping import stop_signal
from tidemark.spark.streaming.driver.tables import claim_tables
from tidemark.spark.streaming.worker.modes import TimeMode

__all__ = ["select_output", "write_outputs", "observed_chain", "observation_name"]


def select_output(
    combined: DataFrame | StreamingWindow, name: str, schema: StructType | None = None
) -> DataFrame:
    """One output of a :class:`StreamingWindow` (or of a micro-batch of its frame).

    Parameters
    ----------
    combined : StreamingWindow or DataFrame
        What :func:`window_stream` returned, or a micro-batch of its frame.
    name : str
        "main" for the results; a tag id for a side output; ``"__late_records_dropped"``
        for the count of dropped late records: one row per micro-batch (0 included).
    schema : StructType, optional
        The columns of side output ``name``; a window knows its late data's. Without
        one, a side output comes as ``timestamp`` (long ms) and ``value`` (pickled bytes).
    """
    if isinstance(combined, StreamingWindow):
        schema = schema if schema is not None else combined.side_schemas.get(name)
        combined = combined.frame
    rows = combined.where(F.col(OUTPUT) == F.lit(name))
    if name == MAIN:
        internal = (OUTPUT, TS, SIDE, DROPPED, PHASE)
        return rows.select(*[F.col(f"`{c}`") for c in combined.columns if c not in internal])
    if is_dropped_output(name):
        return dropped_counts(combined, name)
    if schema is None:
        return rows.select(F.col(TS).alias("timestamp"), F.col(SIDE).alias("value"))
    return rows.select(SIDE).mapInArrow(SideDecoder(schema), schema)


def check_sinks(sinks: Mapping[Any, Any]) -> None:
    """Refuse ``write_outputs``' ``sinks`` when empty or when a sink is not callable.

    Raises
    ------
    WindowSpecError
        Naming the outputs whose sinks are not callable.
    """
    if not sinks:
        raise WindowSpecError("`sinks` must name at least one output, e.g. {'main': sink}")
    bad = [getattr(key, "tag_id", key) for key, sink in sinks.items() if not callable(sink)]
    if bad:
        raise WindowSpecError(f"`sinks` must map output names to callables; not callable: {bad}")


def write_outputs(
    window: StreamingWindow,
    sinks: Mapping[str, Callable[[DataFrame, int], None]],
    checkpoint: str,
    trigger: dict[str, Any] | None = None,
    *,
    schemas: Mapping[str, StructType] | None = None,
    query_name: str | None = None,
) -> TidemarkStreamingQuery:
    """Start ONE query that sends each output of a :class:`StreamingWindow` to its sink.

    Parameters
    ----------
    window : StreamingWindow
        What :func:`~.query.window_stream` returned.
    sinks : mapping
        Output name ("main", a tag id, ``"__late_records_dropped"``) ->
        ``sink(batch_df, batch_id)``. Outputs without a sink are discarded. A sink that
        writes by ``batch_id`` (overwrite a batch's partition) is idempotent: a batch
        replayed after a failure replaces its own rows. Several sinks read one cached
        computation of the micro-batch; a single sink gets it uncached (persist it to
        read it more than once without computing it again), but cached on Spark before
        4.3, where a second read would count the figures again. A table sink
        (:mod:`tidemark.spark.io.sinks`) claims its table for this query and output before
        the query starts: two outputs naming one table, or a table another query or
        output holds, are refused.
    checkpoint : str
        The query's checkpoint location (state, timers, watermark, offsets). Its
        records must match the window: the number of key groups it started with (give
        ``window_stream`` the same ``checkpoint`` to keep a default number at a
        restart) and the pipeline.
    trigger : dict, optional
        Keyword arguments of ``DataStreamWriter.trigger``, e.g. ``{"availableNow": True}``.
    schemas : mapping, optional
        Schemas of side outputs the window does not know (what process functions emit
        with ``ctx.output``; see :func:`select_output`).

    Returns
    -------
    TidemarkStreamingQuery
        The started ``StreamingQuery``: each micro-batch's progress carries tidemark's
        figures under ``observedMetrics["tidemark"]`` (``docs/watching.md``); its
        ``awaitTermination``, ``processAllAvailable`` and ``exception`` give a failure
        caused by the data or a user function as tidemark's own error
        (:mod:`tidemark.spark.runtime.surfacing`).

    Notes
    -----
    The query starts with ``min(spark.sql.shuffle.partitions, cores, 32)`` state partitions
    by default, ``min(spark.sql.shuffle.partitions, max_parallelism)`` when the number of
    key groups was given: more could hold no key group. Spark keeps that number in the
    checkpoint.
    """
    if not isinstance(window, StreamingWindow):
        raise WindowSpecError(
            f"`window` must be the StreamingWindow window_stream returned; got "
            f"{type(window).__name__}"
        )
    check_sinks(sinks)
    _check_trigger_ends(window, trigger)
    spark = window.frame.sparkSession
    check_one_window(window)
    recorded = _records(spark, window, checkpoint)
    check_checkpoint_clock(spark, recorded, window.spark_offset_ms)
    check_checkpoint_layout(spark, recorded, window.state_layout.name)
    check_checkpoint(spark, recorded, window.key_groups.count, window.pipeline)
    all_schemas = {**window.side_schemas, **(schemas or {})}
    claim_tables(
        spark,
        sinks,
        checkpoint,
        lambda name: select_output(window, name, all_schemas.get(name)).schema,
    )
    splitter = _BatchSplitter(
        dict(sinks), all_schemas, cache_always=observation_counts_each_read(spark.version)
    )
    writer = observed_chain(window.frame, window.depth).writeStream.foreachBatch(splitter)
    writer = writer.option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    # each micro-batch's watermarks, beside the checkpoint (for explanations)
    recording = None
    if window.watermarks is not None:
        recording = record_batches(spark, checkpoint, window.watermarks)
    # the RocksDB state store and the capped state partitions, for this query
    with streaming_settings(spark), _partitions_capped(spark, window.key_groups.partitions_cap):
        try:
            started = writer.outputMode("append").start()
            if recording is not None:
                recording.attach(started)
            return TidemarkStreamingQuery(started, batch_failure=splitter.last_failure)
        except AnalysisException as exc:
            if "Multiple applyInPandasWithStates" not in str(exc):
                raise
            raise one_window_per_query() from exc


def _records(spark: Any, window: StreamingWindow, checkpoint: str) -> CheckpointRecords:
    """The records of ``checkpoint`` to compare ``window`` with: those read when it was
    built for ``checkpoint``, unless they showed no start yet (read again: another
    query may have started on it since, and its records must not be overwritten)."""
    recorded = window.recorded
    if recorded is not None and recorded.checkpoint == checkpoint and recorded.started:
        return recorded
    return read_records(spark, checkpoint)


def _check_trigger_ends(window: StreamingWindow, trigger: dict[str, Any] | None) -> None:
    """Refuse ``availableNow`` where Spark would never end the query: in ProcessingTime
    mode Spark runs a micro-batch at every trigger interval, data or not."""
    if (
        trigger
        and trigger.get("availableNow")
        and window.spark_time_mode is TimeMode.PROCESSING_TIME
    ):
        raise WindowSpecError(
            "trigger={'availableNow': True} would never end this query: it serves "
            "processing-time timers (or idleness), so Spark runs it in ProcessingTime mode, "
            "with a micro-batch at every trigger interval, data or not. Use "
            "trigger={'processingTime': '1 second'} and stop the query when done"
        )


@contextlib.contextmanager
def _partitions_capped(spark: Any, cap: int) -> Iterator[None]:
    """Start the query with at most ``cap`` state partitions
    (:func:`~.keygroups.state_partitions_cap`): never more than one per key group (a
    partition beyond ``max_parallelism`` could never hold a key, yet Spark would open
    its state store and run its task in every micro-batch), by default at most 32. The
    query keeps the number it started with (Spark stores it in the checkpoint); the
    session's setting is restored."""
    conf = spark.conf
    before = conf.get(SHUFFLE_PARTITIONS)
    if before is None or int(before) <= cap:
        yield
        return
    conf.set(SHUFFLE_PARTITIONS, str(cap))
    try:
        yield
    finally:
        conf.set(SHUFFLE_PARTITIONS, before)


def observation_counts_each_read(spark_version: str) -> bool:
    """Whether this Spark sums a micro-batch's observed figures over every read of the
    batch in ``foreachBatch``: 4.0 to 4.2 do (a sink reading its batch twice reported
    each figure twice on 4.0.4, 4.1.3, 4.2.0), 4.3 reports one computation's.

    >>> [observation_counts_each_read(v) for v in ("4.0.4", "4.1.3", "4.2.0", "4.3.0")]
    [True, True, True, False]
    """
    major_minor = tuple(int(part) for part in spark_version.split(".")[:2])
    return major_minor < (4, 3)


class _BatchSplitter:
    """foreachBatch function: each micro-batch is computed once, then split by output.

    ``cache_always``: cache the batch for a single sink too, where Spark would count the
    figures again at each read (:func:`observation_counts_each_read`); a read of the
    cache does not run the observation again."""

    def __init__(
        self, sinks: dict[str, Any], schemas: dict[str, StructType], cache_always: bool = False
    ):
        self._sinks = sinks
        self._schemas = schemas
        self._cache_always = cache_always
        self._failure: BaseException | None = None

    def last_failure(self) -> BaseException | None:
        """What a call raised last (it runs on the driver), for the query's errors."""
        return self._failure

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        job_group = _job_group(batch)  # read before a stop can interrupt the thread
        # Several sinks read one cached computation, so that the stateful operator runs
        # once; one sink reads the batch as it comes (caching and releasing it costs
        # every micro-batch time of its own, benchmarks/README.md). A sink that reads its
        # batch twice recomputes it as any foreachBatch batch: the same rows, from the
        # same input, state version, watermark and batch clock; but Spark before 4.3
        # would count its figures twice, so there one sink reads a cache too.
        shared = len(self._sinks) > 1 or self._cache_always
        if shared:
            batch.persist()
        try:
            for name, sink in self._sinks.items():
                sink(select_output(batch, name, self._schemas.get(name)), batch_id)
        except Exception as exc:
            # query.stop() interrupting this micro-batch: raised as the line Spark reads
            self._failure = stop_signal(exc, job_group) or exc
            if self._failure is not exc:
                raise self._failure from None
            raise
        finally:
            if shared:
                batch.unpersist()


def _job_group(batch: DataFrame) -> str | None:
    """The query's job group (its run id) in its ``foreachBatch`` function, where Spark
    runs the micro-batch's jobs; None where it cannot be read (the JVM gone, Connect)."""
    try:
        group = batch.sparkSession.sparkContext.getLocalProperty("spark.jobGroup.id")
    except Exception:
        return None
    return str(group) if group else None


def observation_name(depth: int | None = None) -> str:
    """The observation of a chain's ``depth``-th window (1 = the first) that is not its
    last; of the last window (or a window alone) without ``depth``.

    >>> observation_name(), observation_name(1)
    ('tidemark', 'tidemark_window1')
    """
    return OBSERVATION if depth is None else f"{OBSERVATION}_window{depth}"


def observed_chain(frame: Any, depth: int) -> Any:
    """The combined frame of the ``depth``-th (last) window of a chain (1: a window
    alone) observing each window's figures (:func:`observation_name`)."""
    frame = observed(frame)
    for earlier in range(1, depth):
        name = upstream_output_name(earlier, STATS_OUTPUT)
        frame = observed(frame, observation_name(earlier), name)
    return frame
