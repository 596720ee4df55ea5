"""The layout of ``tidemark._engine``: its modules import each other without a cycle, no
function imports a tidemark module to dodge one, and no module imports Spark (issue 29);
only the core and the chooser name the core's class, every other module its contract
(``_engine/contract.py``), and no method is replaced on an instance (issue 49).

Read from the source with :mod:`ast`, so nothing is imported. Imports under
``if TYPE_CHECKING:`` are for annotations only and never run, so they are not edges.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from test_spark_layout import MAX_MODULE_LINES, find_cycle

ENGINE = Path(__file__).resolve().parents[2] / "src" / "tidemark" / "_engine"
PACKAGE = "tidemark._engine"


def _modules() -> dict[str, ast.Module]:
    return {
        f"{PACKAGE}.{p.stem}" if p.stem != "__init__" else PACKAGE: ast.parse(p.read_text(), str(p))
        for p in ENGINE.glob("*.py")
    }


def _is_type_checking(stmt: ast.stmt) -> bool:
    test = getattr(stmt, "test", None)
    return isinstance(stmt, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _runtime_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run when the module is imported (module-level ``if`` and ``try`` too,
    ``if TYPE_CHECKING:`` not)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if _is_type_checking(stmt):
            continue
        out.append(stmt)
        if isinstance(stmt, (ast.If, ast.Try)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(stmt, block, []):
                    out.extend(_runtime_statements(getattr(inner, "body", [inner])))
    return out


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement loads (absolute imports only: the engine has
    no relative ones)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return []


def import_graph() -> dict[str, set[str]]:
    """Module -> the engine modules it imports when it is imported."""
    trees = _modules()
    return {
        module: {
            name
            for stmt in _runtime_statements(tree.body)
            for name in _imported(stmt)
            if name in trees and name != module
        }
        for module, tree in trees.items()
    }


def local_imports() -> set[tuple[str, str]]:
    """``(module, imported)`` for every tidemark import inside a function or class."""
    found = set()
    for module, tree in _modules().items():
        module_level = {id(stmt) for stmt in _runtime_statements(tree.body)}
        module_level.update(
            id(node) for stmt in tree.body if _is_type_checking(stmt) for node in ast.walk(stmt)
        )
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in module_level:
                found.update((module, i) for i in _imported(node) if i.startswith("tidemark"))
    return found


def test_the_finder_sees_a_function_level_import(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "def f():\n    from tidemark._engine import timers\n"
    monkeypatch.setattr(__import__(__name__), "_modules", lambda: {"m": ast.parse(source)})
    assert local_imports() == {("m", "tidemark._engine"), ("m", "tidemark._engine.timers")}


def test_the_graph_sees_the_layers() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.paths" in graph[f"{PACKAGE}.operator"]
    assert f"{PACKAGE}.paths" in graph[f"{PACKAGE}.aligned"]
    assert f"{PACKAGE}.operator" in graph[f"{PACKAGE}.create"]
    assert f"{PACKAGE}.aligned" in graph[f"{PACKAGE}.slices"]
    assert f"{PACKAGE}.slices" in graph[f"{PACKAGE}.create"]


def test_the_engine_imports_without_a_cycle() -> None:
    assert find_cycle(import_graph()) is None


def test_the_core_sits_below_every_fast_path() -> None:
    """The core, its paths and drivers import no fast path: a fast path builds on them,
    and the chooser alone knows every one."""
    graph = import_graph()
    fast = {f"{PACKAGE}.{name}" for name in ("aligned", "slices", "sessions", "processing")}
    for module in ("operator", "paths", "triggering", "panes", "timers", "slice_runs"):
        assert not graph[f"{PACKAGE}.{module}"] & fast, module
    assert all(f"{PACKAGE}.create" not in edges for edges in graph.values())


def test_only_the_core_and_the_chooser_name_the_core_class() -> None:
    """Paths, drivers and contexts call the core through ``OperatorCore``, a tracer or a
    replay drive it through ``OperatorHandle`` (the package's map names it too)."""
    allowed = {"operator.py", "create.py", "__init__.py"}
    naming = [
        p.name
        for p in ENGINE.glob("*.py")
        if p.name not in allowed and re.search(r"WindowOperator\b", p.read_text())
    ]
    assert naming == []


def replaced_methods(tree: ast.Module) -> set[str]:
    """``Class.method`` for every method a class's code assigns on an instance
    (``self.add = ...``), ``setattr(x, "method", ...)`` for a method of a class of the
    module, and every ``MethodType`` call (a function bound to one instance)."""
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    every = {f.name for c in classes for f in c.body if isinstance(f, ast.FunctionDef)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.args[1] if node.func.id == "setattr" and len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and name.value in every:
                found.add(f"setattr(..., {name.value!r})")
            if node.func.id == "MethodType":
                found.add(f"MethodType() at line {node.lineno}")
    for cls in classes:
        methods = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
        for inner in ast.walk(cls):
            for target in inner.targets if isinstance(inner, ast.Assign) else []:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr in methods
                ):
                    found.add(f"{cls.name}.{target.attr}")
    return found


def test_the_finder_sees_a_method_replaced_on_an_instance() -> None:
    source = (
        "class A:\n"
        "    def __init__(self, f):\n"
        "        self.add = f.add\n"
        "    def add(self, x):\n"
        "        return x\n"
        "setattr(a, 'add', len)\n"
        "setattr(a, 'count', 1)\n"
        "b = MethodType(len, a)\n"
    )
    assert replaced_methods(ast.parse(source)) == {
        "A.add",
        "setattr(..., 'add')",
        "MethodType() at line 8",
    }


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_method_is_replaced_on_an_instance(module: str) -> None:
    """A strategy is a class chosen once (Beam's trigger drivers), never an instance
    whose methods are swapped after it is made."""
    assert replaced_methods(_modules()[module]) == set()


def test_no_function_level_tidemark_imports() -> None:
    assert local_imports() == set()


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_engine_module_imports_spark(module: str) -> None:
    tree = _modules()[module]
    names = [name for node in ast.walk(tree) for name in _imported(node)]
    assert not [n for n in names if n.startswith(("pyspark", "tidemark.spark"))]


def test_engine_modules_stay_under_the_size_limit() -> None:
    long = {p.name: n for p in ENGINE.glob("*.py") if (n := len(p.read_text().splitlines())) > 0}
    assert {name: n for name, n in long.items() if n > MAX_MODULE_LINES} == {}
