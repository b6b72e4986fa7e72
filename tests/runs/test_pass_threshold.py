"""The default pass threshold is one constant: a dataset's default, and what a run whose
scoring snapshot has none passes at."""

import pytest
from django.urls import reverse

from datasets.models import DEFAULT_PASS_THRESHOLD, Dataset
from runs.models import Run
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run


def test_a_new_dataset_and_a_run_without_one_share_the_default():
    assert DEFAULT_PASS_THRESHOLD == 7
    assert Dataset().pass_threshold == DEFAULT_PASS_THRESHOLD
    assert Run(scoring={}).pass_threshold == DEFAULT_PASS_THRESHOLD


def test_a_runs_own_threshold_wins_even_at_zero():
    assert Run(scoring={"pass_threshold": 0}).pass_threshold == 0
    assert Run(scoring={"pass_threshold": 9}).pass_threshold == 9


@pytest.mark.django_db
@pytest.mark.parametrize("scoring, shown", [({}, "Pass at 7/10"), ({"pass_threshold": 0}, "Pass at 0/10")])
def test_the_html_report_shows_the_runs_threshold(client_alice, agent, scoring, shown):
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec()])
    Run.objects.filter(pk=run.pk).update(scoring=scoring)

    html = client_alice.get(reverse("runs:export_html", args=[agent.pk, run.pk])).content.decode()

    assert shown in html


@pytest.mark.django_db
def test_the_run_page_and_its_chart_show_the_runs_threshold(client_alice, agent):
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec()])
    Run.objects.filter(pk=run.pk).update(scoring={"pass_threshold": 0})

    url = reverse("runs:detail", args=[agent.pk, run.pk])
    html = client_alice.get(url).content.decode()
    charts = client_alice.get(url, {"tab": "charts"}).content.decode()

    assert "<span>Pass at 0/10</span>" in html
    assert "pass at 0/10</span></figcaption>" in charts
