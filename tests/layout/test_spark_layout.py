"""The layout of ``tidemark.spark``: its modules import each other without a cycle, and
no function imports a tidemark module to dodge one (issue 10).

Read from the source with :mod:`ast`, so nothing is imported and no Spark is needed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SPARK = Path(__file__).resolve().parents[2] / "src" / "tidemark" / "spark"

# Function-level imports of tidemark modules that are allowed, each with its reason.
ALLOWED_LOCAL_IMPORTS: set[tuple[str, str]] = {
    # Spark's planner unpickles the processor in a new Python process and runs only its
    # init: the calls (pandas, pyarrow, the engine) load at the first call
    ("tidemark.spark.streaming.worker.processor", "tidemark.spark.streaming.worker.bindings"),
}

MAX_MODULE_LINES = 600
"""A prompt to look, not a reason to move a concern to where it does not belong: a
module whose parts belong together may pass it, named below with its reason."""

SIZE_EXEMPT: dict[str, str] = {
    "tidemark.spark.api.streams": (
        "the user's pipeline, one class a step (DataStream, KeyedStream, WindowedStream,"
        " AllWindowedStream, WindowResultStream), each returning the next: read top to"
        " bottom as PyFlink's datastream module; its definition checks are already"
        " api/definition.py's"
    ),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SPARK.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(), str(p)) for p in SPARK.rglob("*.py")}


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imported(module: str, node: ast.AST, modules: set[str], is_package: bool) -> list[str]:
    """The tidemark modules an import statement loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("tidemark")]
    if not isinstance(node, ast.ImportFrom):
        return []
    target = _absolute(module, node, is_package)
    if not target.startswith("tidemark"):
        return []
    submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
    return submodules or [target]


def _top_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run when the module is imported (module-level ``if`` and ``try`` too)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, (ast.If, ast.Try)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(stmt, block, []):
                    out.extend(_top_level_statements(getattr(inner, "body", [inner])))
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the tidemark.spark modules it imports at module level."""
    trees = _modules()
    names = set(trees)
    graph: dict[str, set[str]] = {}
    for module, tree in trees.items():
        is_package = (SPARK.parents[1] / module.replace(".", "/") / "__init__.py").exists()
        edges: set[str] = set()
        for stmt in _top_level_statements(tree.body):
            edges.update(i for i in _imported(module, stmt, names, is_package) if i in names)
        graph[module] = edges - {module}
    return graph


def local_imports() -> set[tuple[str, str]]:
    """``(module, imported)`` for every tidemark import inside a function or class."""
    found = set()
    for module, tree in _modules().items():
        top = {id(s) for s in _top_level_statements(tree.body)}
        is_package = (SPARK.parents[1] / module.replace(".", "/") / "__init__.py").exists()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                found.update((module, i) for i in _imported(module, node, set(), is_package))
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


@pytest.mark.parametrize(
    "graph, cyclic",
    [
        pytest.param({"a": {"b"}, "b": {"c"}, "c": set()}, False, id="chain"),
        pytest.param({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True, id="circle"),
        pytest.param({"a": {"a"}}, True, id="self"),
    ],
)
def test_the_cycle_finder_can_fail(graph, cyclic):
    assert (find_cycle(graph) is not None) == cyclic


def test_the_graph_sees_the_layers():
    graph = import_graph()
    assert "tidemark.spark.plan" in graph["tidemark.spark.api.streams"]
    assert "tidemark.spark.execution" in graph["tidemark.spark.api.streams"]
    assert "tidemark.spark.protocol.columns" in graph["tidemark.spark.batch.worker"]


def test_spark_modules_import_without_a_cycle():
    assert find_cycle(import_graph()) is None


def test_the_plan_and_the_column_protocol_sit_below_the_runners():
    graph = import_graph()
    assert graph["tidemark.spark.runtime.confs"] == set()  # the confs' readers sit below everything
    assert graph["tidemark.spark.plan"] <= {"tidemark.spark.runtime.confs"}
    assert graph["tidemark.spark.protocol.columns"] <= {
        "tidemark.spark.protocol.codec",
        "tidemark.spark.protocol.column_values",
        "tidemark.spark.protocol.keys",
    }
    assert graph["tidemark.spark.protocol.keys"] <= {"tidemark.spark.plan"}  # every key rule, below
    for module in ("tidemark.spark.runtime._java", "tidemark.spark.runtime.session"):
        assert graph[module] <= {"tidemark.spark.runtime._java"}, module


def test_no_function_level_tidemark_imports_beyond_the_allow_list():
    assert local_imports() - ALLOWED_LOCAL_IMPORTS == set()


def _lengths() -> dict[str, int]:
    return {_module_name(path): len(path.read_text().splitlines()) for path in SPARK.rglob("*.py")}


def test_spark_modules_stay_under_the_size_limit():
    long = {m: n for m, n in _lengths().items() if n > MAX_MODULE_LINES}
    assert {m: n for m, n in long.items() if m not in SIZE_EXEMPT} == {}


def test_each_size_exemption_is_needed_and_says_why():
    lengths = _lengths()
    for module, reason in SIZE_EXEMPT.items():
        assert lengths.get(module, 0) > MAX_MODULE_LINES, f"{module}: no longer needed"
        assert len(reason.split()) >= 5, module


STREAMING = "tidemark.spark.streaming"
DRIVER, WORKER = f"{STREAMING}.driver", f"{STREAMING}.worker"


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_streaming_runtime_has_a_driver_and_a_worker_part():
    graph = import_graph()
    streaming = {m for m in graph if _in(STREAMING, m) and m != STREAMING}
    parts = {m for m in streaming if _in(DRIVER, m) or _in(WORKER, m)}
    # outside the two parts: only the old path a pickle names (.state, an alias)
    assert streaming - parts == {f"{STREAMING}.state"}
    assert graph[f"{STREAMING}.state"] == {f"{WORKER}.state"}
    assert {
        f"{DRIVER}.query",
        f"{DRIVER}.starting",
        f"{WORKER}.bindings",
        f"{WORKER}.groups",
    } <= parts


def test_the_worker_part_never_imports_the_driver_part():
    graph = import_graph()
    for module in (m for m in graph if _in(WORKER, m)):
        reached = _reachable(graph, module)
        assert not {m for m in reached if _in(DRIVER, m)}, module
        # nor the layers above the streaming runtime (the API, the plan's execution)
        assert not reached & {"tidemark.spark.api.streams", "tidemark.spark.execution"}, module


def test_the_graph_sees_the_driver_using_the_worker():
    graph = import_graph()
    assert f"{WORKER}.bindings" in graph[f"{DRIVER}.query"]
    assert f"{WORKER}.groups" in graph[f"{WORKER}.bindings"]


def test_a_worker_loads_no_driver_module():
    """What a Spark worker imports to run a key group (the bindings, and what a pickled
    configuration names) loads no module of the driver part, in a fresh interpreter:
    the package's own names from the driver load on first use."""
    workers = sorted(_module_name(p) for p in (SPARK / "streaming" / "worker").glob("*.py"))
    code = (
        "import importlib, sys\n"
        f"for name in {workers!r}: importlib.import_module(name)\n"
        "import tidemark.spark.streaming.state\n"
        f"print(sorted(m for m in sys.modules if m.startswith({DRIVER!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"
