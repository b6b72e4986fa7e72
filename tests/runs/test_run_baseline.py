"""A dataset's pinned baseline: pinning from the run page, and every new run of the dataset
showing its difference from the baseline with the paired test."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from agents.models import AgentVersion
from runs.comparing.baseline import baseline_box_get, baseline_run_get
from runs.models import DatasetBaseline, Run
from runs.services import dataset_baseline_pin, dataset_baseline_unpin
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _cases(*outcomes):
    return [CaseSpec(question=f"Question {n}", repeats=[outcome]) for n, outcome in enumerate(outcomes)]


def test_pinning_replaces_the_dataset_baseline(agent, dataset, alice):
    first = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0)))
    second = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0)))
    dataset_baseline_pin(run=first, user=alice)
    dataset_baseline_pin(run=second, user=alice)
    assert DatasetBaseline.objects.filter(dataset=dataset).count() == 1
    assert baseline_run_get(dataset_id=dataset.pk) == second
    dataset_baseline_unpin(run=first)  # not the baseline any more: nothing happens
    assert baseline_run_get(dataset_id=dataset.pk) == second
    dataset_baseline_unpin(run=second)
    assert baseline_run_get(dataset_id=dataset.pk) is None


@pytest.mark.parametrize("status", [Run.Status.STOPPED, Run.Status.FAILED, Run.Status.RUNNING])
def test_only_a_completed_run_can_be_pinned(agent, dataset, alice, status):
    run = build_run(agent=agent, dataset=dataset, status=status, cases=_cases(("pass", 9.0)))
    with pytest.raises(ValidationError, match="Only a completed run"):
        dataset_baseline_pin(run=run, user=alice)


def test_a_new_run_shows_its_difference_from_the_baseline(client_alice, agent, dataset, alice):
    v2 = AgentVersion.objects.create(agent=agent, number=2)
    baseline = build_run(agent=agent, dataset=dataset, cases=_cases(*[("pass", 9.0)] * 6))
    dataset_baseline_pin(run=baseline, user=alice)
    run = build_run(agent=agent, dataset=dataset, version=v2, cases=_cases(*[("fail", 3.0)] * 6))

    box = baseline_box_get(run=run)
    assert box is not None and box.test is not None
    assert (box.test.fixes, box.test.breaks) == (0, 6) and box.test.significantly_worse
    html = client_alice.get(reverse("runs:detail", args=[agent.pk, run.pk]), {"tab": "baseline"}).content.decode()
    assert "v2 fixes 0 and breaks 6 cases of 6; this is unlikely to be chance (p = 0.031)." in html
    assert "Mean score change −6.0 (95% interval −6.0 to −6.0" in html
    assert f"?a={baseline.pk}&amp;b={run.pk}" in html


def test_the_baseline_run_page_says_so_and_offers_unpin(client_alice, agent, dataset, alice):
    baseline = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0)))
    url = reverse("runs:baseline", args=[agent.pk, baseline.pk])
    response = client_alice.post(url, {"action": "pin"})
    assert response.status_code == 302 and response["Location"].endswith("#baseline")
    html = client_alice.get(reverse("runs:detail", args=[agent.pk, baseline.pk]), {"tab": "baseline"}).content.decode()
    assert "This run is the baseline of" in html and 'value="unpin"' in html
    client_alice.post(url, {"action": "unpin"})
    assert not DatasetBaseline.objects.exists()


def test_pinning_a_stopped_run_says_why_not(client_alice, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, status=Run.Status.STOPPED, cases=_cases(("pass", 9.0)))
    response = client_alice.post(reverse("runs:baseline", args=[agent.pk, run.pk]), {"action": "pin"}, follow=True)
    assert "Only a completed run can be the baseline" in response.content.decode()
    assert not DatasetBaseline.objects.exists()


def test_pinning_needs_post_and_the_team(client_alice, client_charlie, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0)))
    url = reverse("runs:baseline", args=[agent.pk, run.pk])
    assert client_alice.get(url).status_code == 405
    assert client_charlie.post(url, {"action": "pin"}).status_code == 404
    assert not DatasetBaseline.objects.exists()
