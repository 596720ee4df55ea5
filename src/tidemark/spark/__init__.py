"""tidemark on Apache Spark: the DataStream-style API and the executions behind it.

Everything here adapts the pure-Python engine (:mod:`tidemark._engine`) to Spark; no
window semantics live in this package. Layers, each importing only those below it:
:mod:`.api` (what users call) builds :mod:`.plan` nodes; :mod:`.execution` chooses how a
window operation runs (:mod:`.streaming`, or :mod:`.batch`: BATCH, replay, the SQL fast
path); all of them speak the column protocol of :mod:`.columns`, read timestamps with
:mod:`.timestamps` and rows with :mod:`.codec`. :mod:`.session` and :mod:`._java` set up
Spark and Java.
"""
