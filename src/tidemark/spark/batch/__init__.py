"""Bounded DataFrames: BATCH semantics and the replay of a recorded stream, per partition
in the Python worker (:mod:`.frames` builds the element frame, :mod:`.run` partitions it,
:mod:`.worker` drives the engine with a ``BatchDriver`` or a ``ReplayDriver``, with its
Arrow sort in :mod:`.sorting` and the replay's watermark sequence in :mod:`.replay`), or as
Spark's own aggregation (:mod:`.sql_plan`, the SQL fast path)."""
