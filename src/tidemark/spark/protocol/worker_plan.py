"""What a Spark worker of either mode knows of the window it runs: :class:`WorkerPlan`.

One contract, built on the driver and shipped to the workers, that BATCH's
:class:`~tidemark.spark.batch.worker.RunnerConfig` (BATCH and replays) and streaming's
:class:`~tidemark.spark.streaming.worker.config.ProcessorConfig` each extend with what
their mode adds: the window's one record (its
:class:`~tidemark._engine.spec.OperatorSpec`, with the run's options), the columns of
the Rows handed to the user's functions with their Spark type names, and the schema of
a main result. A worker builds the window's operator from the spec, where the window
runs (:meth:`WorkerPlan.make_operator`), and reads anything else of the window (its
assigner, its late-data tag) from the spec itself: no operator is built to be read.
Picklable: no DataFrames in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tidemark._engine.contract import OperatorHandle
from tidemark._engine.create import create_window_operator
from tidemark._engine.spec import OperatorSpec

__all__ = ["WorkerPlan"]


@dataclass(frozen=True)
class WorkerPlan:
    """The window a worker runs, as both modes ship it.

    Attributes
    ----------
    spec : OperatorSpec
        The window's one record, with the run's options.
    value_names, value_types : tuple of str
        The columns of the Rows handed to the user's functions, and their Spark type
        names (``LongType``...).
    result_schema : StructType
        The columns of a main result (:attr:`result_names`, in order): a result a field
        cannot hold fails naming the field
        (:class:`~tidemark.errors.WindowResultError`), not in Spark's Arrow conversion.
    """

    spec: OperatorSpec
    value_names: tuple[str, ...]
    value_types: tuple[str, ...]
    result_schema: Any

    @cached_property
    def result_names(self) -> tuple[str, ...]:
        """The result columns' names, in order."""
        return tuple(self.result_schema.fieldNames())

    def make_operator(self) -> OperatorHandle:
        """An operator of :attr:`spec` (one per partition, or per key group and
        micro-batch)."""
        return create_window_operator(self.spec)
