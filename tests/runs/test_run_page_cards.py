"""What a page of result cards costs to render (issue 20): the URLs a card repeats are reversed
once per page, not once per card, and the first page of a long run is a page of 25 cards
("Load more" brings the next)."""

import pytest
from django.urls import reverse
from django.urls.resolvers import URLResolver

from reviews.models import Review
from runs import outcomes, selectors
from runs.models import Result
from runs.templatetags.runs_tags import card_url
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db


def _reverses(monkeypatch):
    calls = []
    original = URLResolver._reverse_with_prefix

    def counted(self, lookup_view, _prefix, *args, **kwargs):
        calls.append(lookup_view)
        return original(self, lookup_view, _prefix, *args, **kwargs)

    monkeypatch.setattr(URLResolver, "_reverse_with_prefix", counted)
    return calls


def _linked_run(agent, cases):
    """A run of a dataset's cases (each card then has "the expected answer is wrong" and its
    links to the case), with a review on its first result."""
    dataset = DatasetFactory(agent=agent)
    rows = [TestCaseFactory(dataset=dataset, question=f"Question {n}") for n in range(cases)]
    specs = [CaseSpec(question=row.question, expected=row.expected_answer, source_case_id=row.pk) for row in rows]
    return build_run(agent=agent, dataset=dataset, cases=specs)


def test_a_page_reverses_its_card_urls_once_however_many_cards(client_alice, alice, agent, monkeypatch):
    monkeypatch.setattr(outcomes, "CARDS_PER_PAGE", 20)
    counts = []
    for cases in (2, 20):
        run = _linked_run(agent, cases)
        Review.objects.create(result=Result.objects.filter(run=run).first(), reviewer=alice, agrees=True, passed=True)
        url = reverse("runs:detail", args=[agent.pk, run.pk])
        client_alice.get(url)  # warm: templates compiled
        calls = _reverses(monkeypatch)
        body = client_alice.get(url).content.decode()
        monkeypatch.undo()
        monkeypatch.setattr(outcomes, "CARDS_PER_PAGE", 20)
        assert body.count('class="result-card ') == cases
        assert body.count("The expected answer is wrong") == cases
        counts.append(len(calls))
    assert counts[0] == counts[1], f"reverse() calls grow with the cards: {counts}"


def test_card_url_is_the_reversed_url(agent):
    run = _linked_run(agent, 1)
    result = Result.objects.get(run=run)
    for name in ("reviews:review", "reviews:case_correct"):
        assert card_url(name, agent.pk, run.pk, result.pk) == reverse(name, args=[agent.pk, run.pk, result.pk])
    case = result.case
    expected = reverse("datasets:case_edit", args=[agent.pk, run.dataset_id, case.source_case_id])
    assert card_url("datasets:case_edit", agent.pk, run.dataset_id, case.source_case_id) == expected


def test_the_first_page_of_a_long_run_is_25_cards(client_alice, agent):
    run = build_run(agent=agent, cases=[CaseSpec(question=f"Q{n}") for n in range(40)])
    body = client_alice.get(reverse("runs:detail", args=[agent.pk, run.pk])).content.decode()
    assert selectors.CARDS_PER_PAGE == 25
    assert body.count('class="result-card ') == 25
    assert "Load more cases" in body
