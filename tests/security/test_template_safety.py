"""No template or Python code turns user, upload or model text into markup (check 3 in docs/architecture.md).

Autoescaping covers {{ }} in HTML text and quoted attributes. It does not cover:
- `|safe`, `|safeseq`, `{% autoescape off %}`, `{% filter safe %}` in templates;
- `mark_safe`, `SafeString`, `format_html` over pre-formatted text, `is_safe=True`
  filters and `autoescape` switched off in Python;
- unquoted attributes (`<div class={{ x }}>`), and non-HTML contexts: inline <script>,
  `on*=` handlers, `style=`, `hx-vals`/`hx-headers`/`hx-on`, `javascript:` URLs,
  where HTML escaping is the wrong escaping. htmx acts on any hx-* attribute a swap
  brings in, so one unescaped field is a request on the user's behalf.

Anything in those contexts must be on ALLOWED with a reason: our own constant markup or
values we compute (numbers, the CSRF token), never text a user, a file or a model wrote.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".venv", "node_modules", "staticfiles", "var", ".git", "tests", "__pycache__", "bench"}

# Template expressions allowed in a non-HTML context, and why. Keep this tiny.
ALLOWED_EXPRESSIONS = {
    "csrf_token": "Django's CSRF token, in base.html's hx-headers JSON: [A-Za-z0-9] only",
    "run.progress_percent": "an int computed by Run.progress_percent (CSS width)",
    "child.progress_percent": "an int computed by Run.progress_percent (CSS width)",
    "run.pk": "a primary key (int), in an onfocus handler of suggestions/partials/verify_form.html",
    "field.name": "one of suggestions.services.EDITABLE_FIELDS (instructions, skills, ...), in hx-vals JSON",
    "pass_percent": "an int rounded in runs/reports/exporters.py (CSS width in the report)",
    "fail_percent": "an int rounded in runs/reports/exporters.py (CSS width in the report)",
    "error_percent": "an int rounded in runs/reports/exporters.py (CSS width in the report)",
    "row.depth": "an int counted by monitoring.selectors span_tree (a span's indent, --depth)",
}

TEMPLATE_FLAGS = [
    (re.compile(r"\|\s*safe(seq)?\b"), "the |safe / |safeseq filter"),
    (re.compile(r"\{%\s*autoescape\s+off\s*%\}"), "{% autoescape off %}"),
    (re.compile(r"\{%\s*filter\s+[^%]*\bsafe\b"), "{% filter safe %}"),
    (re.compile(r"""\s[\w:@.\-]+=\{[{%]"""), "an unquoted attribute value built from a variable"),
]
NON_HTML_CONTEXTS = [
    (re.compile(r"<script\b[^>]*>(.*?)</script>", re.S | re.I), "an inline <script>"),
    (re.compile(r"""\son[a-z]+\s*=\s*("[^"]*"|'[^']*')""", re.I), "an on*= event handler"),
    (re.compile(r"""\sstyle\s*=\s*("[^"]*"|'[^']*')""", re.I), "a style attribute"),
    (re.compile(r"""\shx-(?:vals|headers|on[\w:-]*)\s*=\s*("[^"]*"|'[^']*')""", re.I), "an hx-vals/hx-headers/hx-on"),
    (re.compile(r"""=\s*["']\s*javascript:([^"']*)""", re.I), "a javascript: URL"),
]
VARIABLE = re.compile(r"\{\{\s*(.*?)\s*\}\}|\{%\s*(.*?)\s*%\}", re.S)
# Template tags that emit no text, or only our own constant URLs and static paths.
# ({% widthratio %} prints an integer.)
HARMLESS_TAGS = re.compile(
    r"^(url|static|if|elif|else|endif|for|empty|endfor|with|endwith|comment|endcomment|load|widthratio)\b"
)

PYTHON_ALWAYS = {"mark_safe", "SafeString", "SafeText", "SafeData", "Markup", "html_safe"}
PYTHON_FORMATTERS = {"format_html", "format_html_join"}


def template_findings(text: str) -> list[str]:
    findings = []
    for pattern, what in TEMPLATE_FLAGS:
        for match in pattern.finditer(text):
            findings.append(f"{what}: {match.group(0).strip()[:80]}")
    for pattern, what in NON_HTML_CONTEXTS:
        for match in pattern.finditer(text):
            for variable in VARIABLE.finditer(match.group(1)):
                expression = (variable.group(1) or "").strip()
                tag = (variable.group(2) or "").strip()
                if variable.group(1) is not None and expression not in ALLOWED_EXPRESSIONS:
                    findings.append(f"{{{{ {expression} }}}} inside {what}")
                elif variable.group(2) is not None and not HARMLESS_TAGS.match(tag):
                    findings.append(f"{{% {tag} %}} inside {what}")
    return findings


def python_findings(source: str) -> list[str]:
    findings = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name in PYTHON_ALWAYS:
                findings.append(f"line {node.lineno}: {name}()")
            elif name in PYTHON_FORMATTERS and not (
                node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            ):
                findings.append(f"line {node.lineno}: {name}() whose format string is not a literal")
            for keyword in node.keywords:
                if keyword.arg in ("is_safe", "needs_autoescape") and _truthy(keyword.value):
                    findings.append(f"line {node.lineno}: {keyword.arg}=True")
                if keyword.arg == "autoescape" and not _truthy(keyword.value):
                    findings.append(f"line {node.lineno}: autoescape switched off")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "autoescape" and not _truthy(value):
                    findings.append(f"line {node.lineno}: autoescape switched off in settings")
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                if _name(decorator) in PYTHON_ALWAYS:
                    findings.append(f"line {node.lineno}: @{_name(decorator)}")
    return findings


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _name(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _truthy(node: ast.AST) -> bool:
    return not (isinstance(node, ast.Constant) and not node.value)


def _files(*suffixes: str) -> list[Path]:
    found = []
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in SKIP_DIRS and not name.startswith(".")]
        found += [Path(folder) / name for name in names if Path(name).suffix in suffixes]
    return sorted(found)


def test_the_scan_reads_the_console():
    templates = {str(path.relative_to(ROOT)) for path in _files(".html")}
    modules = {str(path.relative_to(ROOT)) for path in _files(".py")}

    assert {"templates/base.html", "templates/datasets/partials/case_row.html"} <= templates
    assert {"datasets/views.py", "evalsite/settings.py", "runs/templatetags/runs_tags.py"} <= modules


def test_no_template_turns_text_into_markup():
    problems = [
        f"{path.relative_to(ROOT)}: {finding}"
        for path in _files(".html", ".txt")
        for finding in template_findings(path.read_text(encoding="utf-8"))
    ]

    assert problems == [], "Escaping bypassed (allow only our own constants, with a reason):\n" + "\n".join(problems)


def test_no_python_code_marks_text_safe():
    problems = [
        f"{path.relative_to(ROOT)} {finding}"
        for path in _files(".py")
        for finding in python_findings(path.read_text(encoding="utf-8"))
    ]

    assert problems == [], "Escaping bypassed in Python:\n" + "\n".join(problems)


def test_every_allowed_expression_is_still_used():
    used = "\n".join(path.read_text(encoding="utf-8") for path in _files(".html"))

    stale = [
        expression for expression in ALLOWED_EXPRESSIONS if not re.search(r"\{\{\s*" + re.escape(expression), used)
    ]
    assert stale == [], f"Remove stale entries from ALLOWED_EXPRESSIONS: {stale}"


def test_the_scanners_catch_each_way_round_escaping():
    """So a clean result means something: every pattern fires on a sample."""
    samples = {
        "{{ case.question|safe }}": 1,
        "{{ tags|safeseq|join:', ' }}": 1,
        "{% autoescape off %}{{ result.actual_answer }}{% endautoescape %}": 1,
        "{% filter safe %}{{ x }}{% endfilter %}": 1,
        "<div class={{ dataset.name }}>": 1,
        "<script>var q = '{{ case.question }}';</script>": 1,
        "<script>{% include 'x.js' %}</script>": 1,
        "<a onclick=\"go('{{ agent.name }}')\">": 1,
        '<span style="color: {{ tag }}">': 1,
        '<div hx-vals=\'{"q": "{{ query }}"}\'>': 1,
        '<a href="javascript:{{ url }}">': 1,
        # Fine: escaped text, quoted attributes, our own numbers and URLs.
        '<p class="{{ css }}" title="{{ case.question }}">{{ case.question }}</p>': 0,
        '<span style="width: {{ run.progress_percent }}%"></span>': 0,
        "<script src=\"{% static 'js/app.js' %}\"></script>": 0,
    }
    for sample, expected in samples.items():
        assert len(template_findings(sample)) == expected, sample

    python = {
        "from django.utils.safestring import mark_safe\nmark_safe(answer)": 1,
        "format_html(f'<b>{name}</b>')": 1,
        "format_html('<b>{}</b>'.format(name))": 1,
        "register.filter(name='x', is_safe=True)": 1,
        "TEMPLATES = [{'OPTIONS': {'autoescape': False}}]": 1,
        "Template(source, autoescape=False)": 1,
        "@mark_safe\ndef f(): pass": 1,
        "format_html('<b>{}</b>', name)": 0,
        "escape(name)": 0,
    }
    for sample, expected in python.items():
        assert len(python_findings(sample)) == expected, sample
