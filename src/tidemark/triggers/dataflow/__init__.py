"""The Dataflow model's triggers, with Apache Beam Python's names and meaning.

A Dataflow trigger decides when a window emits a *pane* and when the window is done;
how a pane relates to the ones before is the window's
:class:`~tidemark.panes.AccumulationMode`, and each pane says what it is
(:class:`~tidemark.panes.PaneInfo`). The guide, with the choices made where Beam's
SDKs differ: ``docs/panes.md``.

Each trigger answers Beam's ``TriggerFn`` questions, asked by the engine's pane
operator (:mod:`tidemark._engine.panes`) for one key and window:
``on_element_added`` after an element went into the window, ``should_fire`` after it
and at every timer the trigger set, ``on_fire`` when the window fires (True: the
trigger finished, the window closes), ``on_windows_merged`` when session windows
merged, ``reset`` when a repeating parent starts it again. Times follow Beam: the
watermark handed in is Beam's (``tidemark watermark + 1``, "no element before it"),
and a window's ``end`` is exclusive (``max_timestamp() + 1``).

A Dataflow trigger is its own kind beside Flink's :class:`~tidemark.triggers.Trigger`:
a window takes either (``.trigger(...)``), and the window's specification knows which it
holds; it serves as a window's trigger or inside another Dataflow trigger, not inside
one of Flink's (``PurgingTrigger``). The parts: :mod:`~tidemark.triggers.dataflow.base`
(:class:`DataflowTrigger`, its context and state tags),
:mod:`~tidemark.triggers.dataflow.leaves` (:class:`DefaultTrigger`, :class:`AfterCount`,
:class:`AfterProcessingTime`) and :mod:`~tidemark.triggers.dataflow.composites` (the
triggers made of others).
"""

from tidemark.triggers.dataflow.base import (
    COMBINERS,
    DataflowTrigger,
    PaneTriggerContext,
    StateTag,
    window_end,
)
from tidemark.triggers.dataflow.composites import (
    AfterAll,
    AfterAny,
    AfterEach,
    AfterWatermark,
    OrFinally,
    Repeatedly,
)
from tidemark.triggers.dataflow.leaves import AfterCount, AfterProcessingTime, DefaultTrigger

__all__ = [
    "DataflowTrigger",
    "PaneTriggerContext",
    "StateTag",
    "COMBINERS",
    "AfterWatermark",
    "AfterCount",
    "AfterProcessingTime",
    "Repeatedly",
    "AfterAny",
    "AfterAll",
    "AfterEach",
    "OrFinally",
    "DefaultTrigger",
    "window_end",
]
