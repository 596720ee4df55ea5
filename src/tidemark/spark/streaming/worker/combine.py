"""A stream's elements folded per window before the shuffle: the stateless step of a
streaming window that runs as a local-global aggregation (:mod:`tidemark._engine.partials`;
where it runs: :mod:`tidemark.spark.streaming.driver.combine`).

:class:`PartitionCombiner` is a ``mapInPandas`` function over the key groups' input (its
key-group and lossless columns included). Per input partition of a micro-batch it reads
the rows as a key group's call reads them (:class:`~.inputs.ColumnValues`: the same
Rows), folds each window's elements with the user's function (one ``add`` per element,
in any order: the function is declared order-insensitive), and emits, once the partition
ends, one row per window: the columns of one of its rows (its key and key group), its
``__tm_ts`` the earliest of its elements' timestamps and its ``__tm_partial`` the
pickled :class:`~tidemark._engine.partials.Partial`. A row whose timestamp the call must
see as it is (null, outside what the windows hold, an end-of-input marker) passes
untouched, ``__tm_partial`` null.

The step decides nothing about time: the key group's call judges each partial against
the key's watermark (:class:`~.inputs.CombinedRows`), as it judges an element. It serves
a ``window_all`` (every row of one key, the engine key None).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from tidemark._engine.functions import ReturnedNone, returned_none
from tidemark._engine.partials import Partial
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import UserFunctionError
from tidemark.spark.codec import column_values, row_type_of
from tidemark.spark.columns import KEY_GROUP, PARTIAL, encode_side
from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.inputs import ColumnValues, value_rows
from tidemark.windows import TimeWindow

__all__ = ["PartitionCombiner"]

_FOLD = "the reduce/aggregate function"


class PartitionCombiner:
    """``mapInPandas`` function: an input partition's rows folded per window into
    partials (module docstring). ``config`` is the key groups' (its input columns);
    ``spec`` the window's, of event-time tumbling windows."""

    def __init__(self, config: ProcessorConfig, spec: OperatorSpec):
        layout = spec.assigner.aligned_layout()
        assert layout is not None and layout.size_ms == layout.slide_ms
        self._config = config
        self._logic = spec.logic
        self._size_ms, self._offset_ms = layout.size_ms, layout.offset_ms
        low, high = spec.assigner.timestamp_range()
        self._low, self._high = low, min(high, END_OF_INPUT_MS - 1)
        self._row_type = row_type_of(config.value_names)

    def __call__(self, frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        windows: dict[int, list[Any]] = {}  # start -> [contents, elements, earliest ms]
        template: list[Any] | None = None  # a partial's row but its timestamp and partial
        names: list[str] = []
        for pdf in frames:
            stamps, folded = self._timestamps(pdf)
            if not folded.all():
                yield pdf[~folded].assign(**{PARTIAL: None})
            if folded.any():
                if template is None:
                    template, names = self._template(pdf, folded), list(pdf.columns)
                self._fold(pdf, stamps, folded, windows)
        if template is not None:
            yield self._partials(template, names, windows)

    def _template(self, pdf: pd.DataFrame, folded: Any) -> list[Any]:
        """A partial's columns: a folded row's key columns, key group and packed nested
        values (read, never used: the call reads a partial row's values as any row's),
        the other columns null."""
        config = self._config
        kept = [*config.key_positions, pdf.columns.get_loc(KEY_GROUP)]
        if config.pandas_input.packed_column >= 0:
            kept.append(config.pandas_input.packed_column)
        first = pdf[folded].iloc[0]
        template: list[Any] = [None] * len(pdf.columns)
        for position in kept:
            value = first.iloc[position]
            template[position] = value.item() if isinstance(value, np.generic) else value
        return template

    def _timestamps(self, pdf: pd.DataFrame) -> tuple[Any, Any]:
        """The rows' timestamps (ms; 0 where null) and which rows fold: those whose
        timestamp is not null, within what the windows hold and not end-of-input."""
        series = pdf.iloc[:, self._config.timestamp_position]
        if series.dtype.kind == "i":  # no null
            stamps = series.to_numpy(dtype=np.int64)
            valid = np.ones(len(stamps), dtype=bool)
        else:
            values = column_values(series, "LongType")
            valid = np.fromiter((v is not None for v in values), bool, len(values))
            stamps = np.fromiter((0 if v is None else v for v in values), np.int64, len(values))
        return stamps, valid & (stamps >= self._low) & (stamps <= self._high)

    def _fold(self, pdf: pd.DataFrame, stamps: Any, folded: Any, windows: dict) -> None:
        """Fold the ``folded`` rows of ``pdf`` into their windows' entries."""
        rows = value_rows(ColumnValues(pdf, self._config), self._config, self._row_type, len(pdf))
        where = np.flatnonzero(folded)
        times = stamps[where]
        starts = times - (times - self._offset_ms) % self._size_ms
        order = np.argsort(starts, kind="stable")
        ordered = starts[order]
        bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), len(order)]
        for first, end in zip(bounds, bounds[1:]):
            picked = order[first:end]
            elements = [rows[i] for i in where[picked].tolist()]
            self._add(windows, int(ordered[first]), elements, int(times[picked].min()))

    def _add(self, windows: dict, start: int, elements: list[Any], earliest: int) -> None:
        entry = windows.get(start)
        try:
            contents = self._logic.add_all(None if entry is None else entry[0], elements)
        except Exception as exc:
            raise self._error(start, exc) from exc
        if entry is None:
            windows[start] = [contents, len(elements), earliest]
        else:
            entry[0], entry[1], entry[2] = (
                contents,
                entry[1] + len(elements),
                min(entry[2], earliest),
            )

    def _error(self, start: int, exc: Exception) -> UserFunctionError:
        """The user's fold failing: the key (a window_all's, None) and the window; no
        watermark, which this step does not know (the key groups' call judges time)."""
        window = TimeWindow(start, start + self._size_ms)
        if isinstance(exc, ReturnedNone):
            return returned_none(_FOLD, self._logic.function, None, window, None)  # type: ignore[arg-type]
        return UserFunctionError(_FOLD, None, window, None, exc)

    def _partials(self, template: list[Any], names: list[str], windows: dict) -> pd.DataFrame:
        """One row per window: ``template``'s values, the earliest timestamp, the partial."""
        at = self._config.timestamp_position
        records = []
        for start, (contents, elements, earliest) in windows.items():
            record = list(template)
            record[at] = earliest
            partial = Partial(start, start + self._size_ms, contents, elements)
            records.append((*record, encode_side(partial)))
        return pd.DataFrame(records, columns=[*names, PARTIAL], dtype=object)
