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

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any

__all__ = [
    "delta_table",
    "explain_checkpoint",
    "explain_query",
    "get_spark",
    "iceberg_table",
    "kafka_sink",
    "metrics_of",
    "parquet_table",
    "read_kafka",
    "StateTotals",
]

# the public names of this package, each loaded on first use from the module that owns it
_LAZY_NAMES = {
    "explain_checkpoint": "tidemark.spark.streaming.driver.explain",
    "explain_query": "tidemark.spark.streaming.driver.query_view",
    "read_kafka": "tidemark.spark.io.kafka",
    "parquet_table": "tidemark.spark.io.sinks",
    "delta_table": "tidemark.spark.io.sinks",
    "iceberg_table": "tidemark.spark.io.sinks",
    "kafka_sink": "tidemark.spark.io.sinks",
    "metrics_of": "tidemark.spark.protocol.figures",
    "StateTotals": "tidemark.spark.protocol.figures",
    "get_spark": "tidemark.spark.runtime.session",
}

# modules users imported by a path the layers' move changed (issue 49): the old path
# still loads the module, with a DeprecationWarning naming the import to write instead
MOVED_MODULES = {
    "tidemark.spark.kafka": "tidemark.spark.io.kafka",
    "tidemark.spark.sinks": "tidemark.spark.io.sinks",
    "tidemark.spark.metrics": "tidemark.spark.protocol.figures",
    "tidemark.spark.session": "tidemark.spark.runtime.session",
}


def __getattr__(name: str) -> Any:
    # loaded on first use: a Spark worker importing this package loads none of them
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a module of :data:`MOVED_MODULES` by its old path: the new module itself."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        new = MOVED_MODULES[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; import its public names from "
            f"tidemark.spark (e.g. `from tidemark.spark import "
            f"{_example_name(new)}`)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: Any) -> None:
        pass  # the new module, already executed


def _example_name(module: str) -> str:
    return next(name for name, owner in _LAZY_NAMES.items() if owner == module)


sys.meta_path.append(_MovedModules())
