"""Running a window operation on a bounded DataFrame through the engine: BATCH and replay.

The element frame (:mod:`.frames`) is hash-partitioned by key and sorted within
partitions by key then time (BATCH: in the Python worker where Arrow orders the columns
as Spark does, see :mod:`.sorting`) or arrival (replay), and each partition streams
through one engine operator, key after key (:mod:`.worker`); a key's state is dropped
once its last element is processed and its timers flushed, so a task holds the state of
one key at a time. ``window_all`` runs in one partition, as in Flink (unless its function
is declared order-insensitive: :mod:`.preaggregate`).

One run produces results and side outputs together, as the combined frame of
:mod:`tidemark.spark.protocol.columns`.

How many partitions (:func:`engine_partitions`): ``PARTITIONS_PER_CORE`` (4) per core
of the session, at most ``spark.sql.shuffle.partitions``. The cores are
``sparkContext.defaultParallelism`` on a classic session, ``spark.default.parallelism``
over Spark Connect (which does not expose the cluster; without it, the shuffle
partitions). A few partitions per core let one task's Python worker overlap the next
task's shuffle read and sort; many more only add per-task cost (Spark's default of 200
shuffle partitions ran 200 Python tasks for a small input). The input's size is not
consulted: knowing it costs a job (or the JVM, absent on Connect), and a task's memory
is bounded whatever its share of the input (the worker sort spills, :mod:`.sorting`),
so the number sets only how finely work spreads over the cores. Lower
``spark.sql.shuffle.partitions`` to use fewer. (The count is explicit: Spark's adaptive
execution would not coalesce a shuffle inside a persisted plan, and the run is
persisted, see :mod:`tidemark.spark.execution`.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidemark._engine.spec import OperatorSpec
from tidemark.spark.batch import sorting
from tidemark.spark.batch.frames import ElementFrame, long_timestamp_column
from tidemark.spark.batch.worker import PartitionDriver, RunnerConfig
from tidemark.spark.plan import KeySpec, WindowOp
from tidemark.spark.protocol.columns import (
    KEY,
    ORDER,
    PT,
    SEQ,
    TS,
    WM,
    with_function_key,
)
from tidemark.spark.runtime.confs import WORKER_SORT_BYTES
from tidemark.spark.runtime.session import session_cores

__all__ = [
    "run_partitioned",
    "engine_spec",
    "run_in_place",
    "runner_config",
    "engine_partitions",
    "PARTITIONS_PER_CORE",
]

PARTITIONS_PER_CORE = 4


def engine_partitions(spark: Any) -> int:
    """The partitions a keyed BATCH or replay run shuffles its input into (the rule is
    in the module docstring)."""
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions"))
    return max(1, min(shuffle, PARTITIONS_PER_CORE * session_cores(spark)))


def run_partitioned(
    op: WindowOp,
    frame: ElementFrame,
    spark: Any,
    driver: Callable[[RunnerConfig], Any],
    output_schema: Any = None,
) -> Any:
    """The combined frame of ``op`` over ``frame``, run by the engine in Spark tasks,
    each partition by a ``driver`` (BATCH or replay; a function of the task's config).
    ``output_schema``: the schema of what ``driver`` yields, where it is not the
    combined frame's (an explanation's recording, :mod:`.key_events`)."""
    sort_budget = WORKER_SORT_BYTES.read(spark)
    partitioned, key_columns, sort_columns = _partitioned(frame, op.key, spark, sort_budget)
    config = runner_config(
        frame,
        engine_spec(op, frame),
        op.output_schema,
        key_columns,
        function_key=op.key is not None and op.key.function is not None,
        sort_columns=sort_columns,
        sort_budget=sort_budget,
    )
    return _mapped(partitioned, frame, config, driver, output_schema)


def engine_spec(op: WindowOp, frame: ElementFrame) -> OperatorSpec:
    """The spec a BATCH or replay run of ``op`` over ``frame`` ships to its workers."""
    # BATCH: each key's elements come sorted by time, then the watermark jumps to +inf
    return op.run_spec(batch_mode=not frame.replay, record_output_watermarks=frame.replay)


def run_in_place(
    frame: ElementFrame,
    spec: OperatorSpec,
    output_schema: StructType,
    driver: type[PartitionDriver],
) -> Any:
    """The combined frame of one operator of ``spec`` per partition of ``frame`` as it
    is, without a key, a shuffle or a sort (the parts of a pre-aggregated window,
    :mod:`.preaggregate`)."""
    df = frame.df
    if long_timestamp_column(frame) is not None:
        df = df.drop(TS)
    return _mapped(df, frame, runner_config(frame, spec, output_schema), driver)


def runner_config(
    frame: ElementFrame,
    spec: OperatorSpec,
    output_schema: StructType,
    key_columns: list[str] | None = None,
    function_key: bool = False,
    sort_columns: list[str] | None = None,
    sort_budget: int = 0,
) -> RunnerConfig:
    """What a task running ``spec`` over ``frame``'s elements is given."""
    return RunnerConfig(
        spec=spec,
        value_names=tuple(frame.value_schema.fieldNames()),
        value_types=tuple(type(f.dataType).__name__ for f in frame.value_schema.fields),
        result_schema=output_schema,
        key_columns=key_columns or [],
        function_key=function_key,
        replay=frame.replay,
        watermarks=frame.watermarks,
        timestamp_column=frame.timestamp_column,
        has_processing_time=frame.has_processing_time,
        final_processing_time=frame.final_processing_time,
        arrival_times=frame.arrival_times,
        timestamps_in=long_timestamp_column(frame) or TS,
        sort_columns=sort_columns,
        sort_budget=sort_budget,
    )


def _mapped(
    df: Any, frame: ElementFrame, config: RunnerConfig, driver: Any, output_schema: Any = None
) -> Any:
    """``df``'s partitions, each through a ``driver`` of ``config``."""
    needed = [*config.value_names, *config.key_columns]
    needed += _internal_columns(frame, config.key_columns)
    columns = [F.col(f"`{c}`") for c in dict.fromkeys(needed)]
    schema = config.output_schema if output_schema is None else output_schema
    return df.select(*columns).mapInArrow(driver(config), schema)


def _key_columns(df: Any, frame: ElementFrame, key: KeySpec | None) -> tuple[Any, list[str]]:
    """``df`` with a key function's ``__tm_key`` where needed, and the key columns."""
    if key is None:
        return df, []
    if key.function is not None:
        return with_function_key(df, frame.value_schema.fieldNames(), key.function), [KEY]
    return df, list(key.columns)


def _partitioned(
    frame: ElementFrame, key: KeySpec | None, spark: Any, sort_budget: int
) -> tuple[Any, list[str], list[str] | None]:
    """The frame partitioned by key and sorted within partitions by key, then time
    (BATCH) or arrival (replay); its key columns; and, where the worker sorts instead of
    Spark (see :mod:`.sorting`), the columns it sorts by."""
    df = frame.df
    long_ts = long_timestamp_column(frame)
    if long_ts is not None:  # the timestamp column itself, not a copy, goes to the shuffle
        df = df.drop(TS)
    time = long_ts or TS
    df, key_columns = _key_columns(df, frame, key)
    if frame.replay:
        order = [ORDER, SEQ]
    else:  # ties in time: by the columns not already compared
        order = [time, *[c for c in frame.tie_order if c not in (time, *key_columns)]]
    if key is None:
        shuffled = df.repartition(1)
    else:
        partitions = engine_partitions(spark)
        shuffled = df.repartition(partitions, *[F.col(f"`{c}`") for c in key_columns])
    sort_columns = [*key_columns, *order]
    if not frame.replay and sort_budget > 0 and _worker_sorts(df.schema, sort_columns):
        return shuffled, key_columns, sort_columns
    return (
        shuffled.sortWithinPartitions(*[F.col(f"`{c}`") for c in sort_columns]),
        key_columns,
        None,
    )


def _worker_sorts(schema: StructType, columns: list[str]) -> bool:
    """Whether Arrow orders ``columns`` as Spark does (an input sequence it cannot)."""
    return SEQ not in columns and all(sorting.sortable(schema[c].dataType) for c in columns)


def _internal_columns(frame: ElementFrame, key_columns: list[str]) -> list[str]:
    names = [] if long_timestamp_column(frame) else [TS]
    if frame.replay:
        names += [ORDER, WM] + ([PT] if frame.has_processing_time else [])
    if KEY in key_columns:
        names.append(KEY)
    return names
