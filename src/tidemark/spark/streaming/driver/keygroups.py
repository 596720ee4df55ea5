"""Key groups on Spark's partitions: which value Spark groups a key group's rows under.

A row's key group is ``g = pmod(hash(key columns), G)`` with ``G`` the query's
``max_parallelism`` (Flink's ``KeyGroupRangeAssignment``). Spark then places the group in
a state partition by hashing the value it groups by: ``pmod(hash(value), P)``. Grouping by
``g`` itself would scatter the groups at random, and with few groups per partition one
core may get twice the work of another (with ``G = P = 2``, groups 0 and 1 both hash to
partition 1). So Spark groups by the group's *slot*: the smallest non-negative int whose
Spark hash is ``g`` modulo ``G``. Whenever ``P`` divides ``G`` (always when the query
starts with its default ``P`` partitions (:func:`session_state_partitions`) and the default
``G = 4 P``, or ``P = min(spark.sql.shuffle.partitions, G)`` with ``G`` a multiple of
the shuffle partitions), group ``g`` lands in partition
``g mod P``: every partition holds ``G / P`` groups. Correctness never depends on it: the
slot is a fixed function of ``g`` and ``G`` (both kept with the checkpoint), and a group's
state lives under its slot whatever partition Spark puts it in.

The hash is Spark's ``hash`` (Murmur3 x86 32-bit, seed 42) of an IntegerType value, the
one ``HashPartitioning`` uses; :func:`spark_int_hash` computes it in Python.

The number of groups is fixed when a query first starts. A group's state lives under its
slot, and slots of another number of groups mostly differ, so a restart with another
number would find little of its state and could not tell: the number is kept beside the
checkpoint and another one refused before the query starts (:mod:`.checkpoint`), and each
group's row keeps it too (:mod:`~tidemark.spark.streaming.worker.state`).

>>> spark_int_hash(0), spark_int_hash(-5)
(933211791, 1369497261)
>>> slots(2)
(2, 0)
>>> [spark_int_hash(s) % 4 for s in slots(4)]
[0, 1, 2, 3]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F

from tidemark.errors import WindowSpecError
from tidemark.spark.runtime.confs import MAX_KEY_GROUPS, MAX_PARALLELISM
from tidemark.spark.runtime.session import session_cores
from tidemark.time import exact_int

__all__ = [
    "KeyGroups",
    "spark_int_hash",
    "slots",
    "slot_column",
    "DEFAULT_STATE_PARTITIONS",
    "GROUPS_PER_PARTITION",
    "MAX_PARALLELISM_CONF",
    "SHUFFLE_PARTITIONS",
    "session_max_parallelism",
    "session_state_partitions",
    "explicit_max_parallelism",
    "state_partitions_cap",
    "check_max_parallelism",
]


DEFAULT_STATE_PARTITIONS = 32
"""The most state partitions a streaming query gets by default (see :func:`session_state_partitions`)."""

GROUPS_PER_PARTITION = 4
"""Key groups per state partition by default (see :func:`session_max_parallelism`)."""

MAX_PARALLELISM_CONF = MAX_PARALLELISM.name
"""The number of key groups of a streaming query (see :mod:`tidemark.spark.streaming.worker.state`):
read when the query is built, fixed at its first start."""

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
"""Spark's number of shuffle partitions: a new query's state partitions (capped)."""


def session_state_partitions(spark: Any) -> int:
    """The state partitions a new streaming query on ``spark`` starts with by default:
    ``min(spark.sql.shuffle.partitions, cores, 32)``, the cores being the session's
    default parallelism (a classic session's ``defaultParallelism``; over Spark Connect
    ``spark.default.parallelism`` where set, else the shuffle partitions).

    A state partition runs a task and opens its state store in every micro-batch, data
    or not, so more partitions than cores only add waiting (Spark's default 200 shuffle
    partitions cost a 2-core machine seconds per micro-batch). Spark keeps the number
    a query started with in its checkpoint, whatever the session says at a restart.
    """
    shuffle = int(spark.conf.get(SHUFFLE_PARTITIONS, "200"))
    return max(1, min(shuffle, session_cores(spark), DEFAULT_STATE_PARTITIONS))


def explicit_max_parallelism(spark: Any) -> bool:
    """Whether the session fixes the number of key groups (:data:`MAX_PARALLELISM_CONF`)."""
    return MAX_PARALLELISM.read(spark) is not None


def session_max_parallelism(spark: Any) -> int:
    """The key groups of a new streaming query on ``spark``: :data:`MAX_PARALLELISM_CONF`,
    else :data:`GROUPS_PER_PARTITION` per state partition (:func:`session_state_partitions`).

    A call per group and micro-batch costs little (the group's state comes with its
    rows). In the row layout Spark copies a group's whole row between the JVM and Python
    at every call, byte by byte, so a few groups per partition serve large key counts
    better than one; in the deltas layout a call writes the keys it touched, and one
    group per partition was no faster (see benchmarks/README.md).
    """
    value = MAX_PARALLELISM.read(spark)
    if value is None:
        return GROUPS_PER_PARTITION * session_state_partitions(spark)
    return value


def state_partitions_cap(spark: Any, max_parallelism: int | None) -> int:
    """The most state partitions a query with ``max_parallelism`` key groups (None: the
    session's) starts with: one per group when the number was given (more could hold no
    group), else :func:`session_state_partitions`."""
    if max_parallelism is None and not explicit_max_parallelism(spark):
        return session_state_partitions(spark)
    return max_parallelism if max_parallelism is not None else session_max_parallelism(spark)


@dataclass(frozen=True)
class KeyGroups:
    """A query's number of key groups, decided before its frame is built, and the most
    state partitions it starts with (:func:`state_partitions_cap`).

    >>> KeyGroups(8, 2).count
    8
    """

    count: int
    partitions_cap: int

    @classmethod
    def decide(cls, spark: Any, given: int | None, recorded: int | None = None) -> KeyGroups:
        """The number ``given`` (or the session's :data:`MAX_PARALLELISM_CONF`), else the
        session's default; at a restart, the number ``recorded`` beside the checkpoint
        where the session only gives its default (then as if given)."""
        follows_session = given is None and not explicit_max_parallelism(spark)
        if follows_session and recorded is not None:
            if recorded != session_max_parallelism(spark):
                given = recorded
        count = check_max_parallelism(
            given if given is not None else session_max_parallelism(spark)
        )
        return cls(count, state_partitions_cap(spark, count if given is not None else None))


def check_max_parallelism(max_parallelism: int) -> int:
    """A number of key groups as an int (a NumPy integer too), or refused outside
    Flink's range."""
    count = exact_int(max_parallelism)
    if count is None or not 1 <= count <= MAX_KEY_GROUPS:
        raise WindowSpecError(
            f"`max_parallelism` must be an int in [1, {MAX_KEY_GROUPS}]; got "
            f"max_parallelism={max_parallelism!r}"
        )
    return count


_MASK = 0xFFFFFFFF
_SPARK_HASH_SEED = 42


def _rotate_left(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def spark_int_hash(value: int) -> int:
    """Spark's ``hash(value)`` of an IntegerType value (``Murmur3_x86_32.hashInt``)."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotate_left(k1, 15) * 0x1B873593 & _MASK
    h1 = _rotate_left(_SPARK_HASH_SEED ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the input's length in bytes
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & _MASK
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


@functools.lru_cache(maxsize=16)
def slots(groups: int) -> tuple[int, ...]:
    """For each key group ``g`` of ``groups``, the smallest int >= 0 whose Spark hash is
    ``g`` modulo ``groups`` (Python's ``%`` is Spark's ``pmod`` for a positive divisor)."""
    found: dict[int, int] = {}
    candidate = 0
    while len(found) < groups:
        found.setdefault(spark_int_hash(candidate) % groups, candidate)
        candidate += 1
    return tuple(found[g] for g in range(groups))


def slot_column(key_columns: list[str], groups: int) -> Any:
    """The IntegerType column Spark groups a row by: its key group's slot (SQL text,
    parsed by Spark in one call)."""
    columns = ", ".join("`" + c.replace("`", "``") + "`" for c in key_columns)
    group = f"pmod(hash({columns}), {groups})"
    if groups == 1:
        return F.expr(group)
    table = ", ".join(str(s) for s in slots(groups))
    return F.expr(f"element_at(array({table}), {group} + 1)")
