"""The start dialog (GET runs:start): estimate, cost cap, monthly budget warning; and the cap on POST."""

from decimal import Decimal

import pytest
from django.urls import reverse

from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(make_dataset, agent, no_llm):
    return make_dataset(2, agent=agent)


def _spent(agent, agent_cost: str, judge_cost: str) -> Run:
    return Run.objects.create(
        agent=agent,
        agent_version=agent.current_version,
        dataset_name="Earlier",
        status=Run.Status.COMPLETED,
        agent_cost=Decimal(agent_cost),
        judge_cost=Decimal(judge_cost),
    )


def _url(dataset):
    return reverse("runs:start_dialog", args=[dataset.agent_id, dataset.pk])


def _start_url(dataset):
    return reverse("runs:start", args=[dataset.agent_id, dataset.pk])


def test_htmx_gets_the_dialog_with_the_estimate_and_the_teams_cap(client_alice, dataset, team):
    team.run_budget = Decimal("3.00")
    team.save()
    response = client_alice.get(_url(dataset), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith("<dialog data-autoopen")
    assert "Estimate" in html and "2 results" in html
    assert 'name="budget_cap"' in html and 'value="3.00"' in html
    assert 'name="request_key"' in html
    assert "No model calls" in html  # a knowledge agent scored offline costs nothing


def test_without_htmx_it_is_a_page_with_the_form(client_alice, dataset):
    response = client_alice.get(_url(dataset))
    assert response.status_code == 200
    assert "<html" in response.content.decode() and "▶ Start run" in response.content.decode()


def test_the_cap_from_the_dialog_is_the_runs(client_alice, dataset):
    client_alice.post(_start_url(dataset), {"request_key": "k1", "budget_cap": "1.25"})
    assert Run.objects.get().budget_cap == Decimal("1.25")


def test_a_cap_under_a_cent_is_a_cap(client_alice, dataset):
    """Issue 34, item 6: a small run on a cheap model costs less than a cent."""
    client_alice.post(_start_url(dataset), {"request_key": "k1", "budget_cap": "0.005"})
    assert Run.objects.get().budget_cap == Decimal("0.005")
    dialog = client_alice.get(_url(dataset), HTTP_HX_REQUEST="true").content.decode()
    assert 'min="0.000001" step="any"' in dialog


def test_an_empty_cap_means_no_cap_even_with_a_team_default(client_alice, dataset, team):
    team.run_budget = Decimal("3")
    team.save()
    client_alice.post(_start_url(dataset), {"request_key": "k2", "budget_cap": ""})
    assert Run.objects.get().budget_cap is None


def test_a_bad_cap_is_refused_in_the_dialog_and_starts_nothing(client_alice, dataset):
    response = client_alice.post(_start_url(dataset), {"request_key": "k3", "budget_cap": "-2"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<form id="start-form"')
    assert "Enter a cap above $0" in html and 'value="-2"' in html
    assert not Run.objects.exists()


def test_the_dialog_and_the_runs_list_warn_from_80_percent_of_the_monthly_budget(client_alice, dataset, team, agent):
    team.monthly_budget = Decimal("10")
    team.save()
    _spent(agent, "7", "0.5")
    assert "monthly budget" not in client_alice.get(_url(dataset), HTTP_HX_REQUEST="true").content.decode()

    _spent(agent, "0.4", "0.2")  # 81%
    dialog = client_alice.get(_url(dataset), HTTP_HX_REQUEST="true").content.decode()
    listing = client_alice.get(reverse("runs:list", args=[agent.pk])).content.decode()
    for html in (dialog, listing):
        assert "81% of the monthly budget used" in html
        assert "$8.10 of $10.00" in html


def test_another_teams_dataset_is_404(client_charlie, dataset):
    assert client_charlie.get(_url(dataset)).status_code == 404


def test_the_run_button_opens_the_dialog_with_htmx(client_alice, dataset):
    html = client_alice.get(reverse("datasets:detail", args=[dataset.agent_id, dataset.pk])).content.decode()
    assert f'hx-get="{_url(dataset)}" hx-target="#dialog-slot"' in html
