"""tidemark on Apache Spark: the DataStream-style API, batch/replay and streaming runners.

Everything here adapts the pure-Python engine (:mod:`tidemark._engine`) to Spark; no
window semantics live in this package.
"""
