"""A key-group call's figures (:class:`~tidemark.spark.protocol.figures.Figures`), counted as the
call runs and emitted as ONE ``"__tm_stats"`` row of the combined frame at its end.

The call (:mod:`.groups`) tells a :class:`CountedFigures` what it does: the elements it
feeds, each key state it restores and takes back, each operator's output. Keys the call
does not visit keep their state, so the state figures are the visited keys' state
after, less before. A query observes the rows' sums in every micro-batch
(:func:`tidemark.spark.streaming.driver.starting.observed_chain`); :func:`figures_for`
picks, once per query, whether its calls count at all (a :class:`ProcessorConfig` built
without ``metrics`` emits no row).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tidemark._engine.contract import OperatorHandle
from tidemark._engine.keystate import KeyState
from tidemark.spark.protocol.columns import ON_ELEMENTS, OUTPUT, PHASE, SIDE, STATS_OUTPUT
from tidemark.spark.protocol.figures import Figures
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.inputs import KeyRun

__all__ = ["CountedFigures", "PreAggregatedFigures", "CallFigures", "figures_for"]


class CallFigures:
    """What a call tells its figures; this one counts nothing and emits no row (a query
    built without ``metrics``)."""

    def fed(self, runs: Iterable[KeyRun]) -> None:
        """The call feeds ``runs`` (:class:`~.inputs.KeyRun` of each key)."""

    def restored(self, key_state: KeyState) -> None:
        """A key's stored state goes back into an operator."""

    def kept(self, key_state: KeyState | None) -> None:
        """A visited key's state after the call (None: it holds none)."""

    def emitted(self, operator: OperatorHandle) -> None:
        """An operator of the call is done: its results, side outputs, dropped count."""

    def record(self) -> tuple[Any, ...] | None:
        """The call's ``"__tm_stats"`` row (None: no row)."""
        return None


class CountedFigures(CallFigures):
    """The counted figures of one call, ``watermark`` the engine watermark it runs under;
    ``template`` is a blank row of the query's output columns."""

    def __init__(self, watermark: int, template: list[Any], side_at: int):
        self.figures = Figures(watermark_ms=watermark)
        self._template = template
        self._side_at = side_at

    def fed(self, runs: Iterable[KeyRun]) -> None:
        self.figures.num_records_in += sum(len(run.early_rows) + len(run.rows) for run in runs)

    def restored(self, key_state: KeyState) -> None:
        figures = self.figures
        figures.keys_in_state_change -= 1
        figures.windows_in_state_change -= len(key_state.contents)

    def kept(self, key_state: KeyState | None) -> None:
        if key_state is not None:
            figures = self.figures
            figures.keys_in_state_change += 1
            figures.windows_in_state_change += len(key_state.contents)

    def emitted(self, operator: OperatorHandle) -> None:
        figures, late = self.figures, operator.late_data_tag
        figures.num_records_out += len(operator.output)
        if late is not None:
            figures.num_late_records_side_output += len(operator.side_outputs.get(late, ()))
        figures.num_late_records_dropped += operator.num_late_records_dropped

    def record(self) -> tuple[Any, ...]:
        row = list(self._template)
        row[self._side_at] = self.figures.encode()
        return tuple(row)


class PreAggregatedFigures(CountedFigures):
    """:class:`CountedFigures` of a query whose rows are pre-aggregated before the shuffle
    (:mod:`.preaggregate`): each fed :class:`~tidemark._engine.partials.Partial` counts the
    elements it holds, as the one-task path counts them one by one."""

    def fed(self, runs: Iterable[KeyRun]) -> None:
        self.figures.num_records_in += sum(p.elements for run in runs for p in run.rows)


def figures_for(config: ProcessorConfig) -> Callable[[int], CallFigures]:
    """``watermark -> figures`` of one call of ``config``'s query, chosen once."""
    if not config.metrics:
        return lambda watermark: _NO_FIGURES
    names = config.output_columns()
    template: list[Any] = [None] * len(names)
    template[names.index(OUTPUT)] = STATS_OUTPUT
    if PHASE in names:  # a chain's earlier window: a row of no phase, as its side outputs
        template[names.index(PHASE)] = ON_ELEMENTS
    side_at = names.index(SIDE)
    counted = CountedFigures if config.partial_position is None else PreAggregatedFigures
    return lambda watermark: counted(watermark, template, side_at)


_NO_FIGURES = CallFigures()
