"""Settings → Model → Test connection: short calls to each configured model, shown as found."""

import pytest
from django.urls import reverse

URL = reverse("accounts:model_test")
SETTINGS = reverse("accounts:settings")


def test_a_configured_model_is_not_called_connected_before_a_test(client_alice, fake_llm):
    text = client_alice.get(SETTINGS).text

    assert "Not tested" in text
    assert ">Connected<" not in text
    assert fake_llm.count() == 0


def test_the_test_calls_each_model_and_shows_what_it_found(client_alice, fake_llm):
    fake_llm.add_rule(
        task="probe", contains="get_time", tool_calls=[{"name": "get_time", "arguments": {"city": "Paris"}}]
    )
    fake_llm.add_rule(task="probe", json={"answer": "OK"})

    response = client_alice.post(URL, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    text = response.text
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


def test_a_llama_cpp_server_shows_its_schema_dialect_ignored_tools_and_the_embedding_refusal(client_alice, fake_llm):
    fake_llm.set_server("llama.cpp")
    fake_llm.add_rule(task="probe", json={"answer": "OK"})

    text = client_alice.post(URL, HTTP_HX_REQUEST="true").text

    assert "Needs attention" in text  # agents answer; the embedding model does not
    assert "JSON: yes, JSON schema (llama.cpp json_object + schema)" in text
    assert "Tools: <strong>no</strong>" in text
    assert "server error (500): Llama model must be created with embedding=True" in text


def test_a_server_that_is_down_fails_the_test_with_the_reason(client_alice, fake_llm, settings):
    settings.EVALSITE_LLM_API_BASE = "http://127.0.0.1:9/v1"

    text = client_alice.post(URL, HTTP_HX_REQUEST="true").text

    assert "Connection failed" in text
    assert "Could not connect to the model provider." in text
    assert ">Connected<" not in text


def test_a_changed_model_name_is_untested_again(client_alice, fake_llm, settings):
    client_alice.post(URL)
    settings.EVALSITE_LLM_MODEL = "openai/another-model"

    assert "Not tested" in client_alice.get(SETTINGS).text


def test_without_javascript_it_redirects_back_to_the_model_section(client_alice, fake_llm):
    response = client_alice.post(URL)

    assert response.status_code == 302
    assert response["Location"] == f"{SETTINGS}#model"


def test_it_only_accepts_post_from_a_signed_in_user(client, client_alice, fake_llm):
    assert client_alice.get(URL).status_code == 405
    assert client.post(URL).status_code == 302  # to the sign-in page
    assert fake_llm.count() == 0


@pytest.mark.django_db
def test_without_a_model_nothing_is_called(client_alice, no_llm, fake_llm_server):
    fake_llm_server.reset()

    text = client_alice.post(URL, HTTP_HX_REQUEST="true").text

    assert "No model configured" in text
    assert fake_llm_server.count() == 0
