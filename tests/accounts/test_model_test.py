"""Settings → Model → Test connection: short calls to each configured model, made by a job
(the request only queues it), and shown as found by the Model section's poll."""

import pytest
from django.urls import reverse

from evalsite.llm.probe import model_test_running

URL = reverse("accounts:model_test")
STATUS = reverse("accounts:model_test_status")
SETTINGS = reverse("accounts:settings")
HTMX = {"HX-Request": "true"}


@pytest.fixture
def test_runs(django_capture_on_commit_callbacks, tasks_run_here):
    """post(...): Test connection as a browser posts it, then its job run as a worker would,
    and the section the poll gets afterwards."""

    def post(client, fake_llm):  # type: ignore[no-untyped-def]
        with django_capture_on_commit_callbacks(execute=True):
            started = client.post(URL, headers=HTMX)
            assert fake_llm.count() == 0, "the request called the model: it must only queue the test"
        assert started.status_code == 200 and 'hx-trigger="every 3s"' in started.text
        assert tasks_run_here == [("evalsite.tasks.model_test", (), {})]
        return client.get(STATUS, headers=HTMX)

    return post


def answers_as_asked(fake_llm):
    """The probe's plain call gets "OK", its JSON call {"answer": "OK"}, as a fit model answers."""

    def answer(request):  # type: ignore[no-untyped-def]
        asked_json = request.get("response_format") or request.get("extra_body")
        return {"json": {"answer": "OK"}} if asked_json else {"reply": "OK"}

    fake_llm.add_rule(task="probe", handler=answer)


def test_a_configured_model_is_not_called_connected_before_a_test(client_alice, fake_llm):
    text = client_alice.get(SETTINGS).text

    assert "Not tested" in text
    assert ">Connected<" not in text
    assert fake_llm.count() == 0


def test_the_test_calls_each_model_and_shows_what_it_found(client_alice, fake_llm, test_runs):
    fake_llm.add_rule(
        task="probe", contains="get_time", tool_calls=[{"name": "get_time", "arguments": {"city": "Paris"}}]
    )
    answers_as_asked(fake_llm)

    response = test_runs(client_alice, fake_llm)

    assert response.status_code == 286  # done: the section stops polling
    text = response.text
    assert 'hx-trigger="every' not in text  # no polling (the judge preflight panel loads once)
    assert "<html" not in text and 'id="model"' in text  # the section alone
    assert ">Connected<" in text
    assert "tokens/s" in text and " ms" in text
    assert "JSON: yes, JSON schema (response_format json_schema)" in text
    assert "Tools: yes" in text
    assert "Embeddings: yes (16 dimensions)" in text
    # agent model (reply, JSON, tools), judge (the same three), embedding model
    assert fake_llm.count(task="probe") == 7
    assert {r.model for r in fake_llm.requests} == {"fake-agent", "fake-judge", "fake-embed"}
    # The last test is what the page shows afterwards, too.
    assert ">Connected<" in client_alice.get(SETTINGS).text


def test_a_llama_cpp_server_shows_its_schema_dialect_ignored_tools_and_the_embedding_refusal(
    client_alice, fake_llm, test_runs
):
    fake_llm.set_server("llama.cpp")
    answers_as_asked(fake_llm)

    text = test_runs(client_alice, fake_llm).text

    assert "Needs attention" in text  # agents answer; the embedding model does not
    assert "JSON: yes, JSON schema (llama.cpp json_object + schema)" in text
    assert "Tools: <strong>no</strong>" in text
    assert "server error (500): Llama model must be created with embedding=True" in text


def test_a_server_that_is_down_fails_the_test_with_the_reason(client_alice, fake_llm, settings, test_runs):
    settings.EVALSITE_LLM_API_BASE = "http://127.0.0.1:9/v1"

    text = test_runs(client_alice, fake_llm).text

    assert "Connection failed" in text
    assert "Could not connect to the model provider." in text
    assert ">Connected<" not in text


def test_a_changed_model_name_is_untested_again(client_alice, fake_llm, settings, test_runs):
    test_runs(client_alice, fake_llm)
    settings.EVALSITE_LLM_MODEL = "openai/another-model"

    assert "Not tested" in client_alice.get(SETTINGS).text


def test_without_javascript_it_redirects_back_to_the_model_section(client_alice, fake_llm):
    response = client_alice.post(URL)

    assert response.status_code == 302
    assert response["Location"] == f"{SETTINGS}#model"
    assert "Testing each model in the background" in client_alice.get(SETTINGS).text


def test_while_the_test_runs_the_section_polls_and_a_second_click_queues_nothing(
    client_alice, fake_llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        client_alice.post(URL, headers=HTMX)
        again = client_alice.post(URL, headers=HTMX)

    assert len(callbacks) == 1  # one job
    assert model_test_running()
    poll = client_alice.get(STATUS, headers=HTMX)
    assert poll.status_code == 200 and 'hx-trigger="every 3s"' in poll.text
    assert "Testing…" in again.text and "disabled" in again.text
    assert fake_llm.count() == 0


def test_a_test_whose_worker_died_stops_saying_testing(client_alice, fake_llm, django_capture_on_commit_callbacks):
    import time_machine
    from django.utils import timezone

    with django_capture_on_commit_callbacks():
        client_alice.post(URL, headers=HTMX)  # the job never runs

    # The marker expires once the calls would all have timed out (a locmem cache here, Redis in production).
    with time_machine.travel(timezone.now() + timezone.timedelta(minutes=10), tick=False):
        assert not model_test_running()
        poll = client_alice.get(STATUS, headers=HTMX)
    assert poll.status_code == 286 and "Test connection" in poll.text


def test_the_status_poll_is_a_fragment_only(client_alice, fake_llm):
    response = client_alice.get(STATUS)

    assert response.status_code == 302 and response["Location"] == f"{SETTINGS}#model"


def test_it_only_accepts_post_from_a_signed_in_user(client, client_alice, fake_llm):
    assert client_alice.get(URL).status_code == 405
    assert client.post(URL).status_code == 302  # to the sign-in page
    assert fake_llm.count() == 0


@pytest.mark.django_db
def test_without_a_model_nothing_is_called(client_alice, no_llm, fake_llm_server):
    fake_llm_server.reset()

    text = client_alice.post(URL, headers=HTMX).text

    assert "No model configured" in text
    assert not model_test_running()
    assert fake_llm_server.count() == 0
