"""The runtime set-up: the session (:mod:`.session`), Java (:mod:`._java`), checks of a
user's session (:mod:`.preflight`), shipping tidemark to executors (:mod:`.shipping`),
tidemark's confs (:mod:`.confs`), errors raised again as themselves (:mod:`.surfacing`)
and the workers' garbage collector (:mod:`.worker_gc`).

The bottom layer: it imports no other part of tidemark.spark.
"""
