"""Template tags format, they do not query (docs/architecture.md, "Apps and dependencies"): what
a page shows is loaded by its view (or a view the page loads into a slot), so it can be read
from the view. A tag reads what the view put in the context and what its prefetch loaded."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Tag modules that still load data, each to move into a view like the others. The list only shrinks.
KNOWN_QUERYING = {"suggestions/templatetags/suggestion_tags.py"}
# Functions of a selectors module that read no database (arithmetic on a row the view loaded).
PURE = {"run_duration_seconds"}


def _tag_modules() -> list[Path]:
    return sorted(path for path in ROOT.glob("*/templatetags/*.py") if path.name != "__init__.py")


def _queries(path: Path) -> list[str]:
    """What in the module reads the database: a selectors function or module, a manager."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name == "selectors" or (
                    node.module.endswith(".selectors") and alias.name[0].islower() and alias.name not in PURE
                ):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.endswith(".selectors")]
        elif isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append(f"{node.lineno}: .objects")
    return found


def test_no_template_tag_loads_data():
    assert _tag_modules(), "no template tag module found: the walk itself is broken"
    loading = {
        path.relative_to(ROOT).as_posix(): _queries(path)
        for path in _tag_modules()
        if _queries(path) and path.relative_to(ROOT).as_posix() not in KNOWN_QUERYING
    }

    assert loading == {}


def test_the_known_list_names_only_tags_that_still_load_data():
    still = {name for name in KNOWN_QUERYING if (ROOT / name).is_file() and _queries(ROOT / name)}

    assert still == KNOWN_QUERYING


def test_the_walk_sees_a_selector_and_a_manager(tmp_path):
    module = tmp_path / "tags.py"
    module.write_text(
        "from app import selectors\nfrom app.selectors import panel_get, MAX\n\ndef f():\n    return M.objects.all()\n"
    )

    assert _queries(module) == ["1: from app import selectors", "2: from app.selectors import panel_get", "5: .objects"]
