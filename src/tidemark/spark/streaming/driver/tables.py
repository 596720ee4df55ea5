"""One rule for every table sink: a table belongs to ONE output of ONE query.

Each table sink (:func:`~tidemark.spark.io.sinks.parquet_table`,
:func:`~tidemark.spark.io.sinks.delta_table`, :func:`~tidemark.spark.io.sinks.iceberg_table`)
writes each micro-batch by its batch id; two writers of one table would replace, or
skip, each other's batches, since both count batches from 0. So, before the query
starts, on the driver, :func:`claim_tables` (called by ``write_outputs``):

1. refuses two outputs whose sinks name one table (one path, as the file system names
   it; one table name);
2. has each table sink :meth:`TableSink.claim` its table for its :class:`Owner` (the
   query's checkpoint, which identifies a query across restarts, and the output's name):
   :func:`claim_location` creates the owner record ``_tidemark_owner`` in the table's
   directory if there is none, atomically, and refuses the table when the record names
   another owner. The same owner (a restart) is accepted.

The record is a directory of one text line, as the checkpoint's records are
(:func:`~tidemark.spark.streaming.driver.checkpoint.create_record`); Spark's Parquet
reader, Delta Lake and Iceberg ignore a name beginning with ``_``. The guide:
``docs/kafka.md``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pyspark.sql.types import StructType

from tidemark.errors import WindowSpecError
from tidemark.spark.streaming.driver.checkpoint import create_record, qualified, read_record

__all__ = ["OWNER_RECORD", "Owner", "TableSink", "owner_of", "claim_tables", "claim_location"]

OWNER_RECORD = "_tidemark_owner"
"""The owner record's name in a table's directory."""


@dataclass(frozen=True)
class Owner:
    """Who writes a table: the output ``output`` of the query on ``checkpoint`` (as the
    file system names it)."""

    checkpoint: str
    output: str

    @property
    def id(self) -> str:
        """A short id, stable across restarts (Delta's ``txnAppId``, Iceberg's marker)."""
        digest = hashlib.sha256(f"{self.checkpoint}\0{self.output}".encode()).hexdigest()
        return f"tidemark-{digest[:24]}"

    def record(self) -> str:
        return json.dumps({"checkpoint": self.checkpoint, "output": self.output})

    @classmethod
    def from_record(cls, line: str) -> Owner:
        fields = json.loads(line)
        return cls(fields["checkpoint"], fields["output"])


@runtime_checkable
class TableSink(Protocol):
    """A sink writing a table, which ``write_outputs`` claims for its query."""

    def table_key(self, spark: Any) -> str:
        """What names the table, equal for two sinks of one table."""
        ...

    def claim(self, spark: Any, owner: Owner, schema: StructType) -> None:
        """Called on the driver before the query starts (``schema``: the output's):
        check the session can write the table, claim it for ``owner`` (raising
        :class:`WindowSpecError` when another owner holds it), and keep ``owner`` for
        the writes."""
        ...


def owner_of(spark: Any, checkpoint: str, output: str) -> Owner:
    """The owner of a table written by output ``output`` of the query on ``checkpoint``."""
    return Owner(qualified(spark, checkpoint), str(output))


def claim_tables(
    spark: Any,
    sinks: Mapping[str, Any],
    checkpoint: str,
    schema_of: Callable[[str], StructType],
) -> None:
    """Refuse two outputs writing one table, then claim each output's table for it."""
    tables = {name: sink for name, sink in sinks.items() if isinstance(sink, TableSink)}
    by_key: dict[str, list[str]] = {}
    for name, sink in tables.items():
        by_key.setdefault(sink.table_key(spark), []).append(name)
    shared = {key: names for key, names in by_key.items() if len(names) > 1}
    if shared:
        key, names = next(iter(shared.items()))
        raise WindowSpecError(
            f"outputs {names} write one table, {key}: a table belongs to one output of "
            "one query (each output's batch would replace the other's). Give each output "
            "a table of its own"
        )
    for name, sink in tables.items():
        sink.claim(spark, owner_of(spark, checkpoint, name), schema_of(name))


def claim_location(spark: Any, location: str, table: str, owner: Owner) -> None:
    """Claim the table ``table`` (its description, for messages) whose directory is
    ``location`` for ``owner``: create its owner record, or accept the one there when it
    names ``owner``.

    Raises
    ------
    WindowSpecError
        The record names another owner.
    """
    record = f"{location.rstrip('/')}/{OWNER_RECORD}"
    if create_record(spark, record, owner.record()):
        return
    stored = _stored_owner(spark, record)
    if stored != owner:
        raise WindowSpecError(
            f"{table} belongs to output {stored.output!r} of the query on checkpoint "
            f"{stored.checkpoint!r} ({record}); this query (checkpoint "
            f"{owner.checkpoint!r}) would write its output {owner.output!r} there, and each "
            "would replace or skip the other's batches. Give this output a table of its "
            "own, or delete the table (with its owner record) to start it again"
        )


def _stored_owner(spark: Any, record: str) -> Owner:
    # a writer racing ours may not have written its line yet (on Hadoop file systems
    # the record is created, then written)
    for _ in range(40):
        lines = read_record(spark, record)
        if lines:
            return Owner.from_record(lines[0])
        time.sleep(0.05)
    raise WindowSpecError(
        f"the owner record {record} is empty: a query that claimed the table failed "
        "while writing it. Delete the record and start again"
    )
