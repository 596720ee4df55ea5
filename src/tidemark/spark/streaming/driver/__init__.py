"""What runs on the driver: a window operation defined as one streaming query and
started.

:mod:`.from_plan` turns a pipeline's window operation into :func:`~.query.window_stream`'s
arguments; :mod:`.query` decides the number of key groups (:mod:`.keygroups`) and
builds the :class:`~.query.StreamingWindow`: its combined frame (the input through the
key groups in Spark's stateful operator) and what its query starts with; a chain's
later windows read the earlier ones (:mod:`.chain`); :mod:`.sinks` starts the query,
after comparing the records kept beside its checkpoint (:mod:`.checkpoint`), and sends
each output to its sink. Nothing here runs in Spark's workers: what they run is
:mod:`tidemark.spark.streaming.worker`.
"""
