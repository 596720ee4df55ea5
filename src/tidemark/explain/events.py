"""What an explanation is computed from: one key's input as the window operator saw it.

A window's behaviour for one key depends only on that key's elements and on the clocks
(the watermark, processing time) in the order the operator saw them: keyed state is per
key, and a non-keyed window is one key. So every mode answers "why did this window (not)
fire?" the same way: it gives :func:`tidemark.explain.explain_events` the key's events,
in order, and the engine replays them with an instrumented operator.

- the engine's harness records them as it runs (``explain=True``);
- BATCH: the key's elements in timestamp order, then ``EndOfInput``;
- replay: the key's elements in arrival order, each after the watermark the stream had
  when it arrived, then ``EndOfInput``;
- a streaming query: per micro-batch a :class:`MicroBatch`, the key's elements of that
  micro-batch, and the watermark the batch ended with (read back from the checkpoint
  and the source).

:class:`PartitionState` says, beside the events, what each input partition's watermark
was at the end: which one holds the watermark, and whether it is idle.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Element",
    "Watermark",
    "ProcessingTime",
    "MicroBatch",
    "EndOfInput",
    "Event",
    "PartitionState",
]


@dataclass(frozen=True)
class Element:
    """One element of the key. ``timestamp`` is int ms (None in processing time);
    ``label`` names it in answers and pictures (default: ``str(value)``)."""

    value: Any
    timestamp: int | None
    label: str | None = None


@dataclass(frozen=True)
class Watermark:
    """The watermark advances to ``timestamp`` (ignored unless higher than before)."""

    timestamp: int


@dataclass(frozen=True)
class ProcessingTime:
    """The processing-time clock advances to ``timestamp``."""

    timestamp: int


@dataclass(frozen=True)
class MicroBatch:
    """A streaming micro-batch starts: the events up to the next ``MicroBatch`` are its."""

    batch_id: int


@dataclass(frozen=True)
class EndOfInput:
    """A bounded input ends: the watermark jumps to +inf (``LONG_MAX``)."""


Event = Element | Watermark | ProcessingTime | MicroBatch | EndOfInput


@dataclass(frozen=True)
class PartitionState:
    """One input partition's share of the watermark at the end of the events.

    ``max_event_time`` is the largest timestamp it has seen (None: none yet, which holds
    the watermark at its start); ``watermark`` what it allows (``max_event_time`` less
    the out-of-orderness and 1); ``idle`` whether idleness has left it out of the
    minimum; ``last_batch`` the micro-batch that last brought it data, where known.
    """

    partition: Any
    max_event_time: int | None
    watermark: int
    idle: bool = False
    last_batch: int | None = None
