"""The dataset page's extraction status box: polls while Extracting, 286 once settled."""

import pytest
from django.urls import reverse

from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db


def status_url(dataset) -> str:
    return reverse("datasets:status", args=[dataset.agent_id, dataset.pk])


def test_extracting_dataset_keeps_polling(client_alice, agent):
    dataset = DatasetFactory(agent=agent, status="extracting", source="upload", source_name="plan.xlsx")

    response = client_alice.get(status_url(dataset), HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'hx-trigger="every 3s"' in html and f'hx-get="{status_url(dataset)}"' in html
    assert "Extracting test cases from “plan.xlsx”" in html and "spinner" in html
    assert "HX-Refresh" not in response


def test_ready_dataset_stops_polling_with_286_and_refreshes_the_page(client_alice, agent):
    dataset = DatasetFactory(agent=agent, status="ready", notice="The document has 612 test cases; the limit is 500.")

    response = client_alice.get(status_url(dataset), HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 286
    assert "hx-trigger" not in html and "hx-get" not in html
    assert "612 test cases" in html
    assert response["HX-Refresh"] == "true"


def test_failed_dataset_shows_the_reason_and_what_to_do(client_alice, agent):
    dataset = DatasetFactory(
        agent=agent, status="failed", source="upload", failure_reason="The PDF is encrypted (password-protected)."
    )

    response = client_alice.get(status_url(dataset), HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 286 and "hx-trigger" not in html
    assert "The PDF is encrypted (password-protected)." in html
    assert reverse("datasets:new", args=[agent.pk]) in html  # upload it again


def test_reasons_and_notices_are_escaped(client_alice, agent):
    dataset = DatasetFactory(
        agent=agent, status="failed", failure_reason='<img src=x onerror=alert(1)> hx-get="/logout/"'
    )

    html = client_alice.get(status_url(dataset)).content.decode()

    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_without_htmx_the_status_renders_without_a_refresh(client_alice, agent):
    dataset = DatasetFactory(agent=agent, status="ready")

    response = client_alice.get(status_url(dataset))

    assert response.status_code == 286
    assert "HX-Refresh" not in response


def test_status_is_404_for_outsiders_405_for_post_and_redirects_anonymous_users(
    client_charlie, client_alice, client, agent
):
    dataset = DatasetFactory(agent=agent, status="extracting")

    assert client_charlie.get(status_url(dataset)).status_code == 404
    assert client_alice.post(status_url(dataset)).status_code == 405
    response = client.get(status_url(dataset))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_dataset_page_includes_the_polling_status(client_alice, agent):
    dataset = DatasetFactory(agent=agent, status="extracting", source="upload", source_name="plan.xlsx")

    html = client_alice.get(reverse("datasets:detail", args=[agent.pk, dataset.pk])).content.decode()

    assert 'id="dataset-status"' in html and 'hx-trigger="every 3s"' in html
