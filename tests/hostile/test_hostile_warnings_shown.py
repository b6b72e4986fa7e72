"""Import warnings are shown where the user is (issue 48): the dataset page they land on after
an upload or an import, and the API's dataset, each naming the file and the row, line or cell."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from accounts.services import api_token_create
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401
from tests.hostile.pages import body

pytestmark = pytest.mark.django_db


def _text(response) -> str:  # type: ignore[no-untyped-def]
    """The page as a person reads it: tags removed, entities decoded, spaces squashed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body(response))).split()).replace(" :", ":")


WRAPPED_MD = "| Question | Expected answer |\n|---|---|\n| First? | Yes |\n| A long question\nwrapped by hand? | No |\n"
# (file name, bytes, what the dataset page and the API must say)
FILES = [
    (
        "unclosed.csv",
        b'question,expected\nFirst?,Yes\n"Never closed?,Yes\n',
        "unclosed.csv, row 3: A quote is never closed",
    ),
    ("ansi.csv", "question,expected\nCafé?,Oui\n".encode("cp1252"), "ansi.csv, line 2: The file is not UTF-8"),
    ("cr.csv", b"question,expected\nOne?,1\nTwo\rstill two?,2\n", "cr.csv, row 3: A cell holds a lone carriage return"),
    (
        "formula.xlsx",
        files.with_cached_values(
            files.xlsx_bytes({"Cases": [["Question", "Expected answer"], ["Ship?", '=CONCAT("3 ","days")']]}),
            {"B2": "3 days"},
        ),
        "formula.xlsx, Cases row 2: The “Expected answer” cell is a formula",
    ),
    (
        "merged.xlsx",
        files.xlsx_bytes(
            {"Cases": [["Question", "Expected answer"], ["A?", "Same"], ["B?", None]]}, merges={"Cases": ["B2:B3"]}
        ),
        "merged.xlsx, Cases row 3: The “Expected answer” value comes from the merged cells B2:B3",
    ),
    ("wrapped.md", WRAPPED_MD.encode(), "wrapped.md, line 4: The row is written over lines 4-5"),
]


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables need no model."""


@pytest.mark.parametrize(("name", "data", "says"), FILES, ids=[item[0] for item in FILES])
def test_the_dataset_page_and_the_api_show_the_import_warning(client_alice, alice, agent, name, data, says):
    dataset = extract(agent, name, data)
    assert dataset.status == "ready", dataset.failure_reason

    page = client_alice.get(reverse("datasets:detail", args=[agent.pk, dataset.pk]))
    _token, raw = api_token_create(user=alice, name="ci")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get(f"/api/agents/{agent.pk}/eval/datasets/{dataset.pk}")

    text = _text(page)
    assert "Ready with warnings" in text
    where, message = says.split(": ", 1)
    assert f"{where}: {message}" in text, text[text.find("Ready with warnings") :][:2000]
    shown = [f"{item['where']}: {item['message']}" for item in api.json()["warnings"]]
    assert any(item.startswith(says) for item in shown), shown


def test_an_import_on_the_dataset_page_tells_where_its_warnings_are_and_lists_them(client_alice, agent):
    from tests.factories import DatasetFactory

    dataset = DatasetFactory(agent=agent, name="Imports")
    url = reverse("datasets:import_csv", args=[agent.pk, dataset.pk])
    data = b"question,expected_answer\nOne?,1\nTwo\rstill two?,2\n"

    response = client_alice.post(url, {"file": files.upload("cr.csv", data)}, follow=True)

    text = _text(response)
    assert "Imported 2 test cases. 1 warning (see the dataset page), the first: row 3: A cell holds a lone" in text
    detail = _text(client_alice.get(reverse("datasets:detail", args=[agent.pk, dataset.pk])))
    assert "cr.csv, row 3: A cell holds a lone carriage return" in detail


def test_the_mapping_step_shows_what_the_import_will_change_before_any_case_exists(client_alice, agent):
    """A test plan waits for its mapping: the warnings are on that page, with file and row."""
    from tests.datasets.test_extraction_mapping import PLAN_HEADER, PLAN_ROWS

    rows = [["Acme plan"], [], PLAN_HEADER, *PLAN_ROWS]
    data = files.xlsx_bytes({"Test plan": rows}, merges={"Test plan": ["B4:B5"]})
    dataset = extract(agent, "plan.xlsx", data, confirm=False)
    assert dataset.status == "review"

    page = client_alice.get(reverse("datasets:mapping", args=[agent.pk, dataset.pk]))

    assert "plan.xlsx, Test plan row 5: The “Scenario” value comes from the merged cells B4:B5" in _text(page)
