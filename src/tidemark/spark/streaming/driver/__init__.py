"""What runs on the driver: a window operation defined as one streaming query and
started.

:mod:`.from_plan` turns a pipeline's window operation into :func:`~.query.window_stream`'s
arguments; :mod:`.query` checks them, decides the number of key groups
(:mod:`.keygroups`, with the record kept beside a checkpoint: :mod:`.checkpoint`) and
builds the :class:`~.query.StreamingWindow` once: its combined frame (the input through
the key groups in Spark's stateful operator) and what its query starts with; a chain's
later windows read the earlier ones (:mod:`.chain`); :mod:`.sinks` starts the query,
after comparing the checkpoint's records, and sends each output to its sink. Nothing
here runs in Spark's workers: what they run is :mod:`tidemark.spark.streaming.worker`.
"""
