"""The folders of ``tidemark.spark`` are its layers (issue 49): a module never imports one
of a layer above its own, the top holds only the hinge, and ``docs/internals.md`` names
every module.

Read from the source (:func:`test_spark_layout.import_graph`), so nothing is imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_spark_layout import SPARK, _module_name, import_graph

PACKAGE = "tidemark.spark"
INTERNALS = Path(__file__).resolve().parents[2] / "docs" / "internals.md"

# The layers, bottom to top, each with the reason it sits where it does. A layer's parts
# are peers that never import each other; a part is one or more folders or modules of
# tidemark.spark (separated by spaces).
LAYERS: list[tuple[str, ...]] = [
    # the set-up everything runs on: the session, Java, tidemark's confs (read by every
    # layer, the plan's validation too), errors raised again as themselves, the workers' gc
    ("runtime",),
    # what a pipeline is: immutable nodes holding each window's OperatorSpec, and the
    # shorthand aggregations a node may hold (the SQL path reads their closed form)
    ("plan aggregations",),
    # the column protocol every execution speaks: columns, keys (a plan's KeySpec), rows
    # and schemas, event time, lossless values, pane columns, figures, source partitions;
    # codec is the old path pickled state rows call (its names live in protocol/codec.py)
    ("protocol codec",),
    # the executions' runtimes: BATCH, replay, SQL, vectorized and pre-aggregated runs in
    # the workers' tasks, and the streaming worker part (Spark's Python workers load none
    # of the driver: the streaming package's __init__ loads the driver's names on use)
    ("batch", "streaming.worker streaming.state"),
    # the streaming driver: defines a streaming window's query and starts it (it builds
    # what the workers run, and refuses a null key with BATCH's advice)
    ("streaming.driver streaming",),
    # input/output: the user's Kafka reader and sinks; a table sink writes by a query's
    # batch id and claims its table beside the query's checkpoint (the driver's records)
    ("io",),
    # the chooser: one decision per window operation, over batch and streaming
    ("execution",),
    # the user's API: builds plan nodes, asks the execution, reads one run's outputs
    ("api",),
]


def layer_of(module: str) -> tuple[int, str]:
    """The index in :data:`LAYERS` of a ``tidemark.spark`` module, and its part."""
    rest = module[len(PACKAGE) + 1 :]
    best: tuple[int, str, int] | None = None
    for index, parts in enumerate(LAYERS):
        for part in parts:
            for prefix in part.split():
                if (rest == prefix or rest.startswith(prefix + ".")) and (
                    best is None or len(prefix) > best[2]
                ):
                    best = (index, part, len(prefix))
    if best is None:
        raise LookupError(f"{module} is in no layer: give it one in LAYERS")
    return best[0], best[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module of a higher layer, or of a peer part of the same layer."""
    found = []
    for module, imported in sorted(graph.items()):
        if module == PACKAGE:
            continue
        layer, part = layer_of(module)
        for other in sorted(imported):
            other_layer, other_part = layer_of(other)
            if other_layer > layer or (other_layer == layer and other_part != part):
                found.append(f"{module} ({part}) imports {other} ({other_part})")
    return found


@pytest.mark.parametrize(
    "graph, upward",
    [
        pytest.param({f"{PACKAGE}.api.streams": {f"{PACKAGE}.runtime.session"}}, False, id="down"),
        pytest.param({f"{PACKAGE}.plan": {f"{PACKAGE}.protocol.columns"}}, True, id="up"),
        pytest.param(
            {f"{PACKAGE}.batch.run": {f"{PACKAGE}.streaming.worker.state"}}, True, id="peer"
        ),
    ],
)
def test_the_order_check_can_fail(graph, upward):
    assert bool(upward_imports(graph)) == upward


def test_every_module_is_in_a_layer():
    for module in import_graph():
        if module != PACKAGE:
            layer_of(module)


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports(import_graph()) == []


def test_the_top_level_holds_the_hinge_only():
    """A handful of modules beside the layers' folders: the plan and the execution (the
    hinge), the aggregations a plan holds, and the old path pickles name."""
    top = {p.stem for p in SPARK.glob("*.py")}
    assert top == {"__init__", "plan", "execution", "aggregations", "codec"}
    folders = {p.name for p in SPARK.iterdir() if (p / "__init__.py").exists()}
    assert folders == {"api", "io", "protocol", "batch", "streaming", "runtime"}


def test_internals_names_every_module():
    """The map of docs/internals.md names each module by its folder and file
    (``runtime/confs.py``, ``driver/query.py``, ``spark/plan.py``)."""
    text = INTERNALS.read_text()
    missing = [
        _module_name(path)
        for path in sorted(SPARK.rglob("*.py"))
        if path.name != "__init__.py" and f"{path.parent.name}/{path.name}" not in text
    ]
    assert missing == []
