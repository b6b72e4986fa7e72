"""Panels that lag (issue 34, item 5): what the open run page shows when the run finishes under
it. The live poll's first response after the run is over carries the final charts and the
"run-finished" event, on which the Human review panel reloads and a "Stop this run?" dialog
closes; the "Cards appear in case order" spinner goes; a stopped run's review figures count the
results that ran. tests/e2e/test_run_finish_panels.py watches the same in Chromium."""

import pytest
from django.urls import reverse

from runs.models import Result, Run
from tests.runs.review_helpers import CaseSpec, build_run, finish_case

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(agent):
    """Three cases, none finished yet, on a page that was opened while it ran."""
    return build_run(agent=agent, cases=[CaseSpec(repeats=[("pending", None)])] * 3, status=Run.Status.RUNNING)


def _poll(client, run, tab=""):
    params = {"seen": "", **({"tab": tab} if tab else {})}
    return client.get(reverse("runs:detail", args=[run.agent_id, run.pk]), params, HTTP_HX_REQUEST="true")


def _finish(run, status=Run.Status.COMPLETED):
    Run.objects.filter(pk=run.pk).update(status=status, summary_note="")
    run.refresh_from_db()


def test_the_page_opened_while_running_has_what_must_go_when_it_finishes(client_alice, running):
    url = reverse("runs:detail", args=[running.agent_id, running.pk])
    page = client_alice.get(url).content.decode()
    review = client_alice.get(url, {"tab": "review"}).content.decode()

    assert 'id="results-live-note"' in page or "No case has finished yet" in page
    assert "run-finished from:body" in review  # the Human review panel reloads on it
    assert 'id="stop-dialog"' in page


def test_the_poll_that_sees_the_run_over_carries_the_charts_and_the_event(client_alice, running):
    assert "HX-Trigger" not in _poll(client_alice, running)  # still running

    for position in range(3):
        finish_case(running, position, Result.Status.PASS, 9.0)
    _finish(running)
    response = _poll(client_alice, running)

    assert response["HX-Trigger"] == "run-finished"
    html = response.content.decode()
    assert '<p id="results-live-note" hx-swap-oob="delete">' in html
    # On the charts tab, the same poll brings the final charts.
    charts = _poll(client_alice, running, tab="charts").content.decode()
    assert 'id="run-charts"' in charts and 'hx-swap-oob="true"' in charts


def test_a_stopped_run_brings_its_charts_in_the_same_response_as_its_header(client_alice, running):
    finish_case(running, 0, Result.Status.PASS, 9.0)
    _poll(client_alice, running)  # the page has seen case 0 already: nothing fresh after the stop
    Run.objects.filter(pk=running.pk).update(status=Run.Status.STOPPED, summary_note="Writing the summary…")
    running.refresh_from_db()

    html = _poll(client_alice, running, tab="charts").content.decode()

    assert 'id="run-charts"' in html  # not 10 s later, with the summary


def test_the_review_panel_counts_only_the_results_that_ran(client_alice, agent):
    cases = [CaseSpec(repeats=[("pass", 9.0)])] * 2 + [CaseSpec(repeats=[("fail", 3.0)])]
    cases += [CaseSpec(repeats=[("pending", None)])] * 5
    run = build_run(agent=agent, cases=cases, status=Run.Status.STOPPED)
    Run.objects.filter(pk=run.pk).update(stop_reason="budget reached")

    html = client_alice.get(reverse("reviews:run_figures", args=[agent.pk, run.pk])).content.decode()

    assert "Judge <strong>2/3</strong> passed" in html and "5 not run" in html
