"""Hostile CSVs through the other ways in: "Import CSV" on a dataset and "New dataset from a file".

Those paths read UTF-8 only (the upload path of test_hostile_uploads.py also reads
cp1252), so an oddly encoded file is refused with what to do. For every file, as a
plain form and as htmx: no 5xx, a readable answer, nothing half imported, markup
shown as text, response headers small enough for any proxy (the toast travels in the
HX-Trigger header), and formula cells neutralised on the way out (check 15 in docs/architecture.md).
"""

from __future__ import annotations

import csv
import html
import io

import pytest
from django.urls import reverse

from datasets.fields import FORMULA_TRIGGERS
from datasets.models import Dataset
from tests.datasets.files import csv_bytes, upload
from tests.factories import DatasetFactory
from tests.hostile.corpus import CORPUS, FORMULA_CELLS, XSS_PAYLOADS
from tests.hostile.pages import assert_no_leaks, body

pytestmark = pytest.mark.django_db

IMPORTED, REFUSED = "imported", "refused"
# nginx's default proxy_buffer_size is one memory page: larger response headers are a 502.
MAX_HEADER_BYTES = 4096
_UPLOADS = {item.id: item for item in CORPUS}


def _many_columns() -> bytes:
    header = ["question", *[f"unused column {n} " + "x" * 80 for n in range(3000)]]
    return csv_bytes([header, ["Is this imported?", *[""] * 3000]])


# (id, data, outcome, what the user must read / how many cases)
CSV_FILES = [
    ("cp1252", _UPLOADS["csv-cp1252"].data, REFUSED, "The file is not UTF-8 text"),
    ("utf16", _UPLOADS["csv-utf16"].data, REFUSED, "The file is not UTF-8 text"),
    ("invalid-utf8", _UPLOADS["csv-invalid-utf8"].data, REFUSED, "The file is not UTF-8 text"),
    ("nul-bytes", b"question,expected_answer\nHi\x00?,Yes\n", IMPORTED, 1),  # stripped, with a warning
    ("ragged-rows", _UPLOADS["csv-ragged-rows"].data, REFUSED, "it has 4 cells but the header has 2 columns"),
    ("bom-only", b"\xef\xbb\xbf", REFUSED, "The file is empty"),
    ("unterminated-quote", b'question,expected_answer\n"Never closed?,Yes\n', IMPORTED, 1),
    ("two-mb-line", b"question\n" + b"x" * 2_000_000 + b"\n", REFUSED, "Row 2: Question: Keep this under 200,000"),
    ("100kb-cells", _UPLOADS["csv-100kb-cells"].data, IMPORTED, 2),
    ("formula-injection", _UPLOADS["csv-formula-injection"].data, IMPORTED, len(FORMULA_CELLS)),
    (
        "xss",
        csv_bytes([["question", "expected_answer", "tags"], *[[p, p, p[:40]] for p in XSS_PAYLOADS]]),
        IMPORTED,
        len(XSS_PAYLOADS),
    ),
    (
        "markup-in-header",
        csv_bytes([["question", "<script>alert('col')</script>", "{{ 7*7 }}"], ["Hi?", "x", "y"]]),
        IMPORTED,
        1,
    ),
    ("thousands-of-columns", _many_columns(), IMPORTED, 1),
]


@pytest.fixture
def dataset(agent) -> Dataset:
    return DatasetFactory(agent=agent, name="Imports")


def _post_import(client, dataset: Dataset, data: bytes, *, htmx: bool):  # type: ignore[no-untyped-def]
    url = reverse("datasets:import_csv", args=[dataset.agent_id, dataset.pk])
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(url, {"file": upload("cases.csv", data)}, headers=headers)


def _header_bytes(response) -> int:  # type: ignore[no-untyped-def]
    return sum(len(name) + len(value) + 4 for name, value in response.items())


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
@pytest.mark.parametrize(("name", "data", "outcome", "expect"), CSV_FILES, ids=[row[0] for row in CSV_FILES])
def test_every_hostile_csv_imports_whole_or_not_at_all(client_alice, dataset, name, data, outcome, expect, htmx):
    response = _post_import(client_alice, dataset, data, htmx=htmx)

    assert response.status_code in (200, 302, 204), response.status_code
    assert _header_bytes(response) < MAX_HEADER_BYTES, f"{_header_bytes(response)} bytes of headers"
    pages = {
        "import": response,
        "detail": client_alice.get(reverse("datasets:detail", args=[dataset.agent_id, dataset.pk])),
    }
    assert_no_leaks(pages)
    shown = html.unescape(body(response)) + html.unescape(body(pages["detail"])) + response.get("HX-Trigger", "")
    if outcome == REFUSED:
        assert dataset.cases.count() == 0, "a refused file imports nothing"
        assert expect in shown
    else:
        assert dataset.cases.count() == expect
        assert "Imported" in shown
    for page in pages.values():
        for payload in [*XSS_PAYLOADS, "<script>alert('col')</script>"]:
            if "<" in payload:
                assert payload not in body(page), "markup from the file rendered as markup"


@pytest.mark.parametrize(("name", "data", "outcome", "expect"), CSV_FILES, ids=[row[0] for row in CSV_FILES])
def test_a_new_dataset_from_a_hostile_csv_is_whole_or_not_there(client_alice, agent, name, data, outcome, expect):
    url = reverse("datasets:create", args=[agent.pk])

    response = client_alice.post(url, {"name": "", "file": upload("cases.csv", data)}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert _header_bytes(response) < MAX_HEADER_BYTES
    assert_no_leaks({"create": response})
    if outcome == REFUSED:
        assert not Dataset.objects.filter(agent=agent).exists(), "a refused file leaves no empty dataset behind"
        assert expect in html.unescape(body(response))
    else:
        assert Dataset.objects.get(agent=agent).cases.count() == expect
        assert "HX-Redirect" in response


def test_formula_cells_leave_in_the_csv_export_as_text_and_come_back_unchanged(client_alice, dataset):
    _post_import(client_alice, dataset, _UPLOADS["csv-formula-injection"].data, htmx=True)
    questions = sorted(dataset.cases.values_list("question", flat=True))
    export = client_alice.get(reverse("datasets:export_csv", args=[dataset.agent_id, dataset.pk]))

    rows = list(csv.reader(io.StringIO(export.content.decode("utf-8-sig"))))
    cells = [cell for row in rows for cell in row]
    assert all(not cell or cell[0] not in FORMULA_TRIGGERS for cell in cells), "a cell would run as a formula"
    assert sum(cell.startswith("'") for cell in cells) >= 2 * len(FORMULA_CELLS) - 2
    dataset.cases.all().delete()
    _post_import(client_alice, dataset, export.content, htmx=True)
    assert sorted(dataset.cases.values_list("question", flat=True)) == questions
