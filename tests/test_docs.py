"""The documentation: the README stays a front door under 1,500 words, its links reach real
pages and headings, the MkDocs site builds strict (a broken link or anchor fails it, as
`make docs` in CI does), and every screenshot the docs embed is one the browser test takes."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_WORDS = 1500
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs gives a page's headings (its toc extension's slugify)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    headings = re.findall(r"^#{1,6} (.+)$", text, flags=re.M)
    return {slugify(re.sub(r"[`*]", "", heading).strip(), "-") for heading in headings}


def test_the_readme_is_a_front_door_under_1500_words():
    words = len(README.read_text().split())  # as `wc -w` counts them
    assert words <= README_WORDS, f"README.md has {words} words; move detail to a docs/ page"
    for needed in ("make run", "make test", "EVALSITE_LLM_MODEL", "make local-model", "docs/architecture.md"):
        assert needed in README.read_text(), needed


def test_every_link_of_the_readme_reaches_a_file_and_its_heading():
    broken = []
    for target in LINK.findall(README.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else README
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == []


def test_the_docs_site_builds_strict(tmp_path):
    built = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "index.html").exists()


def test_a_broken_link_fails_the_docs_build(tmp_path):
    """A link to a missing page, to a heading no page has, or out of docs/, and a page left
    out of the nav, fail the build, each named (mkdocs.yml's validation settings)."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "install.md"
    links = "[a](no-such-page.md), [b](runs.md#no-such-heading) and [c](../Makefile)"
    page.write_text(page.read_text() + f"\nSee {links}.\n")
    (tmp_path / "docs" / "stray.md").write_text("# A page in no nav\n")
    built = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    for said in ("no-such-page.md", "#no-such-heading", "../Makefile", "stray.md"):
        assert said in built.stderr, said


def test_every_screenshot_the_docs_embed_is_taken_by_the_browser_test():
    from tests.e2e.test_doc_screenshots import SHOTS

    texts = [README.read_text()] + [page.read_text() for page in DOCS.glob("*.md")]
    embedded = {name for text in texts for name in re.findall(r"screenshots/([\w-]+)\.png", text)}
    assert embedded, "the docs embed no screenshot"
    assert embedded <= set(SHOTS), embedded - set(SHOTS)
    for name in SHOTS:
        assert (DOCS / "screenshots" / f"{name}.png").exists(), name
