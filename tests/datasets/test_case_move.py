"""Reorder test cases (datasets:case_move)."""

import pytest
from django.urls import reverse

from datasets.models import TestCase
from tests.factories import DatasetFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(agent):
    dataset = DatasetFactory(agent=agent)
    # Gaps and ties on purpose: moves renumber them away.
    TestCase.objects.bulk_create(
        [
            TestCase(dataset=dataset, position=0, question="A"),
            TestCase(dataset=dataset, position=5, question="B"),
            TestCase(dataset=dataset, position=5, question="C"),
            TestCase(dataset=dataset, position=9, question="D"),
        ]
    )
    return dataset


def _order(dataset) -> list[str]:
    return list(dataset.cases.order_by("position", "id").values_list("question", flat=True))


def _move(client, dataset, question: str, direction: str, **extra):
    case = dataset.cases.get(question=question)
    url = reverse("datasets:case_move", args=[dataset.agent_id, dataset.pk, case.pk])
    return client.post(url, {"direction": direction}, **extra)


@pytest.mark.django_db
def test_up_and_down_swap_neighbours(client_alice, dataset):
    _move(client_alice, dataset, "C", "up", **HTMX)
    assert _order(dataset) == ["A", "C", "B", "D"]

    _move(client_alice, dataset, "A", "down", **HTMX)
    assert _order(dataset) == ["C", "A", "B", "D"]
    assert list(dataset.cases.order_by("position").values_list("position", flat=True)) == [0, 1, 2, 3]


@pytest.mark.django_db
def test_top_bottom_and_the_ends_are_clamped(client_alice, dataset):
    _move(client_alice, dataset, "D", "top", **HTMX)
    _move(client_alice, dataset, "B", "bottom", **HTMX)
    _move(client_alice, dataset, "D", "up", **HTMX)

    assert _order(dataset) == ["D", "A", "C", "B"]


@pytest.mark.django_db
def test_htmx_move_returns_the_list_with_focus_kept_on_the_button(client_alice, dataset):
    response = _move(client_alice, dataset, "B", "up", **HTMX)

    html = response.content.decode()
    moved = dataset.cases.get(question="B")
    assert '<div id="case-list"' in html
    assert f'class="case-item case-moved" id="case-{moved.pk}"' in html
    assert 'value="up" aria-label="Move test case 1 up"\n                disabled' in html  # first row
    assert "autofocus" in html


@pytest.mark.django_db
def test_unknown_direction_is_a_bad_request(client_alice, dataset):
    assert _move(client_alice, dataset, "A", "sideways").status_code == 400
    assert _order(dataset) == ["A", "B", "C", "D"]


@pytest.mark.django_db
def test_plain_form_redirects_to_the_page_the_case_landed_on(client_alice, dataset):
    response = _move(client_alice, dataset, "A", "bottom")

    assert response.status_code == 302
    assert response["Location"].endswith("?page=1")


@pytest.mark.django_db
def test_outsider_gets_404_and_moves_nothing(client_charlie, dataset):
    assert _move(client_charlie, dataset, "D", "top").status_code == 404
    assert _order(dataset) == ["A", "B", "C", "D"]


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, dataset):
    assert _move(client, dataset, "D", "top").status_code == 302


@pytest.mark.django_db
def test_get_is_not_allowed(client_alice, dataset):
    case = dataset.cases.first()
    assert (
        client_alice.get(reverse("datasets:case_move", args=[dataset.agent_id, dataset.pk, case.pk])).status_code == 405
    )
