"""A window operation finished by the API (``.reduce``, ``.aggregate``, ``.process``, ...):
its one record (:class:`~tidemark._engine.spec.OperatorSpec`) made and validated, the
definition-time refusals and warnings given, and its output schema parsed
(``docs/errors.md`` lists them).
"""

from __future__ import annotations

from typing import Any

from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import WindowSpecError
from tidemark.spark.plan import (
    KeySpec,
    PlanNode,
    WindowOp,
    warn_lost_session_elements,
    warn_never_firing,
)
from tidemark.spark.protocol.pane_columns import paned_schema, refuse_mode_without_dataflow_trigger
from tidemark.spark.protocol.schemas import parse_schema
from tidemark.triggers import DataflowTrigger

__all__ = ["finished_window"]


def finished_window(
    upstream: PlanNode,
    key: KeySpec | None,
    window: dict[str, Any],
    mode: Any,
    functions: tuple[Any, Any],
    output_schema: Any,
    spark: Any,
) -> WindowOp:
    """The window operation of ``window`` (OperatorSpec's keywords so far) computing
    ``functions`` (the function and the window function after it, or None), with
    ``mode`` the accumulation mode given (Dataflow triggers only)."""
    dataflow = isinstance(window.get("trigger"), DataflowTrigger)
    logic, accumulation = window_logic(*functions), mode if dataflow else None
    spec = OperatorSpec(
        logic=logic, accumulation_mode=accumulation, pane_results=dataflow, **window
    )
    if not dataflow:  # a mode given for a Flink trigger: refused in the API's words
        refuse_mode_without_dataflow_trigger(spec.assigner, spec.trigger, mode)
    warn_never_firing(spec.assigner, window.get("trigger"))
    warn_lost_session_elements(spec.assigner)
    if output_schema is None:
        raise WindowSpecError(
            "`output_schema` is needed: tidemark cannot infer what this window function "
            "returns; pass a StructType or a DDL string like 'user string, n long'"
        )
    schema = paned_schema(parse_schema(output_schema, spark), spec.accumulation_mode)
    return WindowOp(upstream, key, spec, schema)
