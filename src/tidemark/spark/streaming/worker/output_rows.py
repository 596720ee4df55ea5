"""A key group's output rows, phased or not, chosen once per query.

A window's operator emits results, side outputs and a late-record count; they leave a
call as rows of the combined schema (:mod:`tidemark.spark.protocol.columns`). A window that feeds
a later one in the same query (a chain, :mod:`~tidemark.spark.streaming.driver.chain`)
marks each row with its phase: whether it fired on advancing to the batch's watermark
(``EARLY``, with the watermark it follows) or on the batch's elements; and it is called
at every watermark advance while it holds keys, so its row knows the watermark it
forwarded last.
:func:`outputs_for` picks :class:`Outputs` or :class:`PhasedOutputs`.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.pandas.types import to_arrow_schema

from tidemark._engine.contract import OperatorHandle
from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import DROPPED_OUTPUT, EARLY, MAIN, ON_ELEMENTS, encode_side
from tidemark.spark.protocol.value_errors import checked_array
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.state import StoredGroup
from tidemark.spark.streaming.worker.time_advance import BatchClock, Timers

__all__ = ["Outputs", "PhasedOutputs", "outputs_for"]


class Outputs:
    """Output rows without a phase (the last window of a query)."""

    _after_elements: tuple[Any, ...] = ()

    def __init__(self, config: ProcessorConfig):
        self._config = config
        self._fields = _arrow_fields(config.result_schema)

    def records(
        self, operator: OperatorHandle, before_elements: int, follows: int | None
    ) -> list[tuple[Any, ...]]:
        """The operator's results, side outputs and dropped count as combined-schema rows;
        the first ``before_elements`` results were emitted on the watermark."""
        config = self._config
        blanks = (None,) * len(config.result_names)
        late = self._after_elements
        records: list[tuple[Any, ...]] = []
        results: list[tuple[Any, ...]] = []
        for n, (value, timestamp) in enumerate(operator.output):
            result = tuple(config.result_to_row(value, timestamp))
            if len(result) != len(blanks):
                raise WindowSpecError(
                    f"`result_to_row` must return {len(blanks)} values {list(config.result_names)};"
                    f" got {result!r}"
                )
            phase = self._phase(n < before_elements, follows)
            results.append(result)
            records.append((MAIN, timestamp, *result, None, None, *phase))
        self._check_results(results, operator)
        for tag, items in operator.side_outputs.items():
            for value, timestamp in items:
                records.append((tag.tag_id, timestamp, *blanks, encode_side(value), None, *late))
        if operator.num_late_records_dropped:
            dropped = operator.num_late_records_dropped
            records.append((DROPPED_OUTPUT, None, *blanks, None, dropped, *late))
        return records

    def _check_results(self, results: list[tuple[Any, ...]], operator: OperatorHandle) -> None:
        """Fail, naming the field, on a result value Spark's Arrow conversion of the
        output would refuse (a string for a ``long``, an int past 64 bits)."""
        if not results or not self._fields:
            return
        stamps = [timestamp for _, timestamp in operator.output]

        def describe(index: int) -> str:
            return f"result {results[index]!r}, window max_timestamp={stamps[index]}"

        for position, (arrow_type, field) in enumerate(self._fields):
            checked_array([r[position] for r in results], arrow_type, field, describe)

    def _phase(self, on_watermark: bool, follows: int | None) -> tuple[Any, ...]:
        return ()

    def group_timers(self, timers: Timers, group: StoredGroup, clock: BatchClock) -> Timers:
        """The group's Spark timers, given the time advance's."""
        return timers


class PhasedOutputs(Outputs):
    """Output rows with ``__tm_phase`` and ``__tm_forwarded``: a window feeding a later
    one. Chains run in EventTime queries only, where Spark holds the event-time timer."""

    _after_elements = (ON_ELEMENTS, None)

    def _phase(self, on_watermark: bool, follows: int | None) -> tuple[Any, ...]:
        return (EARLY, follows) if on_watermark else self._after_elements

    def group_timers(self, timers: Timers, group: StoredGroup, clock: BatchClock) -> Timers:
        event_timer, processing_timer = timers
        if group.keys:
            next_advance = clock.spark_watermark_ms + 1
            event_timer = next_advance if event_timer is None else min(event_timer, next_advance)
        return event_timer, processing_timer


def _arrow_fields(schema: Any) -> list[tuple[Any, Any]]:
    """(Arrow type, Spark field) of each result column; none without a schema."""
    if schema is None:
        return []
    try:
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # PySpark releases whose to_arrow_schema takes no time zone
        arrow_schema = to_arrow_schema(schema)
    return [(f.type, schema[f.name]) for f in arrow_schema]


def outputs_for(config: ProcessorConfig) -> Outputs:
    """The output rows of ``config``'s window, chosen once."""
    return PhasedOutputs(config) if config.feeds_downstream else Outputs(config)
