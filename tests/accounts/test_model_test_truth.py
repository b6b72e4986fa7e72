"""Test connection tells the truth (issue 33, item 5): an empty answer fails, an answer that
ignores the instruction or JSON off its schema is a warning with what came back, and the
section names the URL it tried and the model the server said it runs."""

import pytest
from django.urls import reverse

from evalsite.llm.probe import model_test_all
from tests.accounts.test_model_test import answers_as_asked

pytestmark = pytest.mark.django_db
SETTINGS = reverse("accounts:settings")


def _chat_only(settings):
    settings.EVALSITE_EMBEDDING_MODEL = ""
    settings.EVALSITE_JUDGE_MODEL = ""  # the agent model judges too: one model to test


def test_an_empty_answer_fails_the_test(client_alice, fake_llm, settings):
    _chat_only(settings)
    fake_llm.add_rule(task="probe", reply="")

    [report] = model_test_all()

    assert not report.ok
    assert "The model answered nothing" in report.error and fake_llm.url in report.error
    text = client_alice.get(SETTINGS).text
    assert "Connection failed" in text and ">Connected<" not in text
    assert "The model answered nothing" in text


def test_an_answer_that_ignores_the_instruction_is_a_warning_with_the_answer(client_alice, fake_llm, settings):
    _chat_only(settings)
    fake_llm.add_rule(task="probe", reply="This is a very detailed and accurate answer.")

    [report] = model_test_all()

    assert report.ok
    assert any("it answered “This is a very detailed and accurate answer.”" in w for w in report.warnings)
    text = client_alice.get(SETTINGS).text
    assert "Needs attention" in text and "Answered, not as asked" in text
    assert ">Connected<" not in text


def test_json_that_does_not_follow_the_schema_is_a_warning(client_alice, fake_llm, settings):
    _chat_only(settings)

    def answer(request):  # type: ignore[no-untyped-def]
        asked_json = request.get("response_format") or request.get("extra_body")
        return {"json": {"answer": "<the word OK>"}} if asked_json else {"reply": "OK"}

    fake_llm.add_rule(task="probe", handler=answer)

    [report] = model_test_all()

    assert report.ok and report.json_schema is False
    assert any("Asked for JSON following a schema" in w and "<the word OK>" in w for w in report.warnings)
    assert "Needs attention" in client_alice.get(SETTINGS).text


def test_it_names_the_url_it_tried_and_the_model_the_server_reports(client_alice, fake_llm, settings):
    _chat_only(settings)
    answers_as_asked(fake_llm)
    fake_llm.set_model_identity(
        "fake-agent", reported="SmolLM2-135M-Instruct-Q8_0.gguf", system_fingerprint="b4567", meta={"n_ctx_train": 8192}
    )

    [report] = model_test_all()

    assert report.ok and report.warnings == []
    assert report.url == f"{fake_llm.url}/chat/completions"
    assert report.identity == "SmolLM2-135M-Instruct-Q8_0.gguf · system fingerprint b4567 · n_ctx_train 8192"
    text = client_alice.get(SETTINGS).text
    assert ">Connected<" in text
    assert f"{fake_llm.url}/chat/completions" in text and "SmolLM2-135M-Instruct-Q8_0.gguf" in text


def test_a_server_that_is_down_is_named(fake_llm, settings):
    _chat_only(settings)
    settings.EVALSITE_LLM_API_BASE = "http://127.0.0.1:9/v1"

    [report] = model_test_all()

    assert not report.ok and "tried http://127.0.0.1:9/v1/chat/completions" in report.error
