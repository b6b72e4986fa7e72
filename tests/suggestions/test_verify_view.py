"""Verify: re-run the run's snapshot against the new version, and compare with the original."""

import pytest
from django.urls import reverse

from runs.models import Result, Run
from suggestions.services import suggestion_apply
from tests.suggestions.conftest import suggestion

HTMX = {"HX-Request": "true"}


def _url(run):
    return reverse("suggestions:verify", args=[run.agent_id, run.pk])


@pytest.fixture
def applied(alice, failing_run):
    """Version 2, made from a suggestion of the failing run."""
    item = suggestion(failing_run, 0)
    return suggestion_apply(run=failing_run, user=alice, suggestions=[item], fields={"knowledge": "Phone: 555 0100."})


@pytest.mark.django_db
def test_verify_all_creates_a_child_run_of_every_case_on_the_new_version(client_alice, alice, failing_run, applied):
    response = client_alice.post(
        _url(failing_run), {"version": applied.pk, "scope": "all", "request_key": "k1"}, headers=HTMX
    )

    assert response.status_code == 200
    child = Run.objects.get(parent=failing_run)
    assert child.purpose == Run.Purpose.VERIFY
    assert child.agent_version == applied and child.created_by == alice
    assert child.scoring == failing_run.scoring and child.dataset_name == failing_run.dataset_name
    assert list(child.cases.values_list("question", "expected_answer")) == list(
        failing_run.cases.values_list("question", "expected_answer")
    )
    assert child.total == 4
    html = response.content.decode()
    assert f"Run #{child.pk}" in html and 'hx-trigger="every 3s"' in html  # the panel follows the verify run
    assert "Verifying version 2 on 4 cases" in response["HX-Trigger"]


@pytest.mark.django_db
def test_the_cheaper_verify_takes_the_failing_cases_and_a_sample_of_passing_ones(client_alice, failing_run, applied):
    client_alice.post(_url(failing_run), {"version": applied.pk, "scope": "sample", "sample": "1"}, headers=HTMX)

    child = Run.objects.get(parent=failing_run)
    questions = list(child.cases.values_list("question", flat=True))
    assert len(questions) == 3
    assert {"Question 1?", "Question 3?"} <= set(questions)  # both failing cases
    assert len({"Question 0?", "Question 2?"} & set(questions)) == 1  # one of the passing ones


@pytest.mark.django_db
def test_a_double_click_starts_one_verify_run(client_alice, failing_run, applied):
    data = {"version": applied.pk, "scope": "all", "request_key": "same-key"}
    client_alice.post(_url(failing_run), data, headers=HTMX)
    client_alice.post(_url(failing_run), data, headers=HTMX)

    assert Run.objects.filter(parent=failing_run).count() == 1


@pytest.mark.django_db
def test_without_htmx_it_redirects_to_the_run_page(client_alice, failing_run, applied):
    response = client_alice.post(_url(failing_run), {"version": applied.pk, "scope": "all"})

    assert response.status_code == 302
    assert response["Location"].endswith(f"/runs/{failing_run.pk}/?tab=suggestions#suggestions")
    assert Run.objects.filter(parent=failing_run).exists()


@pytest.mark.django_db
def test_an_active_run_cannot_be_verified_against(client_alice, make_run, agent):
    run = make_run([("fail", "Fact.", "No.", 1)], status=Run.Status.RUNNING)

    response = client_alice.post(_url(run), {"version": agent.current_version_id, "scope": "all"}, headers=HTMX)

    assert "Wait for the run to finish" in response["HX-Trigger"]
    assert not Run.objects.filter(parent=run).exists()


@pytest.mark.django_db
def test_a_version_of_another_agent_is_refused(client_alice, team, failing_run):
    from tests.factories import AgentFactory

    other = AgentFactory(team=team)

    response = client_alice.post(_url(failing_run), {"version": other.current_version_id, "scope": "all"}, headers=HTMX)

    assert "toast" in response["HX-Trigger"] and "error" in response["HX-Trigger"]
    assert not Run.objects.filter(parent=failing_run).exists()


@pytest.mark.django_db
def test_the_panel_compares_the_finished_verify_run_with_the_original(client_alice, failing_run, applied, make_run):
    # The verify run as the engine leaves it: case 1 fixed, case 2 regressed, case 3 still failing.
    child = make_run(
        [("pass", "", "", 9), ("pass", "", "", 8), ("fail", "", "", 3), ("fail", "", "", 2)],
        parent=failing_run,
        purpose=Run.Purpose.VERIFY,
    )
    for parent_case, child_case in zip(failing_run.cases.all(), child.cases.all(), strict=True):
        child_case.question, child_case.expected_answer = parent_case.question, parent_case.expected_answer
        child_case.save()
    Run.objects.filter(pk=child.pk).update(agent_version=applied)

    html = client_alice.get(
        reverse("suggestions:panel", args=[failing_run.agent_id, failing_run.pk]), headers=HTMX
    ).content.decode()

    assert f"Run #{child.pk}" in html and "all 4 cases" in html
    assert "was 2" in html  # passed before, on the same cases
    fixed = html.split("Fixed:")[1].split("</div>")[0]
    regressed = html.split("Regressed:")[1].split("</div>")[0]
    assert f"/runs/{child.pk}/#case-1" in fixed and ">#2<" in fixed
    assert f"/runs/{child.pk}/#case-2" in regressed and ">#3<" in regressed
    compare = reverse("runs:compare", args=[failing_run.agent_id]) + f"?a={failing_run.pk}&amp;b={child.pk}"
    assert f'href="{compare}">Compare runs</a>' in html


@pytest.mark.django_db
def test_the_verify_run_page_says_what_it_verifies(client_alice, failing_run, applied, make_run):
    child = make_run([("pass", "", "", 9)], parent=failing_run, purpose=Run.Purpose.VERIFY)
    Result.objects.filter(run=child).update(status=Result.Status.PASS)

    html = client_alice.get(
        reverse("suggestions:panel", args=[child.agent_id, child.pk]), headers=HTMX
    ).content.decode()

    assert "This run verifies version" in html
    assert f'href="/agents/{failing_run.agent_id}/runs/{failing_run.pk}/?tab=suggestions#suggestions"' in html


@pytest.mark.django_db
def test_it_only_answers_post(client_alice, failing_run):
    assert client_alice.get(_url(failing_run)).status_code == 405


@pytest.mark.django_db
def test_outsiders_get_404(client_charlie, failing_run, applied):
    response = client_charlie.post(_url(failing_run), {"version": applied.pk, "scope": "all"}, headers=HTMX)
    assert response.status_code == 404
    assert not Run.objects.filter(parent=failing_run).exists()


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_login(client, failing_run):
    response = client.post(_url(failing_run))
    assert response.status_code == 302 and response["Location"].startswith(reverse("accounts:login"))
