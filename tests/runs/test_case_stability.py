"""Flaky cases: verdict flips across a dataset's runs with nothing changed (runs.comparing.stats.verdict_flips,
runs.comparing.flaky), the marks on the dataset page and result cards, and the filter."""

import pytest
from django.test import override_settings
from django.urls import reverse

from agents.models import AgentVersion
from datasets.models import TestCase
from runs.comparing.flaky import case_stability_refresh
from runs.comparing.stats import verdict_flips
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

P, F = True, False


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([], (0, 0)),
        ([P], (0, 0)),
        ([P, P, P], (0, 2)),
        ([P, F], (1, 1)),
        ([P, F, P, F], (3, 3)),
        ([P, P, F, F, P], (2, 4)),
    ],
)
def test_flips_are_changes_between_consecutive_verdicts(verdicts, expected):
    assert verdict_flips(verdicts) == expected


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


@pytest.fixture
def cases(dataset):
    return [TestCaseFactory(dataset=dataset, question=f"Question {n}") for n in range(3)]


def _run(agent, dataset, cases, outcomes, **kwargs):
    """One run of the dataset: `outcomes` holds each case's repeats as "p"/"f" strings."""
    specs = [
        CaseSpec(
            question=case.question,
            expected=case.expected_answer,
            source_case_id=case.pk,
            repeats=[("pass", 9.0) if o == "p" else ("fail", 2.0) for o in outcome],
        )
        for case, outcome in zip(cases, outcomes, strict=True)
    ]
    return build_run(agent=agent, dataset=dataset, cases=specs, **kwargs)


def _figures(cases):
    return [(c.flips, c.flip_chances) for c in TestCase.objects.filter(pk__in=[c.pk for c in cases]).order_by("pk")]


@pytest.mark.django_db
def test_flips_are_counted_across_runs_and_repeats(agent, dataset, cases):
    _run(agent, dataset, cases, ["p", "p", "pf"])
    _run(agent, dataset, cases, ["p", "f", "pf"])
    _run(agent, dataset, cases, ["p", "p", "p"])

    case_stability_refresh(dataset_id=dataset.pk)

    # Case 0 never flips; case 1 p->f->p; case 2 p,f | p,f | p: four flips in four chances.
    assert _figures(cases) == [(0, 2), (2, 2), (4, 4)]
    flaky = [c.is_flaky for c in TestCase.objects.filter(pk__in=[c.pk for c in cases]).order_by("pk")]
    assert flaky == [False, True, True]
    assert list(TestCase.objects.filter(TestCase.flaky_filter()).order_by("pk")) == cases[1:]


@pytest.mark.django_db
def test_a_new_agent_version_or_an_edited_case_is_not_a_flip(agent, dataset, cases):
    v2 = AgentVersion.objects.create(agent=agent, number=2)
    _run(agent, dataset, cases, ["p", "p", "p"])
    _run(agent, dataset, cases, ["f", "p", "p"], version=v2)  # the agent changed
    edited = [cases[0], cases[1], cases[2]]
    cases[1].expected_answer = "Something else"  # the case changed
    _run(agent, dataset, edited, ["f", "f", "p"], version=v2)
    _run(agent, dataset, cases, ["f", "f", "p"], version=v2, judge_model="other", scorer="llm")  # the judge changed

    case_stability_refresh(dataset_id=dataset.pk)

    # Each verdict change above crossed a change of version, case or judge: no flip anywhere.
    assert _figures(cases) == [(0, 1), (0, 0), (0, 1)]


@pytest.mark.django_db
@override_settings(EVALSITE_FLAKY_FLIP_RATE=0.5)
def test_the_flip_rate_setting_decides_the_mark(agent, dataset, cases):
    for outcome in ("p", "f", "f", "f", "f"):
        _run(agent, dataset, cases, [outcome, "p", "p"])
    case_stability_refresh(dataset_id=dataset.pk)
    case = TestCase.objects.get(pk=cases[0].pk)
    assert (case.flips, case.flip_chances) == (1, 4) and case.flip_rate == 0.25
    assert not case.is_flaky
    with override_settings(EVALSITE_FLAKY_FLIP_RATE=0.2):
        assert case.is_flaky


@pytest.mark.django_db
def test_finishing_a_run_refreshes_the_marks(agent, dataset, cases):
    from runs.services import run_finish

    _run(agent, dataset, cases, ["p", "p", "p"])
    run = _run(agent, dataset, cases, ["f", "p", "p"], status="running")
    run_finish(run_id=run.pk)
    assert _figures(cases)[0] == (1, 1)


@pytest.mark.django_db
def test_the_dataset_page_marks_and_filters_flaky_cases(client_alice, agent, dataset, cases):
    _run(agent, dataset, cases, ["p", "p", "p"])
    _run(agent, dataset, cases, ["p", "f", "p"])
    case_stability_refresh(dataset_id=dataset.pk)
    url = reverse("datasets:detail", args=[agent.pk, dataset.pk])

    page = client_alice.get(url).content.decode()
    assert page.count("Flaky · flipped 1/1") == 1
    assert 'name="flaky"' in page and "Flaky cases only" in page

    filtered = client_alice.get(
        reverse("datasets:case_search", args=[agent.pk, dataset.pk]), {"flaky": "1"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Question 1" in filtered and "Question 0" not in filtered and "Question 2" not in filtered
    assert "1 of 3 test cases is flaky" in filtered
    # Like a search, the flaky view neither numbers its cases 1, 2... nor offers to move them.
    assert 'class="move-form"' in page and 'class="move-form"' not in filtered
    assert '<div class="case-number" aria-hidden="true"></div>' in filtered


@pytest.mark.django_db
def test_the_flaky_filter_keeps_the_dataset_page_in_its_query_budget(
    client_alice, agent, dataset, cases, django_assert_max_num_queries
):
    _run(agent, dataset, cases, ["p", "f", "p"])
    _run(agent, dataset, cases, ["f", "p", "p"])
    case_stability_refresh(dataset_id=dataset.pk)
    with django_assert_max_num_queries(16):
        response = client_alice.get(reverse("datasets:detail", args=[agent.pk, dataset.pk]), {"flaky": "1"})
    assert response.status_code == 200
    with django_assert_max_num_queries(12):
        client_alice.get(
            reverse("datasets:case_search", args=[agent.pk, dataset.pk]), {"flaky": "1"}, HTTP_HX_REQUEST="true"
        )


@pytest.mark.django_db
def test_result_cards_mark_a_flaky_case(client_alice, agent, dataset, cases):
    _run(agent, dataset, cases, ["p", "p", "p"])
    run = _run(agent, dataset, cases, ["p", "f", "p"])
    case_stability_refresh(dataset_id=dataset.pk)
    page = client_alice.get(reverse("runs:detail", args=[agent.pk, run.pk])).content.decode()
    assert page.count("Flaky · flipped 1/1") == 1
