"""The run page opens on its results (issue 34, item 8): the figures and the result cards first,
Human review, the charts, the baseline and the suggestions each on a tab whose state is in the
address (?tab=...), the first failing card open, and a tab not shown costs no query."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Run
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db

TABS = ("review", "charts", "baseline", "suggestions")


def _url(run):
    return reverse("runs:detail", args=[run.agent_id, run.pk])


@pytest.fixture
def run(agent, no_llm):
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    cases = [
        CaseSpec(question="First, passes", repeats=[("pass", 9.0)], tags=["billing"]),
        CaseSpec(question="Second, passes", repeats=[("pass", 8.0)]),
        CaseSpec(question="Third, fails", repeats=[("fail", 3.0)]),
        CaseSpec(question="Fourth, fails too", repeats=[("fail", 2.0)]),
    ]
    return build_run(agent=agent, dataset=dataset, cases=cases)


def _card(body: str, position: int) -> str:
    return re.search(rf'<li id="case-{position}".*?</li>', body, re.S).group(0)


def test_the_page_opens_on_the_results_with_each_panel_a_link_away(client_alice, run):
    body = client_alice.get(_url(run)).content.decode()
    for tab in TABS:
        assert f'href="{_url(run)}?tab={tab}"' in body
    assert 'id="run-tab-results"' in body and 'aria-current="page">Results' in body
    assert 'id="result-cards"' in body
    # The panels are a click away, not above the cards.
    assert 'id="run-charts"' not in body
    assert 'id="review-figures"' not in body
    assert 'id="baseline"' not in body
    assert 'id="suggestions"' not in body


@pytest.mark.parametrize(
    ("tab", "marker"),
    [
        ("review", 'id="review-figures"'),
        ("charts", 'id="run-charts"'),
        ("baseline", 'id="baseline"'),
        ("suggestions", 'id="suggestions"'),
    ],
)
def test_each_tab_is_its_own_address(client_alice, run, tab, marker):
    body = client_alice.get(_url(run), {"tab": tab}).content.decode()
    assert marker in body
    assert f'id="run-tab-{tab}" class="run-tab is-active" href="{_url(run)}?tab={tab}" aria-current="page"' in body
    # The cards only where they are reviewed too: under the review figures.
    assert ('id="result-cards"' in body) == (tab == "review")
    assert 'id="run-live"' in body  # the run's figures head every tab


def test_the_review_tab_keeps_itself_in_the_cards_links(client_alice, run):
    body = client_alice.get(_url(run), {"tab": "review"}).content.decode()
    assert f'href="{_url(run)}?filter=failed&amp;tab=review#results"' in body
    results = reverse("runs:results", args=[run.agent_id, run.pk])
    response = client_alice.get(results, {"filter": "failed", "tab": "review"}, HTTP_HX_REQUEST="true")
    assert response["HX-Push-Url"] == f"{_url(run)}?filter=failed&tab=review"


def test_an_unknown_tab_shows_the_results(client_alice, run):
    body = client_alice.get(_url(run), {"tab": "nonsense"}).content.decode()
    assert 'id="result-cards"' in body


def test_the_first_failing_card_is_open_and_no_other(client_alice, run):
    body = client_alice.get(_url(run)).content.decode()
    assert '<details class="result-details" open>' in _card(body, 2)
    for position in (0, 1, 3):
        assert '<details class="result-details">' in _card(body, position)


def test_the_poll_of_another_tab_keeps_its_tab_and_reads_no_card(client_alice, agent, no_llm):
    cases = [CaseSpec(repeats=[("pass", 9.0)]), CaseSpec(repeats=[("pending", None)])]
    active = build_run(agent=agent, cases=cases, status=Run.Status.RUNNING)
    body = client_alice.get(_url(active), {"tab": "baseline"}).content.decode()
    assert f'hx-get="{_url(active)}?tab=baseline"' in body
    poll = client_alice.get(_url(active), {"tab": "baseline"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="run-live"' in poll
    # No cards, filters or cursor for a list the tab does not show.
    assert 'id="result-filters"' not in poll and 'id="live-seen"' not in poll


def test_a_tab_not_shown_costs_no_query(client_alice, run):
    client_alice.get(_url(run))  # warm the session and the charts cache
    with CaptureQueriesContext(connection) as results_page:
        client_alice.get(_url(run))
    with CaptureQueriesContext(connection) as baseline_page:
        client_alice.get(_url(run), {"tab": "baseline"})
    # The baseline tab reads no card; the results tab no suggestion, baseline or chart.
    baseline_sql = " ".join(q["sql"] for q in baseline_page.captured_queries)
    assert "reviews_review" not in baseline_sql and len(baseline_page) < len(results_page)
    assert not [q for q in results_page.captured_queries if '"suggestions_' in q["sql"]]
