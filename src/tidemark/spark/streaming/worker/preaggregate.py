"""A stream's elements folded per key and slice before the shuffle: the stateless step of
a streaming window that runs as a local-global aggregation (:mod:`tidemark._engine.partials`;
where it runs: :mod:`tidemark.spark.streaming.driver.preaggregate`).

:class:`PartitionPreAggregation` is a ``mapInPandas`` function over the key groups' input (its
key-group and lossless columns included). Per input partition of a micro-batch it reads
the rows as a key group's call reads them (:class:`~.inputs.ColumnValues`: the same keys
and Rows), folds each key's elements per slice (a tumbling window, or
``gcd(size, slide)`` of sliding windows: :func:`~tidemark._engine.partials.slice_ms`;
processing-time windows: all of a key's elements) with the user's function (one ``add``
per element, in any order: the function is declared order-insensitive), and emits, once
the partition ends, one row per key and slice: the columns of its key's first row (its
key and key group), its ``__tm_ts`` the earliest of its elements' timestamps (null if
none has one, in processing time) and its ``__tm_partial`` the pickled
:class:`~tidemark._engine.partials.Partial`. A row whose timestamp the call must see as
it is (null, outside what the windows hold, an end-of-input marker) passes untouched,
``__tm_partial`` null.

The step decides nothing about time: the key group's call judges each partial against
the key's watermark (:class:`~.inputs.PreAggregatedRows`), as it judges an element. A
``window_all`` has one key (the engine key None).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import Any, cast

import numpy as np
import pandas as pd

from tidemark._engine.functions import ReturnedNone, returned_none
from tidemark._engine.partials import Partial, slice_ms
from tidemark._engine.spec import OperatorSpec
from tidemark.assigners import WindowAssignerContext
from tidemark.errors import UserFunctionError
from tidemark.spark.protocol.codec import row_type_of
from tidemark.spark.protocol.column_values import column_values
from tidemark.spark.protocol.columns import PARTIAL, encode_side
from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.inputs import ColumnValues, engine_key_of, value_rows
from tidemark.windows import TimeWindow, Window

__all__ = ["PartitionPreAggregation"]

_FOLD = "the reduce/aggregate function"
_NO_TIME = np.iinfo(np.int64).max  # a slice whose elements have no timestamp


class PartitionPreAggregation:
    """``mapInPandas`` function: an input partition's rows folded per key and slice into
    partials (module docstring). ``config`` is the key groups' (its input columns);
    ``spec`` the window's, of tumbling or sliding windows (event or processing time)."""

    def __init__(self, config: ProcessorConfig, spec: OperatorSpec):
        layout = spec.assigner.aligned_layout()
        assert layout is not None
        self._config = config
        self._assigner = spec.assigner
        self._logic = spec.logic
        self._slice_ms, self._offset_ms = slice_ms(spec), layout.offset_ms
        low, high = spec.assigner.timestamp_range()
        self._low, self._high = low, min(high, END_OF_INPUT_MS - 1)
        self._event_time = spec.is_event_time
        self._row_type = row_type_of(config.value_names)

    def __call__(self, frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        # (Spark key, slice start) -> [contents, elements, earliest ms]
        slices: dict[tuple[Any, int], list[Any]] = {}
        # a partial's row is a copy of its key's first row (the key, its key group and
        # every helper column as they came: a NaN key stays NaN, :mod:`~..lossless`):
        # Spark key -> (frame, its row in firsts[frame]), firsts the frames' new keys
        templates: dict[Any, tuple[int, int]] = {}
        firsts: list[pd.DataFrame] = []
        for pdf in frames:
            stamps, stamped, folded = self._timestamps(pdf)
            if not folded.all():
                yield pdf[~folded].assign(**{PARTIAL: None})
            if folded.any():
                new_rows = self._fold(pdf, stamps, stamped, folded, slices, templates, len(firsts))
                firsts.append(pdf.iloc[new_rows].reset_index(drop=True))
        yield from self._partials(templates, firsts, slices)

    def _timestamps(self, pdf: pd.DataFrame) -> tuple[Any, Any, Any]:
        """The rows' timestamps (ms; 0 where null), which are not null, and which rows
        fold: in event time those whose timestamp is not null, within what the windows
        hold and not end-of-input; in processing time every row but an end-of-input
        marker (an event timestamp, null or not, places nothing there)."""
        series = pdf.iloc[:, self._config.timestamp_position]
        if series.dtype.kind == "i":  # no null
            stamps = series.to_numpy(dtype=np.int64)
            valid = np.ones(len(stamps), dtype=bool)
        else:
            values = column_values(series, "LongType")
            valid = np.fromiter((v is not None for v in values), bool, len(values))
            stamps = np.fromiter((0 if v is None else v for v in values), np.int64, len(values))
        if not self._event_time:
            return stamps, valid, ~valid | (stamps <= self._high)
        return stamps, valid, valid & (stamps >= self._low) & (stamps <= self._high)

    def _fold(
        self,
        pdf: pd.DataFrame,
        stamps: Any,
        stamped: Any,
        folded: Any,
        slices: dict,
        templates: dict,
        frame: int,
    ) -> list[int]:
        """Fold the ``folded`` rows of ``pdf`` (their timestamps ``stamps``, null where
        not ``stamped``) into their (key, slice) entries; return the first row of each
        key first seen here (``templates`` notes where it goes)."""
        config = self._config
        columns = ColumnValues(pdf, config)
        rows = value_rows(columns, config, self._row_type, len(pdf))
        keys = columns.keys(config.key_positions, config.key_types)
        where = np.flatnonzero(folded)
        times = stamps[where]
        width, offset = self._slice_ms, self._offset_ms
        starts = (
            np.zeros(len(where), np.int64) if width is None else times - (times - offset) % width
        )
        if keys.count(keys[0]) == len(keys):  # one key (a window_all's)
            codes = np.zeros(len(where), np.int64)
        else:  # a key's code: the first of its rows
            picked_keys = map(keys.__getitem__, where.tolist())
            first: dict[Any, int] = {}
            codes = np.fromiter(map(first.setdefault, picked_keys, range(len(where))), np.int64)
        order = np.lexsort((starts, codes))
        codes, starts = codes[order], starts[order]
        bounds = np.flatnonzero((codes[1:] != codes[:-1]) | (starts[1:] != starts[:-1])) + 1
        firsts = np.concatenate(([0], bounds))
        # each slice's earliest timestamp (none: every element's is null, processing time)
        ordered = np.where(stamped[where], times, _NO_TIME)[order]
        earliest = np.minimum.reduceat(ordered, firsts).tolist()
        rows_at = where[order].tolist()
        new_rows: list[int] = []
        ends = [*bounds.tolist(), len(order)]
        for a, b, start, low in zip(firsts.tolist(), ends, starts[firsts].tolist(), earliest):
            key = keys[rows_at[a]]
            if key not in templates:
                templates[key] = (frame, len(new_rows))
                new_rows.append(rows_at[a])
            elements = [rows[i] for i in rows_at[a:b]]
            self._add(slices, key, start, elements, None if low == _NO_TIME else low)
        return new_rows

    def _add(
        self, slices: dict, key: Any, start: int, elements: list[Any], earliest: int | None
    ) -> None:
        entry = slices.get((key, start))
        try:
            contents = self._logic.add_all(None if entry is None else entry[0], elements)
        except Exception as exc:
            raise self._error(key, start, exc) from exc
        if entry is None:
            slices[(key, start)] = [contents, len(elements), earliest]
        else:
            stamps = [t for t in (entry[2], earliest) if t is not None]
            entry[0], entry[1], entry[2] = (
                contents,
                entry[1] + len(elements),
                min(stamps, default=None),
            )

    def _error(self, spark_key: Any, start: int, exc: Exception) -> UserFunctionError:
        """The user's fold failing: the key (a window_all's, None) and the first window
        of the slice; no watermark, which this step does not know (the key groups' call
        judges time)."""
        key = engine_key_of(self._config, spark_key)
        window = None  # processing time: the call places it
        if self._event_time:
            no_context = cast(WindowAssignerContext, None)  # event-time windows read none
            window = min(self._assigner.assign_windows(None, start, no_context), key=_start)
        if isinstance(exc, ReturnedNone):
            return returned_none(_FOLD, self._logic.function, key, window, None)  # type: ignore[arg-type]
        return UserFunctionError(_FOLD, key, window, None, exc)

    def _partials(
        self, templates: dict, firsts: list[pd.DataFrame], slices: dict
    ) -> Iterator[pd.DataFrame]:
        """One row per key and slice: its key's first row, the earliest timestamp, the
        partial; a frame per input frame the keys were first seen in."""
        at, width = self._config.timestamp_position, self._slice_ms or 0
        per_frame: dict[int, tuple[list[int], list[int | None], list[bytes]]] = {}
        for (key, start), (contents, elements, earliest) in slices.items():
            frame, row = templates[key]
            picked, stamps, blobs = per_frame.setdefault(frame, ([], [], []))
            picked.append(row)
            stamps.append(earliest)
            blobs.append(_encoded(Partial(start, start + width, contents, elements)))
        for frame, (picked, stamps, blobs) in per_frame.items():
            out = firsts[frame].iloc[picked].reset_index(drop=True)
            nulls = None in stamps  # processing time: elements without a timestamp
            out.isetitem(at, pd.Series(stamps, dtype=object if nulls else np.int64))
            yield out.assign(**{PARTIAL: pd.Series(blobs, dtype=object)})


_PLAIN = (int, float, str, bool, bytes, type(None))


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is built of Python's own types only (a number, a string, None,
    and tuples or lists of them, nested a little): what ``pickle`` writes by value."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    return kind in (tuple, list) and depth < 3 and all(_plain(v, depth + 1) for v in value)


def _encoded(partial: Partial) -> bytes:
    """``partial`` pickled as ``__tm_partial`` holds it: by ``pickle`` where its contents
    are plain (a count, a sum, a tuple of them), several times faster than cloudpickle,
    which the rest needs (a class of the user's ``__main__`` travels by value). Either
    is read by :func:`~tidemark.spark.protocol.columns.decode_side`."""
    if _plain(partial.contents):
        return pickle.dumps(partial, protocol=pickle.HIGHEST_PROTOCOL)
    return encode_side(partial)


def _start(window: Window) -> int:
    return cast(TimeWindow, window).start
