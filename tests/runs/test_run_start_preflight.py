"""Starting a run with a model judge (issue 33, item 1): a judge never preflighted is checked
first, and one that failed its preflight does not start silently: the start is refused unless
the user starts anyway, and then the run is marked judge_failed_preflight."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from accounts.services import api_token_create
from agents.models import Agent
from runs import services
from runs.judging import configs as judging
from runs.judging.preflight import calibration_items
from runs.models import Run
from runs.services.preflight import judge_config_preflight
from tests.runs.preflight_helpers import fit_judge

pytestmark = pytest.mark.django_db
ITEMS = len(calibration_items())


@pytest.fixture
def dataset(make_dataset, agent, fake_llm):
    return make_dataset(2, agent=agent, kind=Agent.Kind.LLM)


@pytest.fixture
def failed(dataset, fake_llm):
    """The dataset's judge, preflighted and failed (the fake judge scores everything 8)."""
    return judge_config_preflight(config=judging.dataset_judge_config(dataset=dataset))


@pytest.fixture
def passed(dataset, fake_llm):
    fit_judge(fake_llm)
    config = judge_config_preflight(config=judging.dataset_judge_config(dataset=dataset))
    fake_llm.clear_rules()
    return config


def _start(dataset, **options):
    return services.run_start(agent=dataset.agent, dataset=dataset, user=None, **options)


# ---- the service ---------------------------------------------------------------------------------


def test_a_judge_never_preflighted_is_refused_when_the_caller_requires_it(dataset):
    with pytest.raises(ValidationError) as refused:
        _start(dataset, preflight=services.PREFLIGHT_REQUIRE)
    assert refused.value.code == services.JUDGE_NOT_PREFLIGHTED
    assert "has not been preflighted yet" in refused.value.messages[0]
    assert not Run.objects.exists()


def test_a_judge_never_preflighted_is_preflighted_first_when_asked(dataset, fake_llm):
    fit_judge(fake_llm)

    run = _start(dataset, preflight=services.PREFLIGHT_RUN)

    assert run.judge_config.preflight_status == "passed"
    assert not run.judge_failed_preflight
    assert fake_llm.count(task="judge", preflight=run.judge_config.pk) == ITEMS


def test_a_judge_that_failed_is_refused_with_its_reasons(dataset, failed):
    with pytest.raises(ValidationError) as refused:
        _start(dataset)
    assert refused.value.code == services.JUDGE_FAILED_PREFLIGHT
    assert "failed its preflight" in refused.value.messages[0] and "same score" in refused.value.messages[0]
    assert not Run.objects.exists()


def test_a_run_started_anyway_is_marked(dataset, failed):
    run = _start(dataset, allow_failed_preflight=True)

    assert run.judge_config == failed
    assert Run.objects.get(pk=run.pk).judge_failed_preflight


def test_a_rerun_of_a_marked_run_is_marked_too(dataset, failed):
    from tests.runs.conftest import drive

    run = drive(_start(dataset, allow_failed_preflight=True))
    child = services.run_rerun(run=run, user=None, positions=[0])

    assert child.judge_failed_preflight


def test_a_judge_that_passed_starts_unmarked(dataset, passed):
    run = _start(dataset, preflight=services.PREFLIGHT_REQUIRE)
    assert run.judge_config == passed and not run.judge_failed_preflight


def test_the_offline_scorer_starts_without_a_preflight(make_dataset, agent, no_llm):
    dataset = make_dataset(1, agent=agent)
    run = _start(dataset, preflight=services.PREFLIGHT_REQUIRE)
    assert run.scorer == Run.Scorer.OFFLINE and not run.judge_failed_preflight


# ---- the start dialog ----------------------------------------------------------------------------


def _dialog(client, dataset):
    return client.get(reverse("runs:start_dialog", args=[dataset.agent_id, dataset.pk]), HTTP_HX_REQUEST="true")


def _post(client, dataset, **data):
    url = reverse("runs:start", args=[dataset.agent_id, dataset.pk])
    return client.post(url, {"request_key": "", **data}, HTTP_HX_REQUEST="true")


def test_the_dialog_starts_the_preflight_and_polls_it(client_alice, dataset, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = _dialog(client_alice, dataset)
    html = response.content.decode()
    assert len(callbacks) == 1  # the preflight job
    assert "Checking the judge on its calibration set" in html
    assert (
        'hx-trigger="every 2s"' in html and reverse("runs:start_preflight", args=[dataset.agent_id, dataset.pk]) in html
    )


def test_the_poll_stops_when_the_preflight_is_done(client_alice, dataset, failed):
    url = reverse("runs:start_preflight", args=[dataset.agent_id, dataset.pk])
    response = client_alice.get(url, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 286
    assert "hx-trigger" not in html
    assert "The judge failed its preflight" in html and 'name="allow_failed_preflight"' in html


def test_the_dialog_shows_what_a_failed_judge_did_on_each_item(client_alice, dataset, failed):
    html = _dialog(client_alice, dataset).content.decode()
    assert "The judge failed its preflight" in html
    assert html.count('<li class="preflight-item') == ITEMS
    assert "<strong>Q1</strong>" in html and "A wrong answer" in html and "at or above the pass threshold 7" in html
    assert "Start anyway" in html


def test_the_dialog_shows_a_passed_judge_with_its_cost_and_no_start_anyway(client_alice, dataset, passed):
    html = _dialog(client_alice, dataset).content.decode()
    assert "The judge passed its preflight" in html
    assert "15 of 15 answers in place" in html and "cost $0" in html
    assert 'name="allow_failed_preflight"' not in html
    assert "{#" not in html and "{%" not in html  # no template comment shown as text


def test_start_without_ticking_start_anyway_is_refused_in_the_dialog(client_alice, dataset, failed):
    response = _post(client_alice, dataset)
    html = response.content.decode()
    assert response.status_code == 200
    assert "failed its preflight on the calibration set" in html and 'id="start-errors"' in html
    assert not Run.objects.exists()


def test_start_anyway_from_the_dialog_starts_a_marked_run(client_alice, dataset, failed):
    response = _post(client_alice, dataset, allow_failed_preflight="on")
    run = Run.objects.get()
    assert response.headers["HX-Redirect"] == reverse("runs:detail", args=[dataset.agent_id, run.pk])
    assert run.judge_failed_preflight


def test_start_while_the_preflight_runs_asks_to_wait(client_alice, dataset):
    html = _post(client_alice, dataset).content.decode()
    assert "has not been preflighted yet" in html
    assert not Run.objects.exists()


def test_the_preflight_poll_is_the_teams_only(client_charlie, dataset):
    url = reverse("runs:start_preflight", args=[dataset.agent_id, dataset.pk])
    assert client_charlie.get(url, HTTP_HX_REQUEST="true").status_code == 404


# ---- the API -------------------------------------------------------------------------------------


@pytest.fixture
def auth(alice):
    _, raw = api_token_create(user=alice, name="ci")
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def _api_start(client, auth, dataset, **payload):
    url = f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/runs"
    return client.post(url, payload, content_type="application/json", **auth)


def test_the_api_answers_409_and_starts_the_preflight(client, auth, dataset, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = _api_start(client, auth, dataset)
    body = response.json()
    assert response.status_code == 409
    assert body["code"] == "judge_not_preflighted" and body["retry_after"] == 30
    assert len(callbacks) == 1
    assert not Run.objects.exists()


def test_the_api_refuses_a_failed_judge_with_what_it_did(client, auth, dataset, failed):
    response = _api_start(client, auth, dataset)
    body = response.json()
    assert response.status_code == 409
    assert body["code"] == "judge_failed_preflight" and body["retry_after"] is None
    assert body["preflight"]["status"] == "failed" and len(body["preflight"]["items"]) == ITEMS


def test_the_api_starts_anyway_when_allowed_and_marks_the_run(client, auth, dataset, failed):
    response = _api_start(client, auth, dataset, allow_failed_preflight=True)
    assert response.status_code == 201
    assert Run.objects.get(pk=response.json()["id"]).judge_failed_preflight
    assert response.json()["judge"]["preflight_status"] == "failed"


# ---- evalrun ---------------------------------------------------------------------------------------


def _evalrun(dataset, *options):
    from django.core.management import call_command

    call_command("evalrun", "--agent", str(dataset.agent.pk), "--dataset", str(dataset.pk), *options)  # no --wait
    return Run.objects.get(dataset=dataset)


def test_evalrun_preflights_a_new_judge_before_it_starts(dataset, fake_llm):
    fit_judge(fake_llm)
    run = _evalrun(dataset)
    assert run.judge_config.preflight_status == "passed"
    assert fake_llm.count(task="judge", preflight=run.judge_config.pk) == ITEMS


def test_evalrun_with_no_preflight_asks_the_judge_nothing_before_the_run(dataset, fake_llm):
    run = _evalrun(dataset, "--no-preflight")
    assert run.judge_config.preflight_status == ""
    assert fake_llm.count(task="judge") == 0  # not started by a worker here: no case judged either
