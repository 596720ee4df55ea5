"""The one place that chooses which operator serves a pipeline (as Beam's
``create_trigger_driver`` chooses a trigger driver), and, with the core, the only
module that names the core's class: every other module names a contract
(:mod:`~tidemark._engine.contract`). The operators chosen here are the core holding a
fast path (:mod:`~tidemark._engine.paths`); each class only names its path, so that a
reader (and a test) sees which one serves a pipeline."""

from __future__ import annotations

from typing import Any

from tidemark._engine.aligned import AlignedPath
from tidemark._engine.operator import WindowOperator
from tidemark._engine.partials import partial_elements, stream_merge_spec
from tidemark._engine.processing import ProcessingTimeAlignedPath, processing_time_aligned_serve
from tidemark._engine.sessions import (
    SessionPath,
    SortedSessionPath,
    session_elements_serve,
    sorted_sessions_serve,
)
from tidemark._engine.slices import SlicedPath, slices_serve
from tidemark._engine.spec import OperatorSpec
from tidemark.windows import AlignedLayout

__all__ = [
    "create_window_operator",
    "window_operator",
    "partials_operator",
    "AlignedWindowOperator",
    "SlicedWindowOperator",
    "SessionWindowOperator",
    "SortedSessionOperator",
    "ProcessingTimeAlignedOperator",
]


class AlignedWindowOperator(WindowOperator):
    """The window operator holding an :class:`~tidemark._engine.aligned.AlignedPath`.

    Parameters
    ----------
    spec : OperatorSpec
        A pipeline whose ``aligned_layout()`` is ``layout``.
    layout : AlignedLayout
        Where the windows are.
    tracer : object, optional
    """

    path_class: type[AlignedPath] = AlignedPath

    def __init__(self, spec: OperatorSpec, layout: AlignedLayout, *, tracer: Any = None):
        super().__init__(spec, self.path_class(layout), tracer=tracer)


class SlicedWindowOperator(AlignedWindowOperator):
    """The window operator holding a :class:`~tidemark._engine.slices.SlicedPath`; its
    ``num_stored_contents()`` counts one entry per slice (and per window of a key
    restored from the unsliced paths)."""

    path_class = SlicedPath


class SessionWindowOperator(WindowOperator):
    """The window operator holding a :class:`~tidemark._engine.sessions.SessionPath`.

    Parameters
    ----------
    spec : OperatorSpec
        A pipeline :func:`~tidemark._engine.sessions.session_elements_serve` accepts.
    tracer : object, optional
    """

    path_class: type[SessionPath] = SessionPath

    def __init__(self, spec: OperatorSpec, *, tracer: Any = None):
        super().__init__(spec, self.path_class(), tracer=tracer)


class SortedSessionOperator(SessionWindowOperator):
    """The window operator holding a
    :class:`~tidemark._engine.sessions.SortedSessionPath` (a pipeline
    :func:`~tidemark._engine.sessions.sorted_sessions_serve` accepts)."""

    path_class = SortedSessionPath


class ProcessingTimeAlignedOperator(WindowOperator):
    """The window operator holding a
    :class:`~tidemark._engine.processing.ProcessingTimeAlignedPath`.

    Parameters
    ----------
    spec : OperatorSpec
        A pipeline :func:`~tidemark._engine.processing.processing_time_aligned_serve`
        accepts.
    tracer : object, optional
    """

    def __init__(self, spec: OperatorSpec, *, tracer: Any = None):
        super().__init__(spec, ProcessingTimeAlignedPath(), tracer=tracer)


def create_window_operator(spec: OperatorSpec, *, tracer: Any = None) -> WindowOperator:
    """The operator that serves ``spec``.

    :class:`AlignedWindowOperator` (the same as
    :class:`~tidemark._engine.operator.WindowOperator`, but faster for tumbling and
    sliding event-time windows whose trigger fires only at the window end) where
    ``spec.aligned_layout()`` allows it, else the general operator. The choice is made
    here, once per operator, never per element; ``spec.fast_paths=False`` always takes
    the general operator. Sliding windows whose contents merge take the sliced operator
    (:class:`SlicedWindowOperator`, the aligned operator storing
    each element once, in its slice) where :func:`~tidemark._engine.slices.slices_serve`
    allows it. A Dataflow trigger takes the general operator, its trigger driver the panes'
    (:class:`~tidemark._engine.panes.PaneDriver`). Event-time sessions in BATCH take
    the sorted-session operator (:class:`SortedSessionOperator`,
    the general operator folding each key's runs in time order by a linear scan) where
    :func:`~tidemark._engine.sessions.sorted_sessions_serve` allows it, and in the other
    modes the session operator (:class:`SessionWindowOperator`,
    the general operator serving an element that falls inside or extends a key's session
    without the merging window set) where
    :func:`~tidemark._engine.sessions.session_elements_serve` allows it; tumbling and
    sliding processing-time windows under the default trigger the processing-time aligned
    operator (:class:`ProcessingTimeAlignedOperator`) where
    :func:`~tidemark._engine.processing.processing_time_aligned_serve` allows it.
    """
    if spec.trigger_is_dataflow:  # the general path, its driver the panes'
        return WindowOperator(spec, tracer=tracer)
    if sorted_sessions_serve(spec):
        return SortedSessionOperator(spec, tracer=tracer)
    if session_elements_serve(spec):
        return SessionWindowOperator(spec, tracer=tracer)
    if processing_time_aligned_serve(spec, tracer):
        return ProcessingTimeAlignedOperator(spec, tracer=tracer)
    layout = spec.aligned_layout()
    if layout is None:
        return WindowOperator(spec, tracer=tracer)
    if slices_serve(spec, layout, tracer):
        return SlicedWindowOperator(spec, layout)
    return AlignedWindowOperator(spec, layout, tracer=tracer)


def window_operator(
    assigner: Any, logic: Any, *, tracer: Any = None, **options: Any
) -> WindowOperator:
    """``create_window_operator(OperatorSpec(assigner, logic, **options))``: the operator
    for a pipeline given by its parts (tests, benchmarks, the docs' examples)."""
    return create_window_operator(OperatorSpec(assigner, logic, **options), tracer=tracer)


def partials_operator(spec: OperatorSpec) -> WindowOperator:
    """The operator merging a stream's partials of ``spec``
    (:mod:`~tidemark._engine.partials`; a stream's key groups make one per call, bind
    with :func:`functools.partial`): the operator chosen for
    :func:`~tidemark._engine.partials.stream_merge_spec` (the fast paths too), a late
    partial counting each of its elements as dropped, as the one-task path drops each
    late element (a slice's windows are all late exactly when each of its elements is,
    without allowed lateness). The spec has no late side output."""
    operator = create_window_operator(stream_merge_spec(spec))
    operator.late_weight = partial_elements
    return operator
