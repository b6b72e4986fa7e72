"""The apps' one-way dependencies (docs/architecture.md, "Apps and dependencies"), read from
the code itself: every import statement, function-level ones included, parsed with ast."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Lowest first: an app may import the apps before it, never one after it.
APPS = ("accounts", "agents", "datasets", "runs", "suggestions")
# Apps at the top, beside each other: they may import the apps above, and no app imports them.
TOP = ("playground", "reviews")
# Upward imports that remain, each listed in docs/architecture.md ("Apps and dependencies");
# none today. Fix one, and this test asks you to strike it from both.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _modules(app: str) -> list[Path]:
    return sorted(path for path in (ROOT / app).rglob("*.py") if "migrations" not in path.parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _upward() -> list[tuple[str, int, str]]:
    upward = []
    for rank, app in enumerate((*APPS, *TOP)):
        for path in _modules(app):
            for line, module in _imports(path):
                target = module.split(".")[0]
                above = target in APPS and APPS.index(target) > rank
                if above or (target in TOP and target != app):
                    upward.append((path.relative_to(ROOT).as_posix(), line, module))
    return upward


def test_no_module_under_runs_imports_suggestions():
    offending = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _modules("runs")
        for line, module in _imports(path)
        if module == "suggestions" or module.startswith("suggestions.")
    ]
    assert _modules("runs"), "no module found under runs/: the walk itself is broken"
    assert offending == [], "runs/ must not know about suggestions (use runs/hooks.py):\n" + "\n".join(offending)


def test_no_app_imports_an_app_above_it():
    new = [f"{path}:{line} imports {module}" for path, line, module in _upward() if (path, module) not in KNOWN_UPWARD]
    assert new == [], "an app imports one above it (docs/architecture.md, 'Apps and dependencies'):\n" + "\n".join(new)


def test_the_known_exceptions_still_exist():
    remaining = {(path, module) for path, _line, module in _upward()}
    fixed = sorted(KNOWN_UPWARD - remaining)
    assert fixed == [], f"fixed, so strike them from KNOWN_UPWARD and from docs/architecture.md: {fixed}"


def test_the_walk_sees_function_level_imports(tmp_path):
    module = tmp_path / "sample.py"
    module.write_text("def f():\n    from suggestions.services import x\n    import suggestions.selectors\n")

    assert _imports(module) == [(2, "suggestions.services"), (3, "suggestions.selectors")]
