"""What became of an element: the status ``process_element`` returns (tracing maps it to
a trace status, :mod:`tidemark._engine.trace`)."""

from __future__ import annotations

__all__ = ["ADDED", "ADDED_LATE", "SIDE_OUTPUT", "DROPPED", "SKIPPED", "REFUSED"]

# Went into a window not yet due; into one the watermark passed (a late firing, within
# the allowed lateness); late, to the late-data side output; late, counted as dropped;
# into no window, yet not late (an assigner that leaves gaps: counted as dropped too).
ADDED, ADDED_LATE, SIDE_OUTPUT, DROPPED, SKIPPED = range(5)
# Reached only windows the trigger driver closed (a finished Dataflow trigger): handled
# as a late element, so never returned.
REFUSED = 5
