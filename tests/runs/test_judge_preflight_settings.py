"""Settings → Model → Judge preflight: the console's judge checked on the calibration set on
demand, as a job the panel polls, and what it did shown with its cost and model."""

import pytest
from django.urls import reverse

from runs.judging import configs as judging
from runs.services.preflight import judge_config_preflight
from tests.runs.preflight_helpers import fit_judge

pytestmark = pytest.mark.django_db
PANEL = reverse("judge_preflight:panel")
START = reverse("judge_preflight:start")
HTMX = {"HX-Request": "true"}


def test_the_settings_page_loads_the_panel(client_alice, fake_llm):
    text = client_alice.get(reverse("accounts:settings")).text
    assert f'hx-get="{PANEL}" hx-trigger="load"' in text


def test_an_unchecked_judge_offers_the_preflight(client_alice, fake_llm):
    response = client_alice.get(PANEL, headers=HTMX)
    assert response.status_code == 286  # nothing running: no polling
    assert "Not preflighted yet." in response.text and "Preflight the judge" in response.text
    assert "<html" not in response.text


def test_preflight_the_judge_starts_a_job_the_panel_polls(
    client_alice, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    fit_judge(fake_llm)
    with django_capture_on_commit_callbacks(execute=True):
        started = client_alice.post(START, headers=HTMX)
        assert fake_llm.count() == 0, "the request called the judge: it must only queue the preflight"
    assert started.status_code == 200 and 'hx-trigger="every 3s"' in started.text
    config = judging.console_judge_config()
    assert tasks_run_here == [("runs.tasks.judge_config_preflight", (config.pk, True), {})]
    done = client_alice.get(PANEL, headers=HTMX)
    assert done.status_code == 286 and "Passed" in done.text


def test_the_panel_shows_a_passed_preflight_with_its_cost_and_model(client_alice, fake_llm):
    fit_judge(fake_llm)
    judge_config_preflight(config=judging.console_judge_config())

    text = client_alice.get(PANEL, headers=HTMX).text

    assert "Passed: the judge put every answer in its place." in text
    assert "15 of 15 answers in place" in text and "cost $0" in text and "openai/fake-judge" in text


def test_the_panel_shows_what_a_failed_judge_did(client_alice, fake_llm):
    judge_config_preflight(config=judging.console_judge_config())

    text = client_alice.get(PANEL, headers=HTMX).text

    assert "Failed: its scores cannot be trusted." in text
    assert "It gave every answer the same score (8)" in text
    assert text.count('<li class="preflight-item') == 15


def test_without_a_judge_model_there_is_nothing_to_preflight(client_alice, no_llm):
    text = client_alice.get(PANEL, headers=HTMX).text
    assert "needs no preflight" in text and "Preflight the judge" not in text


def test_without_javascript_it_is_a_page(client_alice, fake_llm):
    assert "<html" in client_alice.get(PANEL).text
    assert client_alice.post(START).status_code == 302


def test_it_needs_a_signed_in_user_and_the_right_method(client, client_alice, fake_llm):
    assert client.get(PANEL).status_code == 302
    assert client_alice.get(START).status_code == 405
    assert client_alice.post(PANEL).status_code == 405
