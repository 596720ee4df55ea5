"""tidemark on Apache Spark: the DataStream-style API and the executions behind it.

Everything here adapts the pure-Python engine (:mod:`tidemark._engine`) to Spark; no
window semantics live in this package. Its folders are its layers, each importing only
its own and those below it (``docs/internals.md`` draws them):
:mod:`.api` (what users call) builds :mod:`.plan` nodes; :mod:`.execution` chooses how a
window operation runs (:mod:`.streaming`, or :mod:`.batch`: BATCH, replay, the SQL fast
path, the vectorized and pre-aggregated runs); :mod:`.io` holds the user's Kafka reader
and sinks; all of them speak the column protocol of :mod:`.protocol` (columns, keys,
rows, timestamps); :mod:`.runtime` sets up Spark and Java.
"""

from typing import Any

__all__ = ["explain_checkpoint", "explain_query"]

_LAZY_NAMES = {
    "explain_checkpoint": "tidemark.spark.streaming.driver.explain",
    "explain_query": "tidemark.spark.streaming.driver.query_view",
}


def __getattr__(name: str) -> Any:
    # loaded on first use: a Spark worker importing this package loads neither
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
