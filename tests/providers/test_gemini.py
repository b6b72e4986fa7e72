"""Google Gemini (`gemini/<model>`) through the gateway, against a server speaking Gemini's own API
(tests/providers/gemini_server.py), checked by Google's SDK types both ways."""

from __future__ import annotations

import re

import pytest

from evalsite import llm
from evalsite.llm.probe import model_test_all
from tests.providers.error_walk import walk_error_cards
from tests.providers.gemini_server import DENIED, MESSAGES, FakeGemini
from tests.providers.product_walk import (
    Provider,
    aim,
    walk_generation,
    walk_preflight_and_run,
    walk_scenario,
    walk_suggestions_and_rewrite,
    walk_test_connection,
)

GENERATE = ":generateContent"
QUOTA = MESSAGES[429].rstrip(".")  # Google's words, which the gateway quotes
CLASS_NAME = re.compile(r"[A-Z]\w*(Error|Exception)\b|litellm|openai\.|Traceback")
HELLO = [{"role": "user", "content": "What is the capital of France?"}]
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "reasoning": {"type": "string"},
    },
    "required": ["score", "reasoning"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def gemini_server():
    server = FakeGemini().start()
    yield server
    server.stop()


@pytest.fixture
def gemini(gemini_server, settings):
    """The Gemini server, reset, with every model of the gateway on it (the README's recipe)."""
    gemini_server.reset()
    settings.EVALSITE_LLM_MODEL = "gemini/gemini-2.5-flash"
    settings.EVALSITE_JUDGE_MODEL = "gemini/gemini-2.5-flash"
    settings.EVALSITE_EMBEDDING_MODEL = ""
    settings.EVALSITE_LLM_API_BASE = gemini_server.url
    settings.EVALSITE_LLM_API_KEY = "test-key"
    settings.EVALSITE_LLM_BACKOFF = 0.01
    settings.EVALSITE_LLM_TIMEOUT = 5.0
    settings.EVALSITE_LLM_TIMEOUTS = {}
    llm.forget_model_state()
    yield gemini_server
    assert gemini_server.invalid == []  # litellm sent nothing Google's types refuse
    gemini_server.reset()


# ---- the server itself, against Google's own SDK -------------------------------------------


def test_the_server_answers_googles_own_client(gemini_server):
    from google import genai
    from google.genai import types

    gemini_server.reset()
    gemini_server.add_rule(task="judge", json={"score": 9, "reasoning": "Right."})
    client = genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(base_url=gemini_server.root, headers={"X-Evalsite-Task": "judge"}),
    )
    config = types.GenerateContentConfig(
        system_instruction="You grade answers.",
        response_mime_type="application/json",
        response_schema={"type": "OBJECT", "properties": {"score": {"type": "INTEGER"}}},
        max_output_tokens=50,
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name="lookup", description="Look up.")])],
    )

    response = client.models.generate_content(model="gemini-2.5-flash", contents="Grade: Paris.", config=config)

    assert (
        response.parsed == {"score": 9, "reasoning": "Right."} or response.text == '{"score": 9, "reasoning": "Right."}'
    )
    assert response.usage_metadata.prompt_token_count > 0
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert gemini_server.invalid == []


def test_the_server_refuses_what_googles_types_refuse(gemini_server):
    import httpx

    gemini_server.reset()
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"responseType": "json"}}

    answer = httpx.post(
        f"{gemini_server.url}/models/gemini-2.5-flash:generateContent",
        json=body,
        headers={"x-goog-api-key": "test-key"},
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert 'Unknown name "responseType"' in answer.json()["error"]["message"]
    assert gemini_server.invalid


# ---- what litellm and the gateway do with it -----------------------------------------------


def test_a_chat_call_reports_gemini_tokens_and_cost(gemini):
    result = llm.complete(HELLO, task="agent")

    assert result.text.startswith("Fake answer to: What is the capital")
    [request] = gemini.posted(GENERATE)
    assert request.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert request.headers["x-goog-api-key"] == "test-key"
    assert request.headers["x-evalsite-task"] == "agent"
    usage = gemini.requests[0].response["usage"]  # the brain's figures, sent as usageMetadata
    assert (result.prompt_tokens, result.completion_tokens) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert result.cost == pytest.approx(
        llm.price("gemini/gemini-2.5-flash", result.prompt_tokens, result.completion_tokens)
    )
    assert result.cost > 0


def test_json_goes_as_a_response_schema_on_the_first_call(gemini):
    gemini.add_rule(task="judge", json={"score": 9, "reasoning": "Paris is right."})

    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert result.data == {"score": 9, "reasoning": "Paris is right."}
    assert result.json_mode == "json_schema" and result.attempts == 1
    [request] = gemini.posted(GENERATE)
    config = request.body["generationConfig"]
    assert config["response_mime_type"] == "application/json"
    assert config["response_json_schema"]["properties"]["score"] == {"type": "integer", "minimum": 0, "maximum": 10}


def test_tool_calls_go_as_function_calls_and_come_back(gemini):
    gemini.add_rule(
        task="agent", contains="weather", tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}]
    )
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]

    first = llm.complete(ask, task="agent", tools=[WEATHER_TOOL])
    answer = {"role": "tool", "tool_call_id": first.tool_calls[0]["id"], "content": "Sunny, 21 C"}
    gemini.clear_rules()
    gemini.add_rule(task="agent", reply="It is sunny.")
    second = llm.complete([*ask, first.message, answer], task="agent", tools=[WEATHER_TOOL])

    assert first.tool_calls[0]["name"] == "get_weather" and first.tool_calls[0]["arguments"] == {"city": "Paris"}
    assert second.text == "It is sunny."
    sent = gemini.posted(GENERATE)[1].body["contents"]
    assert sent[1]["parts"][0]["function_call"] == {"name": "get_weather", "args": {"city": "Paris"}}
    assert sent[2]["parts"][0]["function_response"]["name"] == "get_weather"


def test_test_connection_shows_gemini_takes_schemas_and_tools(gemini):
    gemini.add_rule(task="probe", contains="JSON", json={"answer": "OK"})
    gemini.add_rule(
        task="probe", contains="get_time", tool_calls=[{"name": "get_time", "arguments": {"city": "Paris"}}]
    )
    gemini.add_rule(task="probe", reply="OK")

    [report] = model_test_all()

    assert report.ok, report.error
    assert report.json_schema is True and report.tools is True
    assert report.warnings == []


# ---- the errors a team meets, each readable and naming the provider ---------------------------


def _failure(**kwargs) -> llm.LLMError:
    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent", **kwargs)
    assert not CLASS_NAME.search(caught.value.message), caught.value.message
    return caught.value


def test_a_wrong_key_is_an_auth_error_naming_gemini(gemini, settings):
    settings.EVALSITE_LLM_API_KEY = "not-the-key"

    error = _failure()

    assert error.kind == "auth"
    assert error.message == "Google Gemini rejected the API key (401)."
    assert len(gemini.posted(GENERATE)) == 1  # never retried


def test_no_key_at_all_says_which_setting_takes_it(gemini, settings, monkeypatch):
    settings.EVALSITE_LLM_API_KEY = ""
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "PALM_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    error = _failure()

    assert error.kind == "auth"
    assert error.message == "Google Gemini needs an API key: set EVALSITE_LLM_API_KEY."
    assert gemini.posted(GENERATE) == []


def test_a_key_without_access_is_refused_access(gemini):
    gemini.denied = True

    error = _failure()

    assert error.kind == "auth" and error.status == 403
    assert error.message == "Google Gemini refused access to this model (403): " + DENIED


def test_an_unknown_model_is_named(gemini, settings):
    settings.EVALSITE_LLM_MODEL = "gemini/gemini-9-ultra"

    error = _failure()

    assert error.kind == "bad_request" and error.status == 404
    assert error.message.startswith("Google Gemini has no model or deployment by that name (404)")
    assert len(gemini.posted(GENERATE)) == 1


def test_a_rate_limit_waits_the_retry_delay_google_sends(gemini, settings):
    settings.EVALSITE_LLM_RETRIES = 2
    gemini.rate_limit(task="agent", retry_delay=1, times=1)

    result = llm.complete(HELLO, task="agent")

    first, second = gemini.posted(GENERATE)
    assert result.attempts == 2
    waited = gemini.requests[1].time_in - gemini.requests[0].time_out
    assert waited >= 0.9  # Google's RetryInfo, not our 0.01 s backoff


def test_a_rate_limit_that_lasts_reads_rate_limited(gemini, settings):
    settings.EVALSITE_LLM_RETRIES = 1
    gemini.rate_limit(task="agent", retry_delay=0)

    error = _failure()

    assert error.kind == "rate_limit" and error.attempts == 2
    assert error.message.startswith("Google Gemini rate limited the request (429) after 2 attempts: " + QUOTA)


def test_an_overloaded_model_is_retried_and_named(gemini, settings):
    settings.EVALSITE_LLM_RETRIES = 1
    gemini.add_rule(task="agent", status=503)

    error = _failure()

    assert error.kind == "server" and error.status == 503 and error.attempts == 2
    assert error.message.startswith("Google Gemini is overloaded (503) after 2 attempts")


def test_an_overloaded_model_does_not_step_down_the_json_ladder(gemini, settings):
    settings.EVALSITE_LLM_RETRIES = 0
    gemini.add_rule(task="judge", status=503, times=1)
    gemini.add_rule(task="judge", json={"score": 9, "reasoning": "Right."})

    with pytest.raises(llm.LLMError) as caught:
        llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")
    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert caught.value.status == 503
    assert result.json_mode == "json_schema"  # a busy server said nothing about the way of asking
    assert all("response_json_schema" in r.body["generationConfig"] for r in gemini.posted(GENERATE))


def test_a_prompt_over_the_context_window_says_so(gemini):
    gemini.set_context_window(12)

    error = _failure()

    assert error.kind == "context_window"
    assert "Google Gemini" in error.message and "context window" in error.message
    assert len(gemini.posted(GENERATE)) == 1


def test_an_answer_withheld_by_the_safety_filters_says_so(gemini):
    gemini.block(task="agent")

    error = _failure()

    assert error.kind == "content_policy"
    assert error.message == "Google Gemini refused to answer: its content filter stopped the answer."
    assert error.result is not None and error.result.prompt_tokens > 0  # the prompt was paid for


def test_a_refused_prompt_says_so(gemini):
    gemini.block_prompt(task="judge")

    with pytest.raises(llm.LLMError) as caught:
        llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert caught.value.kind == "content_policy"
    assert caught.value.message == "Google Gemini refused to answer: its content filter stopped the answer."
    assert len(gemini.posted(GENERATE)) == 1  # neither a repair nor another rung of the ladder


def test_a_refused_schema_keyword_steps_down_the_ladder_once(gemini):
    gemini.refuse_schema_keywords = {"additionalProperties"}
    gemini.add_rule(task="judge", json={"score": 9, "reasoning": "Right."})

    first = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")
    second = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert (first.json_mode, first.attempts) == ("json_object", 2)
    assert (second.json_mode, second.attempts) == ("json_object", 1)  # remembered
    sent = [r.body["generationConfig"] for r in gemini.posted(GENERATE)]
    assert "response_json_schema" in sent[0] and "response_json_schema" not in sent[1]
    assert sent[1]["response_mime_type"] == sent[2]["response_mime_type"] == "application/json"


def test_test_connection_names_gemini_and_the_url_it_tried(gemini, settings):
    settings.EVALSITE_LLM_API_KEY = "not-the-key"

    [report] = model_test_all()

    assert not report.ok
    assert report.error == (
        f"Google Gemini rejected the API key (401). (tried {gemini.url}/models/gemini-2.5-flash:generateContent)"
    )


# ---- the whole product through Gemini (the README's recipe) -----------------------------------

GEMINI = Provider(
    name="Google Gemini",
    chat_model="gemini/gemini-2.5-flash",
    judge_model="gemini/gemini-2.5-pro",
    api_key="test-key",
    embedding_model="gemini/gemini-embedding-001",
    json_mode="json_schema",
    api_base_path="/v1beta",
)


@pytest.fixture
def walked(gemini_server, settings, monkeypatch) -> FakeGemini:
    return aim(settings, monkeypatch, gemini_server, GEMINI)


def test_walk_test_connection(walked):
    reports = walk_test_connection(walked, GEMINI)

    assert reports[0].url == f"{walked.url}/models/gemini-2.5-flash:generateContent"
    assert reports[-1].url == f"{walked.url}/models/gemini-embedding-001:batchEmbedContents"


@pytest.mark.django_db
def test_walk_preflight_a_run_with_a_tool_using_agent_and_its_summary(walked, make_dataset, alice):
    run = walk_preflight_and_run(walked, GEMINI, make_dataset, alice)

    # Each call priced by litellm at its own model's price: gemini-2.5-pro's judge costs more a token.
    result = run.results.first()
    assert result.judge_cost / result.judge_tokens > result.agent_cost / result.agent_tokens


@pytest.mark.django_db
def test_walk_a_scenario_with_the_simulated_user(walked, make_dataset, alice):
    walk_scenario(walked, make_dataset, alice)


@pytest.mark.django_db
def test_walk_ai_generation(walked, agent):
    walk_generation(walked, agent)


@pytest.mark.django_db
def test_walk_suggestions_and_applys_rewrite(walked, make_dataset, alice):
    walk_suggestions_and_rewrite(walked, make_dataset, alice)


# ---- the error table, on the run's cards and in Test connection --------------------------------

GEMINI_FAULTS = {
    "RATE-LIMITED": (
        {"status": 429, "headers": {"retry-after": "0"}},
        "Google Gemini rate limited the request (429) after 2 attempts: " + QUOTA + ".",
    ),
    "OVERLOADED": (
        {"status": 503},
        "Google Gemini is overloaded (503) after 2 attempts: The model is overloaded. Please try again later.",
    ),
    "BLOCKED": (
        {"finish_reason": "content_filter"},
        "Google Gemini refused to answer: its content filter stopped the answer.",
    ),
}


@pytest.mark.django_db
def test_the_error_table_on_the_run_cards(walked, make_dataset, alice, client_alice, settings):
    settings.EVALSITE_LLM_RETRIES = 1

    walk_error_cards(walked, make_dataset, alice, client_alice, GEMINI_FAULTS)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("bad key", "Google Gemini rejected the API key (401)."),
        ("no key", "Google Gemini needs an API key: set EVALSITE_LLM_API_KEY."),
        ("denied", "Google Gemini refused access to this model (403): " + DENIED),
        (
            "unknown model",
            "Google Gemini has no model or deployment by that name (404): models/gemini-9-ultra is not found",
        ),
        ("rate limited", GEMINI_FAULTS["RATE-LIMITED"][1].replace(" after 2 attempts", "")),
        ("overloaded", GEMINI_FAULTS["OVERLOADED"][1].replace(" after 2 attempts", "")),
        ("blocked", GEMINI_FAULTS["BLOCKED"][1]),
        ("context", "The conversation is longer than the model's context window (Google Gemini: The input token"),
    ],
)
def test_the_error_table_in_test_connection(walked, settings, monkeypatch, fault, expected):
    model = "gemini-2.5-flash"
    if fault == "bad key":
        settings.EVALSITE_LLM_API_KEY = "not-the-key"
    elif fault == "no key":
        settings.EVALSITE_LLM_API_KEY = ""
        for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "PALM_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    elif fault == "denied":
        walked.denied = True
    elif fault == "unknown model":
        model = "gemini-9-ultra"
        settings.EVALSITE_LLM_MODEL = f"gemini/{model}"
    elif fault == "context":
        walked.set_context_window(8)
    else:
        rule = {"rate limited": "RATE-LIMITED", "overloaded": "OVERLOADED", "blocked": "BLOCKED"}[fault]
        walked.add_rule(task="probe", **GEMINI_FAULTS[rule][0])
    url = f"{walked.url}/models/{model}:generateContent"

    chat = next(report for report in model_test_all() if report.purpose == "llm")

    assert not chat.ok
    assert chat.error.startswith(expected) and chat.error.endswith(f"(tried {url})"), chat.error
