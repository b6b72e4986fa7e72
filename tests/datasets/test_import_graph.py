"""No import cycle inside datasets/ (docs/architecture.md, "Apps and dependencies").

The graph is read from the source with ast, so an import moved into a function body to
dodge a cycle still counts: it is the same dependency, only later. One kind of edge is
left out on purpose: a Celery entry point in `tasks.py` imports its service inside the
task body (docs/architecture.md, "Where logic lives"), while services send those tasks;
loading tasks.py loads no service, so the pair is no cycle at import time.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = "datasets"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(app: str) -> dict[str, Path]:
    return {
        _module_name(path): path
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.relative_to(ROOT).parts
    }


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, skip_function_bodies: bool) -> None:
        self.module, self.is_package, self.skip_function_bodies = module, is_package, skip_function_bodies
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if not self.skip_function_bodies:
            self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        self.names.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.module.split(".")
            package = package if self.is_package else package[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, *([base] if base else [])])
        self.names.add(base)
        # `from datasets import services` imports the module datasets.services.
        self.names.update(f"{base}.{alias.name}" for alias in node.names)


def import_graph(app: str) -> dict[str, set[str]]:
    modules = _modules(app)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        visitor = _Imports(name, path.name == "__init__.py", skip_function_bodies=path.name == "tasks.py")
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        graph[name] = {target for target in visitor.names if target in modules and target != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle as [a, b, ..., a], or [] when there is none (depth-first search)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_no_module_of_datasets_imports_itself_back():
    graph = import_graph(APP)

    assert find_cycle(graph) == []


def test_the_graph_sees_imports_inside_functions_and_finds_a_cycle():
    # The checker itself: an import hidden in a function body is an edge like any other.
    source_a = "def f():\n    from datasets import b\n"
    source_b = "from datasets.a import f\n"
    graph: dict[str, set[str]] = {}
    for name, source in (("datasets.a", source_a), ("datasets.b", source_b)):
        visitor = _Imports(name, False, skip_function_bodies=False)
        visitor.visit(ast.parse(source))
        graph[name] = {target for target in visitor.names if target in ("datasets.a", "datasets.b") and target != name}

    assert find_cycle(graph) == ["datasets.a", "datasets.b", "datasets.a"]


def test_the_field_definitions_are_a_leaf_of_the_app():
    graph = import_graph(APP)

    assert graph["datasets.fields"] == {"datasets.models"}
