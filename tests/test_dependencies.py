"""The apps' one-way dependencies (docs/architecture.md, "Apps and dependencies"), read from
the code itself: every import statement, function-level ones included, parsed with ast."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Lowest first: an app may import the apps before it, never one after it.
APPS = ("accounts", "agents", "datasets", "runs", "suggestions")
# Apps at the top, beside each other: they may import the apps above, and no app imports them.
TOP = ("playground", "reviews", "monitoring")
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


# Inside runs/, lowest first (docs/architecture.md, "Inside runs"): a module may import its own
# layer and the layers before it, never one after it. A module belongs to the layer of the
# longest prefix that names it; every other module of runs/ (views, api, forms, urls, services,
# tasks, management commands, template tags, the run page's reads) is the app's surface, on top.
RUNS_LAYERS: tuple[tuple[str, ...], ...] = (
    ("runs.models", "runs.hooks"),
    ("runs.judging",),
    ("runs.engine",),
    ("runs.selectors", "runs.outcomes"),
    ("runs.comparing",),
    ("runs.reports",),
)
# Celery's convention: a lower layer sends a task by importing its name inside a function, and
# the task imports its service inside its body, so the edge carries no code upward.
RUNS_TASKS = "runs.tasks"


def _runs_layer(module: str) -> int:
    best, rank = -1, len(RUNS_LAYERS)
    for index, prefixes in enumerate(RUNS_LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    return rank


def _runs_imports(path: Path) -> list[tuple[int, str]]:
    """As _imports, with `from runs import x` read as runs.x."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "runs":
            found += [(node.lineno, f"runs.{alias.name}") for alias in node.names]
    return [*_imports(path), *found]


def _runs_upward(root: Path = ROOT) -> list[str]:
    upward = []
    for path in sorted(path for path in (root / "runs").rglob("*.py") if "migrations" not in path.parts):
        rank = _runs_layer(".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"))
        for line, module in _runs_imports(path):
            if module.startswith("runs.") and module != RUNS_TASKS and _runs_layer(module) > rank:
                upward.append(f"{path.relative_to(root).as_posix()}:{line} imports {module}")
    return upward


def test_no_layer_of_runs_imports_one_above_it():
    upward = _runs_upward()
    assert upward == [], "a layer of runs/ imports one above it (docs/architecture.md, 'Inside runs'):\n" + "\n".join(
        upward
    )


def test_the_runs_layers_name_packages_that_exist():
    missing = [
        prefix
        for prefixes in RUNS_LAYERS
        for prefix in prefixes
        if not (ROOT / prefix.replace(".", "/")).is_dir() and not (ROOT / (prefix.replace(".", "/") + ".py")).is_file()
    ]
    assert missing == []


def test_the_runs_layers_place_modules_as_documented():
    assert _runs_layer("runs.models") < _runs_layer("runs.judging.scoring") < _runs_layer("runs.engine.execution")
    assert _runs_layer("runs.engine.case") < _runs_layer("runs.selectors") < _runs_layer("runs.comparing.gate")
    assert _runs_layer("runs.comparing.pairing") < _runs_layer("runs.reports.exporters") < _runs_layer("runs.views")
    assert _runs_layer("runs.services.start") == _runs_layer("runs.api") == len(RUNS_LAYERS)


def test_the_runs_walk_sees_an_upward_import_and_lets_a_task_name_through(tmp_path):
    engine = tmp_path / "runs" / "engine"
    engine.mkdir(parents=True)
    (engine / "sample.py").write_text(
        "from runs.judging import scoring\n\n"
        "def f():\n    from runs.reports import exporters\n    from runs import tasks, views\n"
    )

    assert _runs_upward(tmp_path) == [
        "runs/engine/sample.py:4 imports runs.reports",
        "runs/engine/sample.py:5 imports runs.views",
    ]
