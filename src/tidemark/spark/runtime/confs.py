"""tidemark's own Spark confs (``spark.tidemark.*``): each declared once, with its reader.

Every conf tidemark reads is one of :data:`CONFS`, and is read only through its
declaration here. A set value is parsed as Spark parses its own confs of the same kind
(``ConfigBuilder``): surrounding spaces and control characters stripped (Java's
``String.trim``), a switch ``true`` or ``false`` in any case, a whole number in decimal
digits with an optional sign, a choice one of its names in any case, a size in bytes
digits with an optional ``k``/``m``/``g``. An unset conf reads as its default. Any other
value is refused with a :class:`~tidemark.errors.WindowSpecError` naming the conf, its
rule, the value given and what to set instead; never read as the default, nor as "on".

The confs are read on the driver (a worker has no session), when a BATCH run is planned
(``to_dataframe``, ``collect``) or a streaming query's frame is built, so the error
reaches the user there; :func:`check_all` reads them all at that point, so a conf the
run's path does not need is refused too. The accepted values of each: docs/configuration.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tidemark.errors import WindowSpecError

__all__ = [
    "Switch",
    "WholeNumber",
    "Choice",
    "ByteSize",
    "CONFS",
    "check_all",
    "FAST_PATHS",
    "SLICE_INCREMENTAL",
    "SQL_FAST_PATH",
    "PRE_AGGREGATE",
    "VECTORIZED_FAST_PATH",
    "WORKER_SORT_BYTES",
    "STREAMING_PRE_AGGREGATE",
    "STREAMING_PRE_AGGREGATE_KEYED",
    "STREAMING_PACK_INPUT",
    "MAX_KEY_GROUPS",
    "MAX_PARALLELISM",
    "STATE_LAYOUT",
    "STATE_CACHE_KEYS",
    "STATE_COMPACT_BYTES",
]

_TRIM = "".join(map(chr, range(0x21)))  # what Java's String.trim strips, as Spark does
_INTEGER = re.compile(r"[+-]?[0-9]+")
_BYTES = re.compile(r"([0-9]+)([kmg]?)")
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _given(spark: Any, name: str) -> str | None:
    """The session's value of ``name`` (None where unset)."""
    value = spark.conf.get(name, None)
    return None if value is None else str(value)


@dataclass(frozen=True)
class Switch:
    """A boolean conf: ``true`` or ``false`` in any case, spaces around ignored.

    >>> Switch("spark.tidemark.x", True, "do x", "skip x").parse(" FALSE ")
    False
    """

    name: str
    default: bool
    when_true: str  # what ``true`` does, for the error's fix
    when_false: str

    def enabled(self, spark: Any) -> bool:
        """The switch in ``spark``'s session (its default where unset)."""
        value = _given(spark, self.name)
        return self.default if value is None else self.parse(value)

    def parse(self, value: str) -> bool:
        """``value`` as Spark's ``booleanConf`` reads it, else the error with the fix."""
        text = value.strip(_TRIM).lower()
        if text in ("true", "false"):
            return text == "true"
        raise WindowSpecError(
            f"`{self.name}` must be true or false; got {value!r}: set it to false to "
            f"{self.when_false}, or to true to {self.when_true} (unset, it is "
            f"{str(self.default).lower()})"
        )


@dataclass(frozen=True)
class WholeNumber:
    """An integer conf in ``[minimum, maximum]``: decimal digits, an optional sign."""

    name: str
    minimum: int
    maximum: int | None
    rule: str  # the rule as the error states it, e.g. "a positive whole number"
    fix: str  # what to set instead, including what unset means

    def read(self, spark: Any) -> int | None:
        """The number in ``spark``'s session, None where unset (the caller's default)."""
        value = _given(spark, self.name)
        return None if value is None else self.parse(value)

    def parse(self, value: str) -> int:
        """``value`` as a number within the bounds, else the error with the fix."""
        text = value.strip(_TRIM)
        number = int(text) if _INTEGER.fullmatch(text) else None
        if number is None or number < self.minimum:
            raise self._refused(value)
        if self.maximum is not None and number > self.maximum:
            raise self._refused(value)
        return number

    def _refused(self, value: str) -> WindowSpecError:
        return WindowSpecError(f"`{self.name}` must be {self.rule}; got {value!r}: {self.fix}")


@dataclass(frozen=True)
class Choice:
    """A conf naming one of ``choices`` (in any case, spaces around ignored)."""

    name: str
    choices: tuple[str, ...]
    fix: str

    def read(self, spark: Any) -> str | None:
        """The choice in ``spark``'s session, None where unset (the caller's default)."""
        value = _given(spark, self.name)
        return None if value is None else self.parse(value)

    def parse(self, value: str) -> str:
        """``value`` as one of the choices, else the error with the fix."""
        text = value.strip(_TRIM).lower()
        if text in self.choices:
            return text
        raise WindowSpecError(
            f"`{self.name}` must be one of {list(self.choices)}; got {value!r}: {self.fix}"
        )


@dataclass(frozen=True)
class ByteSize:
    """A size in bytes: digits, optionally with ``k``, ``m`` or ``g`` (any case)."""

    name: str
    default: int
    fix: str

    def read(self, spark: Any) -> int:
        """The size in ``spark``'s session (its default where unset)."""
        value = _given(spark, self.name)
        return self.default if value is None else self.parse(value)

    def parse(self, value: Any) -> int:
        """``value`` (text, or an int) in bytes, else the error with the fix."""
        match = _BYTES.fullmatch(str(value).strip(_TRIM).lower())
        if match is None:
            raise WindowSpecError(
                f"`{self.name}` must be a number of bytes, optionally with k/m/g "
                f"(e.g. 256m); got {value!r}: {self.fix}"
            )
        return int(match[1]) * _BYTE_UNITS[match[2]]


FAST_PATHS = Switch(
    "spark.tidemark.fastPaths",
    True,
    when_true="let each pipeline take its fast path",
    when_false="run every pipeline on the general engine operator (no fast path at all)",
)
SLICE_INCREMENTAL = Switch(
    "spark.tidemark.sliceIncremental",
    False,
    when_true="store sliding windows of a reduce or aggregate function once per slice",
    when_false="store each sliding window's state apart",
)
SQL_FAST_PATH = Switch(
    "spark.tidemark.sqlFastPath",
    True,
    when_true="compute BATCH shorthand aggregations in Spark SQL where they apply",
    when_false="run them through the engine",
)
PRE_AGGREGATE = Switch(
    "spark.tidemark.preAggregate",
    True,
    when_true="pre-aggregate a BATCH window_all of an order-insensitive function, and a "
    "keyed vectorized function with a partial step, per partition",
    when_false="run every BATCH window_all in one task, and every vectorized function on all "
    "of a window's values",
)
VECTORIZED_FAST_PATH = Switch(
    "spark.tidemark.vectorizedFastPath",
    True,
    when_true="compute keyed vectorized BATCH windows columnar where they apply",
    when_false="run them through the engine",
)
STREAMING_PRE_AGGREGATE = Switch(
    "spark.tidemark.streaming.preAggregate",
    True,
    when_true="fold a window_all's elements of an order-insensitive function per slice in "
    "each input partition, before the shuffle",
    when_false="fold every element of a stream in its key group",
)
STREAMING_PRE_AGGREGATE_KEYED = Switch(
    "spark.tidemark.streaming.preAggregateKeyed",
    False,
    when_true="fold a keyed window's elements per key and slice in each input partition too "
    "(where spark.tidemark.streaming.preAggregate folds a window_all's)",
    when_false="fold a keyed window's elements in their key groups",
)
STREAMING_PACK_INPUT = Switch(
    "spark.tidemark.streaming.packInput",
    True,
    when_true="pack a stream's rows per key group before a transformWithStateInPandas "
    "operator (the deltas layout)",
    when_false="hand the operator the rows one by one",
)
WORKER_SORT_BYTES = ByteSize(
    "spark.tidemark.batch.workerSortBytes",
    64 << 20,  # per task; a partition of the 10M-event benchmark: ~30 MB
    fix="set the most input a BATCH task sorts in memory (e.g. 256m), 0 to leave the sort "
    "to Spark, or unset it for 64m",
)
MAX_KEY_GROUPS = 32_768  # Flink's upper bound for maxParallelism
MAX_PARALLELISM = WholeNumber(
    "spark.tidemark.streaming.maxParallelism",
    1,
    MAX_KEY_GROUPS,
    rule=f"an int in [1, {MAX_KEY_GROUPS}]",
    fix="set a streaming query's number of key groups (e.g. 128), or unset it for 4 per "
    "state partition",
)
STATE_LAYOUT = Choice(
    "spark.tidemark.streaming.stateLayout",
    ("row", "deltas"),
    fix="set 'deltas' to keep a base plus deltas per key group, 'row' for one row per key "
    "group, or unset it for the checkpoint's layout ('deltas' for a new one)",
)
STATE_CACHE_KEYS = WholeNumber(
    "spark.tidemark.streaming.stateCacheKeys",
    1,
    None,
    rule="a positive whole number",
    fix="set the most keys a Python worker caches in the deltas layout (e.g. 2000000), or "
    "unset it for 2000000",
)
STATE_COMPACT_BYTES = WholeNumber(
    "spark.tidemark.streaming.stateCompactBytes",
    1,
    None,
    rule="a positive whole number",
    fix="set the bytes of a key group's deltas that start a compaction (e.g. 1048576), or "
    "unset it for 1048576 (1 MiB)",
)

CONFS: tuple[Switch | WholeNumber | Choice | ByteSize, ...] = (
    FAST_PATHS,
    SLICE_INCREMENTAL,
    SQL_FAST_PATH,
    PRE_AGGREGATE,
    VECTORIZED_FAST_PATH,
    WORKER_SORT_BYTES,
    STREAMING_PRE_AGGREGATE,
    STREAMING_PRE_AGGREGATE_KEYED,
    STREAMING_PACK_INPUT,
    MAX_PARALLELISM,
    STATE_LAYOUT,
    STATE_CACHE_KEYS,
    STATE_COMPACT_BYTES,
)
"""Every conf tidemark reads, as docs/configuration.md lists them."""


def check_all(spark: Any) -> None:
    """Read every conf of :data:`CONFS` in ``spark``'s session: a malformed value is
    refused whichever confs the run's path reads (a ``window_all`` max on the SQL fast
    path never reads ``spark.tidemark.preAggregate``; a typo there is still a typo).

    Raises
    ------
    WindowSpecError
        The first conf whose value is malformed, as its own reader refuses it.
    """
    for conf in CONFS:
        if isinstance(conf, Switch):
            conf.enabled(spark)
        else:
            conf.read(spark)
