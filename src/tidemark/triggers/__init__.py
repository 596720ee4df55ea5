"""Triggers: when a window's function is evaluated, and when its contents are purged.

A trigger is consulted for every element added to a window (``on_element``) and for every
timer it registered (``on_event_time``, ``on_processing_time``); it answers with a
:class:`TriggerResult`. Its per-window state lives behind
``ctx.get_partitioned_state(descriptor)``, so one trigger object serves every key and
window. Behaviour follows Flink 1.20's built-in triggers, including Java's ``%`` in the
continuous triggers' alignment. The Dataflow model's triggers (Beam's names, with panes
and accumulation modes) are in :mod:`tidemark.triggers.dataflow`.

A window takes either kind: :data:`AnyTrigger` names both.

The guide: ``docs/concepts/triggers.md``; a custom trigger, tested in the harness:
``docs/testing.md``.
"""

from typing import Any

from tidemark.triggers.base import (
    OnMergeContext,
    TimeDomain,
    Trigger,
    TriggerContext,
    TriggerResult,
)
from tidemark.triggers.builtin import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EndOfStreamTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
)
from tidemark.triggers.dataflow import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    DataflowTrigger,
    DefaultTrigger,
    OrFinally,
    Repeatedly,
)

AnyTrigger = Trigger[Any] | DataflowTrigger
"""A window's trigger: Flink's (:class:`Trigger`) or the Dataflow model's
(:class:`DataflowTrigger`)."""

__all__ = [
    "AnyTrigger",
    "TimeDomain",
    "TriggerResult",
    "TriggerContext",
    "OnMergeContext",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "DeltaTrigger",
    "NeverTrigger",
    "EndOfStreamTrigger",
    "DataflowTrigger",
    "AfterWatermark",
    "AfterCount",
    "AfterProcessingTime",
    "Repeatedly",
    "AfterAny",
    "AfterAll",
    "AfterEach",
    "OrFinally",
    "DefaultTrigger",
]
