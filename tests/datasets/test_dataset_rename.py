"""Rename a dataset: inline in its list row, or in a dialog on its page (datasets:rename, datasets:row)."""

import pytest
from django.urls import reverse

from tests.factories import DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent, name="Refunds")


def _url(dataset, place: str = "") -> str:
    url = reverse("datasets:rename", args=[dataset.agent_id, dataset.pk])
    return f"{url}?in={place}" if place else url


@pytest.mark.django_db
def test_htmx_get_turns_the_row_into_an_inline_form(client_alice, dataset):
    html = client_alice.get(_url(dataset), **HTMX).content.decode()

    assert html.lstrip().startswith(f'<tr id="dataset-{dataset.pk}">')
    assert 'class="rename-form"' in html
    assert 'value="Refunds"' in html and "autofocus" in html


@pytest.mark.django_db
def test_inline_save_returns_the_updated_row_with_a_toast(client_alice, dataset):
    TestCaseFactory.create_batch(2, dataset=dataset)

    response = client_alice.post(_url(dataset), {"name": "Refund policy", "in": "row"}, **HTMX)

    dataset.refresh_from_db()
    html = response.content.decode()
    assert dataset.name == "Refund policy"
    assert html.lstrip().startswith(f'<tr id="dataset-{dataset.pk}">')
    assert "rename-form" not in html
    assert '<td class="num">2<span' in html
    assert "Renamed to" in response["HX-Trigger"]


@pytest.mark.django_db
def test_inline_duplicate_name_keeps_the_form_open_with_the_error(client_alice, dataset, agent):
    DatasetFactory(agent=agent, name="Smoke")

    response = client_alice.post(_url(dataset), {"name": "SMOKE", "in": "row"}, **HTMX)

    html = response.content.decode()
    assert 'class="rename-form"' in html
    assert "This agent already has a dataset named “SMOKE”" in html
    dataset.refresh_from_db()
    assert dataset.name == "Refunds"


@pytest.mark.django_db
def test_cancel_restores_the_row(client_alice, dataset):
    html = client_alice.get(reverse("datasets:row", args=[dataset.agent_id, dataset.pk]), **HTMX).content.decode()

    assert html.lstrip().startswith(f'<tr id="dataset-{dataset.pk}">')
    assert "rename-form" not in html


@pytest.mark.django_db
def test_row_without_htmx_goes_back_to_the_list(client_alice, dataset):
    response = client_alice.get(reverse("datasets:row", args=[dataset.agent_id, dataset.pk]))

    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:list", args=[dataset.agent_id])


@pytest.mark.django_db
def test_dialog_rename_refreshes_the_dataset_page(client_alice, dataset):
    dialog = client_alice.get(_url(dataset, "dialog"), **HTMX).content.decode()
    response = client_alice.post(_url(dataset), {"name": "Renamed", "in": "dialog"}, **HTMX)

    assert dialog.lstrip().startswith("<dialog data-autoopen")
    assert response["HX-Refresh"] == "true"
    dataset.refresh_from_db()
    assert dataset.name == "Renamed"


@pytest.mark.django_db
def test_plain_form_works_without_javascript(client_alice, dataset):
    page = client_alice.get(_url(dataset))
    response = client_alice.post(_url(dataset), {"name": "Plain"})

    assert page.status_code == 200 and "<html" in page.content.decode()
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:list", args=[dataset.agent_id])


@pytest.mark.django_db
def test_outsider_gets_404_and_cannot_rename(client_charlie, dataset):
    assert client_charlie.get(_url(dataset), **HTMX).status_code == 404
    assert client_charlie.post(_url(dataset), {"name": "Pwned"}).status_code == 404
    dataset.refresh_from_db()
    assert dataset.name == "Refunds"


@pytest.mark.django_db
def test_a_dataset_of_another_agent_is_404_under_this_agent(client_alice, dataset, team):
    from tests.factories import AgentFactory

    other = AgentFactory(team=team)
    url = reverse("datasets:rename", args=[other.pk, dataset.pk])

    assert client_alice.get(url).status_code == 404


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, dataset):
    assert client.post(_url(dataset), {"name": "x"}).status_code == 302


@pytest.mark.django_db
def test_put_is_not_allowed(client_alice, dataset):
    assert client_alice.put(_url(dataset)).status_code == 405
    assert client_alice.post(reverse("datasets:row", args=[dataset.agent_id, dataset.pk])).status_code == 405
