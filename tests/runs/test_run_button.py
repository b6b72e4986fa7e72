"""templates/datasets/partials/run_button.html, rendered by the dataset page."""

import pytest
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.urls import reverse

from runs.models import Run

pytestmark = pytest.mark.django_db


def _render(dataset, blocker=""):
    request = RequestFactory().get("/")
    context = {"agent": dataset.agent, "dataset": dataset, "run_blocker": blocker}
    return render_to_string("datasets/partials/run_button.html", context, request=request)


def test_it_posts_to_start_with_a_fresh_one_time_key(make_dataset):
    dataset = make_dataset(1)
    html = _render(dataset)
    url = reverse("runs:start", args=[dataset.agent_id, dataset.pk])
    assert f'action="{url}"' in html and f'hx-post="{url}"' in html
    assert 'name="request_key"' in html
    assert "disabled" not in html.replace("hx-disabled-elt", "")
    assert _render(dataset) != html  # each render has its own key


def test_it_is_disabled_with_the_reason(make_dataset):
    html = _render(make_dataset(0), blocker="Add at least one test case to run an evaluation.")
    assert "disabled" in html
    assert "Add at least one test case to run an evaluation." in html


def test_posting_the_rendered_form_twice_starts_one_run(make_dataset, agent, client_alice, no_llm):
    dataset = make_dataset(1, agent=agent)
    html = _render(dataset)
    key = html.split('name="request_key" value="')[1].split('"')[0]
    url = reverse("runs:start", args=[agent.pk, dataset.pk])
    client_alice.post(url, {"request_key": key})
    client_alice.post(url, {"request_key": key})
    assert Run.objects.count() == 1
