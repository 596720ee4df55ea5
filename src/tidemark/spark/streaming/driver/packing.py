"""Where a stream's rows are packed per key group before the shuffle
(:mod:`tidemark.spark.streaming.worker.packing` says how and why).

A window whose key groups run in ``transformWithStateInPandas`` (the deltas layout, or a
chain's first window) and read the source's rows gets a stateless ``mapInArrow`` before
Spark's stateful operator; its calls unpack the rows. The results, figures and state
are the same either way, so a restart may switch it. Set the Spark conf
``spark.tidemark.streaming.packInput=false`` (or ``spark.tidemark.fastPaths=false``) to
hand the operator the rows as they are. The guide: ``docs/streaming.md`` ("State
layouts").
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, StructField, StructType

from tidemark.spark.plan import fast_paths_enabled
from tidemark.spark.protocol.columns import KEY_GROUP, KEY_GROUP_ROWS
from tidemark.spark.runtime.confs import STREAMING_PACK_INPUT
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.packing import (
    Unpacking,
    arrow_to_pandas,
    pack_batches,
)

__all__ = ["packed_input"]

_PREFER_INT_EXT = "spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype"


def packed_input(prepared: DataFrame, config: ProcessorConfig) -> tuple[DataFrame, ProcessorConfig]:
    """``prepared`` (the key groups' input) packed per key group, and ``config``
    unpacking it; both as they are where packing does not serve (a window reading an
    earlier window's rows, a PySpark without the converter, the switches off)."""
    spark = prepared.sparkSession
    if config.upstream is not None or arrow_to_pandas is None:
        return prepared, config
    if not fast_paths_enabled(spark) or not STREAMING_PACK_INPUT.enabled(spark):
        return prepared, config
    schema = StructType(
        [prepared.schema[KEY_GROUP], StructField(KEY_GROUP_ROWS, BinaryType(), False)]
    )
    unpacking = Unpacking(
        timezone=str(spark.conf.get("spark.sql.session.timeZone")),
        prefer_int_ext_dtype=str(spark.conf.get(_PREFER_INT_EXT, "false")).lower() == "true",
    )
    return prepared.mapInArrow(pack_batches, schema), replace(config, unpacking=unpacking)
