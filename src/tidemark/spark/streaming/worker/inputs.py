"""Where a key group's rows come from, chosen once per query: the source's rows
(:class:`SourceRows`), the source's rows pre-aggregated before the shuffle
(:class:`PreAggregatedRows`, :mod:`.preaggregate`) or an earlier window's combined frame
(:class:`UpstreamRows`, a chain, :mod:`tidemark.spark.streaming.driver.chain`).

Each reader turns the frames Spark hands one call into *key runs*: each key's Rows and
timestamps in Spark's order, a chain's early rows (fired on the watermark by the earlier
window) apart from the others. :func:`row_reader` picks the reader from the
:class:`~.config.ProcessorConfig`; the per-call path has no
branch on which it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from tidemark.ranges import first_out_of_range, out_of_range_error
from tidemark.spark.protocol.codec import row_type_of
from tidemark.spark.protocol.column_values import column_values
from tidemark.spark.protocol.columns import (
    EARLY,
    MAIN,
    ON_ELEMENTS,
    decode_side,
    is_upstream_output,
    upstream_output_name,
)
from tidemark.spark.streaming.worker.clock import (
    END_OF_INPUT_MS,
    check_timestamp,
    earliest_timestamp,
)
from tidemark.spark.streaming.worker.config import ProcessorConfig

__all__ = [
    "KeyRun",
    "KeyRuns",
    "RowReader",
    "SourceRows",
    "PreAggregatedRows",
    "engine_key_of",
    "UpstreamRows",
    "row_reader",
    "ColumnValues",
    "value_rows",
]


class KeyRun(NamedTuple):
    """A key's rows in one call, each list in Spark's order: the Rows handed to the
    user's functions and their timestamps (ms), fed after the watermark advances, and
    a chain's early rows (:class:`UpstreamRows`), fed before it."""

    early_rows: list[Any]
    early_timestamps: list[Any]
    rows: list[Any]
    timestamps: list[Any]


class KeyRuns(NamedTuple):
    """A call's rows split by key."""

    runs: dict[Any, KeyRun]
    """Each engine key's run, keys in the order of their first row."""
    passed: list[tuple[Any, ...]]
    """An earlier window's other outputs, as rows of this window's output (a chain)."""
    forwarded: dict[Any, int]
    """The watermark each key's early rows follow (a chain)."""


class RowReader:
    """Splits a call's frames into key runs (see the module docstring).

    The Rows are built in one pass and put in key order by one stable sort (each key's
    rows keep Spark's order): what is done in Python per key, not per row, is appending
    the key's rows to its run. Subclasses say which rows are elements."""

    end_of_input: int | None = None
    """A timestamp at or after which a row only marks the end of input (never fed)."""

    def __init__(self, config: ProcessorConfig):
        self._config = config
        self._row_type = row_type_of(config.value_names)
        self._assigner = config.spec.assigner
        self._bounds = self._assigner.timestamp_range()  # what its windows hold

    def split_frames(self, frames: Iterable[pd.DataFrame], spark_watermark_ms: int) -> KeyRuns:
        """A call's rows split by key, frame after frame, under Spark's watermark."""
        runs: dict[Any, KeyRun] = {}
        passed: list[tuple[Any, ...]] = []
        forwarded: dict[Any, int] = {}
        config = self._config
        earliest = earliest_timestamp(
            config.spark_offset_ms, config.out_of_orderness_ms, spark_watermark_ms
        )
        for pdf in frames:
            self._split(pdf, runs, passed, forwarded, earliest)
        return KeyRuns(runs, passed, forwarded)

    def _elements(self, pdf: pd.DataFrame, passed: list[tuple[Any, ...]]) -> tuple[Any, Any, Any]:
        """The rows of ``pdf`` that are elements, their phases and the watermarks their
        early rows follow (None: every row is fed after the watermark)."""
        return pdf, None, None

    def _split(
        self,
        pdf: pd.DataFrame,
        runs: dict[Any, KeyRun],
        passed: list[tuple[Any, ...]],
        forwarded: dict[Any, int],
        earliest: int,
    ) -> None:
        config = self._config
        phases: Any
        follows: Any
        pdf, phases, follows = self._elements(pdf, passed)
        columns = ColumnValues(pdf, config)
        timestamps: Any = columns.at(config.timestamp_position, "LongType")
        keys: Any = columns.keys(config.key_positions, config.key_types)
        rows: Any = self._rows(columns, len(timestamps))
        kept = self._kept_rows(timestamps, keys, earliest)
        if kept is not None:
            keys, timestamps, rows, phases, follows = (
                None if seq is None else [seq[i] for i in kept]
                for seq in (keys, timestamps, rows, phases, follows)
            )
        if not rows:
            return
        at = first_out_of_range(timestamps, *self._bounds)
        if at is not None:
            raise out_of_range_error(self._assigner, timestamps[at], self._bounds, rows[at])
        order, segments = _key_segments(keys, self._engine_key, phases)
        rows, timestamps = _reorder(rows, order), _reorder(timestamps, order)
        follows = None if follows is None else _reorder(follows, order)
        for key, early, start, end in segments:
            run = runs.get(key)
            if run is None:
                run = runs[key] = KeyRun([], [], [], [])
            if not early:
                run.rows.extend(rows[start:end])
                run.timestamps.extend(timestamps[start:end])
                continue
            run.early_rows.extend(rows[start:end])
            run.early_timestamps.extend(timestamps[start:end])
            follow = max((f for f in follows[start:end] if f is not None), default=None)
            if follow is not None:
                forwarded[key] = max(follow, forwarded.get(key, follow))

    def _rows(self, columns: ColumnValues, count: int) -> list[Any]:
        """The ``count`` rows' elements: the Rows of their value columns."""
        return value_rows(columns, self._config, self._row_type, count)

    def _kept_rows(self, timestamps: list[Any], keys: list[Any], earliest: int) -> list[int] | None:
        """The rows to feed (None: all of them): a timestamp the event-time mapping cannot
        carry (before ``earliest``) fails, naming its key; an end-of-input marker only
        moves the watermark."""
        markers = self.end_of_input
        low: Any = None
        high: Any = None
        try:
            low, high = min(timestamps, default=0), max(timestamps, default=0)
        except TypeError:  # a null timestamp among others
            pass
        if low is not None and low >= earliest and (markers is None or high < markers):
            return None
        kept = []
        for row, (timestamp, key) in enumerate(zip(timestamps, keys, strict=True)):
            if timestamp is None or timestamp < earliest:
                check_timestamp(timestamp, key, self._config.time_mode.event_time, earliest)
            elif markers is not None and timestamp >= markers:
                continue
            kept.append(row)
        return kept

    def _engine_key(self, spark_key: Any) -> Any:
        return engine_key_of(self._config, spark_key)


class SourceRows(RowReader):
    """The source's rows: every row is an element, fed after the watermark; a row
    stamped at or after :data:`~.clock.END_OF_INPUT_MS` ends a
    bounded input."""

    end_of_input = END_OF_INPUT_MS


class PreAggregatedRows(SourceRows):
    """The source's rows pre-aggregated before the shuffle (:mod:`.preaggregate`): a row with a
    ``__tm_partial`` is a :class:`~tidemark._engine.partials.Partial`, stamped with its
    earliest element's timestamp; a row without one passed the pre-aggregation untouched
    (a null, out-of-range or end-of-input timestamp), read as :class:`SourceRows` reads
    it, so it fails or ends the input as it would have."""

    def _rows(self, columns: ColumnValues, count: int) -> list[Any]:
        rows = super()._rows(columns, count)
        position = self._config.partial_position
        assert position is not None
        blobs = columns.at(position, "BinaryType")
        return [row if blob is None else decode_side(blob) for row, blob in zip(rows, blobs)]


class UpstreamRows(RowReader):
    """An earlier window's combined frame (:class:`~.config.UpstreamInput`): its results
    are the elements (its early ones fed before the watermark), its other outputs pass
    through."""

    def _elements(self, pdf: pd.DataFrame, passed: list[tuple[Any, ...]]) -> tuple[Any, Any, Any]:
        """The earlier window's results in ``pdf``, their phases and the watermarks they
        follow; its other outputs are appended to ``passed`` as rows of this
        processor's output, renamed."""
        upstream = self._config.upstream
        assert upstream is not None
        at = upstream.timestamp_position
        is_main = (pdf.iloc[:, at + 1] == MAIN).to_numpy()
        if not is_main.all():
            blanks = (None,) * upstream.result_count
            phase = (ON_ELEMENTS, None) if upstream.phased else ()
            others = pdf[~is_main]
            for ts, name, side, dropped in zip(
                column_values(others.iloc[:, at], "LongType"),
                others.iloc[:, at + 1].tolist(),
                others.iloc[:, at + 2].tolist(),
                column_values(others.iloc[:, at + 3], "LongType"),
                strict=True,
            ):
                if not is_upstream_output(name):
                    name = upstream_output_name(upstream.depth, name)
                ts = None if dropped is not None else ts  # a count row has no timestamp
                passed.append((name, ts, *blanks, side, dropped, *phase))
            pdf = pdf[is_main]
        phases = column_values(pdf.iloc[:, at + 4], "LongType")
        return pdf, phases, column_values(pdf.iloc[:, at + 5], "LongType")


def row_reader(config: ProcessorConfig) -> RowReader:
    """The reader of ``config``'s input, chosen once."""
    if config.upstream is not None:
        return UpstreamRows(config)
    return SourceRows(config) if config.partial_position is None else PreAggregatedRows(config)


class ColumnValues:
    """A pandas frame's columns as Python values, as Arrow gives them (a NaN apart from a
    null, nested values as BATCH reads them: :class:`~tidemark.spark.protocol.lossless.PandasInput`),
    each column converted once: one column can be a key, a value and the timestamp."""

    def __init__(self, pdf: pd.DataFrame, config: ProcessorConfig):
        self._series = [column for _, column in pdf.items()]  # cheaper than iloc per column
        self._converted: dict[int, list[Any]] = {}
        self._lossless = config.pandas_input
        self._key_normaliser = config.key_normaliser
        self._unpacked: list[Any] = []

    def at(self, position: int, type_name: str) -> list[Any]:
        values = self._converted.get(position)
        if values is None:
            values = self._lossless.column(self._series, position, type_name, self._unpacked)
            self._converted[position] = values
        return values

    def keys(self, positions: tuple[int, ...], type_names: tuple[str, ...]) -> list[Any]:
        """Each row's Spark key: the key column's value, or a tuple of several (as keys:
        one NaN key, -0.0 as 0.0, structs as Rows and arrays as tuples)."""
        columns = [self.at(i, t) for i, t in zip(positions, type_names, strict=True)]
        keys = columns[0] if len(columns) == 1 else list(zip(*columns))
        normalise = self._key_normaliser
        return keys if normalise is None else list(map(normalise, keys))


def engine_key_of(config: ProcessorConfig, spark_key: Any) -> Any:
    """The engine's key of a Spark key (:meth:`ColumnValues.keys`'s value of a row)."""
    single = len(config.key_positions) == 1
    as_tuple = (spark_key,) if single else tuple(spark_key)
    if config.engine_key is not None:
        return config.engine_key(as_tuple)
    return as_tuple[0] if single else as_tuple


def value_rows(columns: ColumnValues, config: ProcessorConfig, row_type: Any, count: int) -> Any:
    """The Rows (of ``row_type``) handed to the user's functions for ``count`` rows."""
    values = [
        columns.at(i, t) for i, t in zip(config.value_positions, config.value_types, strict=True)
    ]
    tuples = zip(*values) if values else repeat((), count)
    return list(map(tuple.__new__, repeat(row_type), tuples))


def _key_segments(
    keys: list[Any], engine_key: Callable[[Any], Any], phases: list[Any] | None
) -> tuple[Sequence[int], list[tuple[Any, bool, int, int]]]:
    """The rows' order by key (stable) and its segments: (engine key, early, start, end),
    keys in the order of their first row, a key's early rows (a chain's, ``phases``)
    apart from its others. Spark keys that are one engine key are one segment."""
    n = len(keys)
    if phases is None and n and keys.count(keys[0]) == n:
        # one key (every row of a window_all; a key group holding one hot key): the
        # rows stay in Spark's order, one segment
        return range(n), [(engine_key(keys[0]), False, 0, n)]
    first_rows: dict[Any, int] = {}
    codes = np.fromiter(map(first_rows.setdefault, keys, range(n)), dtype=np.int64, count=n)
    owners: dict[Any, int] = {}  # engine key -> the first row of its first Spark key
    engine_keys: dict[int, Any] = {}
    merged: dict[int, int] = {}
    for spark_key, row in first_rows.items():
        key = engine_key(spark_key)
        owner = owners.setdefault(key, row)
        if owner == row:
            engine_keys[row] = key
        else:
            merged[row] = owner
    if merged:
        codes = np.fromiter((merged.get(c, c) for c in codes.tolist()), np.int64, count=n)
    late = 1 if phases is None else np.fromiter((p != EARLY for p in phases), np.int64, n)
    codes = codes * 2 + late
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()]
    ends = [*starts[1:], n]
    firsts = ordered[starts].tolist()
    segments = [
        (engine_keys[code >> 1], not code & 1, start, end)
        for code, start, end in zip(firsts, starts, ends, strict=True)
    ]
    return order.tolist(), segments


def _reorder(values: list[Any], order: Sequence[int]) -> Any:
    """``values`` in ``order`` (a sequence; a range: as they are)."""
    if isinstance(order, range) or len(order) < 2:
        return values
    return itemgetter(*order)(values)
