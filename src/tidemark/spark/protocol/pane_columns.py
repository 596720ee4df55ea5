"""The pane columns of a window's results under a Dataflow trigger, on Spark.

A window fired by a Dataflow trigger (:mod:`tidemark.triggers.dataflow`) emits each
result with the pane it belongs to (:class:`~tidemark.panes.PanedResult`). On Spark every
result row carries that pane after the function's own columns:

================  ========  ===============================================================
``pane_timing``   string    ``EARLY``, ``ON_TIME`` or ``LATE``
``pane_index``    long      the pane's position among its window's panes, from 0
``pane_is_last``  boolean   the window's last pane
``is_retraction`` boolean   RETRACTING mode only: the row takes back an earlier pane's row
================  ========  ===============================================================

This module is the one place that knows that layout: :func:`paned_schema` (the result
schema) and :func:`paned_tuple` (one result's row). Whether a window has panes at all is
its spec's (``OperatorSpec.trigger_is_dataflow``); an accumulation mode given for a
Flink trigger is refused here, in the API's words
(:func:`refuse_mode_without_dataflow_trigger`). A window reading these
results (a chain) sees the pane columns as ordinary columns. The guide:
``docs/panes.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from tidemark.assigners import WindowAssigner
from tidemark.errors import WindowSpecError
from tidemark.panes import PANE_COLUMNS, RETRACTION_COLUMN, AccumulationMode, PanedResult

__all__ = [
    "check_accumulation_mode",
    "refuse_mode_without_dataflow_trigger",
    "pane_fields",
    "paned_schema",
    "paned_tuple",
]

_PANE_TYPES = (StringType(), LongType(), BooleanType())


def check_accumulation_mode(mode: Any) -> None:
    """Refuse a ``mode`` that is not an :class:`~tidemark.panes.AccumulationMode` (None:
    not given)."""
    if mode is None or isinstance(mode, AccumulationMode):
        return
    names = ", ".join(m.name for m in AccumulationMode)
    hint = f"tm.AccumulationMode.{mode.upper()}" if _names_a_mode(mode) else "one of them"
    raise WindowSpecError(
        f"`mode` must be a tm.AccumulationMode ({names}); got {mode!r} "
        f"({type(mode).__name__}): pass {hint}"
    )


def _names_a_mode(mode: Any) -> bool:
    return isinstance(mode, str) and mode.upper() in AccumulationMode.__members__


def refuse_mode_without_dataflow_trigger(
    assigner: WindowAssigner, trigger: Any, mode: AccumulationMode | None
) -> None:
    """Refuse an accumulation mode given for a window whose trigger is Flink's (the
    rest of the mode's rules are the window's spec's,
    :func:`~tidemark._engine.spec.validate_accumulation_mode`).

    Parameters
    ----------
    assigner : WindowAssigner
    trigger : Trigger or None
        The window's trigger as given (None: the assigner's default).
    mode : AccumulationMode or None
        What ``accumulation_mode(...)`` was given (None: nothing).

    Raises
    ------
    WindowSpecError
        ``mode`` is given: Flink's triggers say FIRE or FIRE_AND_PURGE themselves.
    """
    if mode is None:
        return
    effective = trigger if trigger is not None else assigner.get_default_trigger()
    given = "trigger" if trigger is not None else "the assigner's default trigger"
    raise WindowSpecError(
        f"`accumulation_mode` applies to Dataflow triggers (tm.AfterWatermark, "
        f"tm.AfterCount, tm.AfterProcessingTime, tm.Repeatedly, ...); got "
        f"accumulation_mode={mode.name} with {given} {effective!r}. A Flink trigger "
        "says it itself: FIRE keeps the window's contents (accumulating), "
        "FIRE_AND_PURGE drops them (discarding, PurgingTrigger.of(trigger)). Give "
        "a Dataflow trigger with .trigger(...), or drop .accumulation_mode(...)"
    )


def pane_fields(mode: AccumulationMode) -> list[StructField]:
    """The columns a window under a Dataflow trigger adds to its results, in order."""
    fields = [StructField(n, t, True) for n, t in zip(PANE_COLUMNS, _PANE_TYPES)]
    if mode is AccumulationMode.RETRACTING:
        fields.append(StructField(RETRACTION_COLUMN, BooleanType(), True))
    return fields


def paned_schema(schema: StructType, mode: AccumulationMode | None) -> StructType:
    """The results' schema: the function's own columns (``schema``), then the pane
    columns when ``mode`` is set (a Dataflow trigger), else ``schema`` itself.

    Raises
    ------
    WindowSpecError
        A column of ``schema`` has the name of a pane column (Spark compares column
        names without case).
    """
    if mode is None:
        return schema
    added = pane_fields(mode)
    taken = {name.lower(): name for name in schema.fieldNames()}
    for field in added:
        clash = taken.get(field.name.lower())
        if clash is not None:
            raise WindowSpecError(_clash_message(clash, schema, added))
    return StructType([*schema.fields, *added])


def _clash_message(clash: str, schema: StructType, added: list[StructField]) -> str:
    return (
        f"the results of a window under a Dataflow trigger carry the pane columns "
        f"{[f.name for f in added]} after the function's own, which must not share their "
        f"names; got a result column {clash!r} (results: {schema.fieldNames()}). Rename "
        f"{clash!r} in the `output_schema` (for reduce without a window function and "
        f"sum/min/max/min_by/max_by, whose results keep the input's columns: in the "
        f"input)"
    )


def paned_tuple(
    result: PanedResult,
    names: Sequence[str],
    fit: Callable[[Any, Sequence[str]], tuple[Any, ...]],
) -> tuple[Any, ...]:
    """The row of ``result`` for the columns ``names`` of a :func:`paned_schema`: the
    function's value fitted to its own columns by ``fit``, then the pane's columns."""
    pane = result.pane
    if names[-1] == RETRACTION_COLUMN:
        own = fit(result.value, names[: -len(PANE_COLUMNS) - 1])
        return (*own, pane.timing.name, pane.index, pane.is_last, result.is_retraction)
    own = fit(result.value, names[: -len(PANE_COLUMNS)])
    return (*own, pane.timing.name, pane.index, pane.is_last)
