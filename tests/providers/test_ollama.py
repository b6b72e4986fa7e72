"""Ollama (`ollama_chat/<model>`) through the gateway, against a server speaking Ollama's native API
(tests/providers/ollama_server.py), checked by the ollama client's types both ways."""

from __future__ import annotations

import re
import socket

import pytest

from evalsite import llm
from evalsite.llm.probe import model_test_all
from tests.providers.error_walk import walk_error_cards
from tests.providers.ollama_server import BAD_SCHEMA, BUSY, FakeOllama
from tests.providers.product_walk import (
    Provider,
    aim,
    walk_generation,
    walk_preflight_and_run,
    walk_scenario,
    walk_suggestions_and_rewrite,
    walk_test_connection,
)

CHAT = "/api/chat"
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
def ollama_server():
    server = FakeOllama().start()
    yield server
    server.stop()


@pytest.fixture
def ollama(ollama_server, settings):
    """The Ollama server, reset, with every model of the gateway on it (the README's recipe: no key)."""
    ollama_server.reset()
    settings.EVALSITE_LLM_MODEL = "ollama_chat/llama3.2"
    settings.EVALSITE_JUDGE_MODEL = "ollama_chat/llama3.2"
    settings.EVALSITE_EMBEDDING_MODEL = "ollama/nomic-embed-text"
    settings.EVALSITE_LLM_API_BASE = ollama_server.url
    settings.EVALSITE_LLM_API_KEY = ""
    settings.EVALSITE_LLM_BACKOFF = 0.01
    settings.EVALSITE_LLM_TIMEOUT = 5.0
    settings.EVALSITE_LLM_TIMEOUTS = {}
    llm.forget_model_state()
    yield ollama_server
    assert ollama_server.invalid == []  # litellm sent nothing the ollama client's types refuse
    ollama_server.reset()


# ---- the server itself, against the official ollama client ----------------------------------


def test_the_server_answers_the_ollama_client(ollama_server):
    import ollama as ollama_client

    ollama_server.reset()
    ollama_server.add_rule(task="judge", json={"score": 9, "reasoning": "Right."})
    client = ollama_client.Client(host=ollama_server.url, headers={"X-Evalsite-Task": "judge"})

    answer = client.chat(
        model="llama3.2",
        messages=[{"role": "user", "content": "Grade: Paris."}],
        format=VERDICT_SCHEMA,
        options={"num_predict": 64, "temperature": 0},
        stream=False,
    )
    shown = client.show("llama3.2")
    vectors = client.embed(model="nomic-embed-text", input=["refund window", "shipping"])

    assert answer.message.content == '{"score": 9, "reasoning": "Right."}'
    assert answer.done and answer.done_reason == "stop" and answer.prompt_eval_count > 0 and answer.eval_count > 0
    assert "tools" in shown.capabilities
    assert len(vectors.embeddings) == 2
    assert ollama_server.invalid == []


def test_the_server_refuses_what_the_client_types_refuse(ollama_server):
    import httpx

    ollama_server.reset()
    body = {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
        "response_format": "json",
    }

    answer = httpx.post(f"{ollama_server.url}/api/chat", json=body)

    assert answer.status_code == 400
    assert "response_format" in answer.json()["error"]
    assert ollama_server.invalid


# ---- what litellm and the gateway do with it -----------------------------------------------


def test_a_chat_call_reports_ollamas_token_counts_at_no_cost(ollama):
    result = llm.complete(HELLO, task="agent")

    assert result.text.startswith("Fake answer to: What is the capital")
    [request] = ollama.posted(CHAT)
    assert request.headers["x-evalsite-task"] == "agent"
    assert request.body["stream"] is False
    assert "authorization" not in request.headers  # a local server takes no key
    usage = ollama.requests[0].response["usage"]  # the brain's figures, sent as prompt_eval_count/eval_count
    assert (result.prompt_tokens, result.completion_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert result.cost == 0.0


def test_json_goes_as_the_format_schema_on_the_first_call(ollama):
    ollama.add_rule(task="judge", json={"score": 9, "reasoning": "Paris is right."})

    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge", max_tokens=300)

    assert result.data == {"score": 9, "reasoning": "Paris is right."}
    assert result.json_mode == "json_schema" and result.attempts == 1
    [request] = ollama.posted(CHAT)
    assert request.body["format"]["properties"]["score"] == {"type": "integer", "minimum": 0, "maximum": 10}
    assert request.body["options"]["num_predict"] == 300


def test_tool_calls_come_back_and_their_results_go_as_tool_messages(ollama):
    ollama.add_rule(
        task="agent", contains="weather", tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}]
    )
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]

    first = llm.complete(ask, task="agent", tools=[WEATHER_TOOL])
    answer = {"role": "tool", "tool_call_id": first.tool_calls[0]["id"], "content": "Sunny, 21 C"}
    ollama.clear_rules()
    ollama.add_rule(task="agent", reply="It is sunny.")
    second = llm.complete([*ask, first.message, answer], task="agent", tools=[WEATHER_TOOL])

    assert first.tool_calls[0]["name"] == "get_weather" and first.tool_calls[0]["arguments"] == {"city": "Paris"}
    assert second.text == "It is sunny."
    sent = ollama.posted(CHAT)[1].body["messages"]
    assert sent[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert sent[2]["role"] == "tool" and sent[2]["content"] == "Sunny, 21 C"


def test_embeddings_come_from_api_embed(ollama):
    vectors, usage = llm.embed(["refund window", "shipping times"])

    assert len(vectors) == 2 and len(vectors[0]) == 16
    assert usage.prompt_tokens > 0
    [request] = ollama.posted("/api/embed")
    assert request.body["model"] == "nomic-embed-text"


def test_test_connection_shows_ollama_takes_schemas_tools_and_embeddings(ollama):
    ollama.add_rule(task="probe", contains="JSON", json={"answer": "OK"})
    ollama.add_rule(
        task="probe", contains="get_time", tool_calls=[{"name": "get_time", "arguments": {"city": "Paris"}}]
    )
    ollama.add_rule(task="probe", reply="OK")

    chat, embedding = model_test_all()

    assert chat.ok, chat.error
    assert chat.json_schema is True and chat.tools is True and chat.warnings == []
    assert chat.url == f"{ollama.url}/api/chat"
    assert embedding.ok and embedding.dimensions == 16
    assert embedding.url == f"{ollama.url}/api/embed"


# ---- the errors a team meets, each readable and naming the provider ---------------------------


def _failure(**kwargs) -> llm.LLMError:
    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent", **kwargs)
    assert not CLASS_NAME.search(caught.value.message), caught.value.message
    return caught.value


def test_a_server_that_is_not_running_is_named(ollama, settings):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        settings.EVALSITE_LLM_API_BASE = f"http://127.0.0.1:{closed.getsockname()[1]}"
    settings.EVALSITE_LLM_RETRIES = 0

    error = _failure()

    assert error.kind == "connection"
    assert error.message == "Could not connect to Ollama."


def test_a_wrong_key_on_a_protected_server_is_an_auth_error(ollama, settings):
    ollama.api_key = "right-key"
    settings.EVALSITE_LLM_API_KEY = "wrong-key"

    error = _failure()

    assert error.kind == "auth"
    assert error.message == "Ollama rejected the API key (401)."
    assert len(ollama.posted(CHAT)) == 1  # never retried


def test_a_model_not_pulled_is_named(ollama, settings):
    settings.EVALSITE_LLM_MODEL = "ollama_chat/llama9"

    error = _failure()

    assert error.kind == "bad_request" and error.status == 404
    assert error.message == "Ollama has no model or deployment by that name (404): model 'llama9' not found."


def test_a_rate_limit_waits_the_retry_after_and_retries(ollama, settings):
    settings.EVALSITE_LLM_RETRIES = 2
    ollama.add_rule(task="agent", status=429, headers={"Retry-After": "1"}, times=1)

    result = llm.complete(HELLO, task="agent")

    assert result.attempts == 2
    waited = ollama.requests[1].time_in - ollama.requests[0].time_out
    assert waited >= 0.9  # the server's Retry-After, not our 0.01 s backoff


def test_a_rate_limit_that_lasts_reads_rate_limited(ollama, settings):
    settings.EVALSITE_LLM_RETRIES = 1
    ollama.add_rule(task="agent", status=429, headers={"Retry-After": "0"})

    error = _failure()

    assert error.kind == "rate_limit" and error.attempts == 2
    assert error.message == "Ollama rate limited the request (429) after 2 attempts: too many requests."


def test_a_full_queue_is_overloaded_and_retried(ollama, settings):
    settings.EVALSITE_LLM_RETRIES = 1
    ollama.busy(task="agent")

    error = _failure()

    assert error.kind == "server" and error.status == 503 and error.attempts == 2
    assert error.message.startswith("Ollama is overloaded (503) after 2 attempts: server busy, please try again.")


def test_a_prompt_over_the_context_says_so_when_ollama_refuses_it(ollama):
    ollama.num_ctx, ollama.context_errors = 5, True

    error = _failure()

    assert error.kind == "context_window"
    assert error.message == (
        "The conversation is longer than the model's context window "
        "(Ollama: the input length exceeds the context length)."
    )
    assert len(ollama.posted(CHAT)) == 1


def test_a_prompt_ollama_cuts_silently_shows_only_in_its_token_count(ollama):
    ollama.num_ctx = 5  # Ollama's default: the front of the prompt is dropped, the answer is a 200

    result = llm.complete(HELLO, task="agent")

    assert result.prompt_tokens == 5  # less than the prompt's 7 tokens: the only trace of the cut


def test_a_schema_ollama_cannot_turn_into_a_grammar_steps_down_the_ladder_once(ollama):
    ollama.refuse_schema_keywords = {"minimum"}
    ollama.add_rule(task="judge", json={"score": 9, "reasoning": "Right."})

    first = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")
    second = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert (first.json_mode, first.attempts) == ("json_object", 2)
    assert (second.json_mode, second.attempts) == ("json_object", 1)  # remembered
    formats = [request.body.get("format") for request in ollama.posted(CHAT)]
    assert isinstance(formats[0], dict) and formats[1:] == ["json", "json"]
    assert BAD_SCHEMA  # the 500 the first call met


def test_a_full_queue_does_not_step_down_the_json_ladder(ollama, settings):
    settings.EVALSITE_LLM_RETRIES = 0
    ollama.busy(task="judge", times=1)
    ollama.add_rule(task="judge", json={"score": 9, "reasoning": "Right."})

    with pytest.raises(llm.LLMError) as caught:
        llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")
    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert caught.value.status == 503
    assert result.json_mode == "json_schema"


def test_test_connection_names_ollama_and_the_url_it_tried(ollama, settings):
    settings.EVALSITE_LLM_MODEL = settings.EVALSITE_JUDGE_MODEL = "ollama_chat/llama9"
    settings.EVALSITE_EMBEDDING_MODEL = ""

    [report] = model_test_all()

    assert not report.ok
    assert report.error == (
        f"Ollama has no model or deployment by that name (404): model 'llama9' not found. (tried {ollama.url}/api/chat)"
    )


# ---- the whole product through Ollama (the README's recipe) -----------------------------------

OLLAMA = Provider(
    name="Ollama",
    chat_model="ollama_chat/llama3.2",
    judge_model="ollama_chat/qwen2.5:7b",
    api_key="",
    embedding_model="ollama/nomic-embed-text",
    json_mode="json_schema",
    priced=False,
)


@pytest.fixture
def walked(ollama_server, settings, monkeypatch) -> FakeOllama:
    return aim(settings, monkeypatch, ollama_server, OLLAMA)


def test_walk_test_connection(walked):
    reports = walk_test_connection(walked, OLLAMA)

    assert [r.url for r in reports] == [f"{walked.url}/api/chat"] * 2 + [f"{walked.url}/api/embed"]


@pytest.mark.django_db
def test_walk_preflight_a_run_with_a_tool_using_agent_and_its_summary(walked, make_dataset, alice):
    run = walk_preflight_and_run(walked, OLLAMA, make_dataset, alice)

    assert run.agent_cost == run.judge_cost == 0  # litellm prices a local model at nothing


@pytest.mark.django_db
def test_walk_a_scenario_with_the_simulated_user(walked, make_dataset, alice):
    walk_scenario(walked, make_dataset, alice, priced=False)


@pytest.mark.django_db
def test_walk_ai_generation(walked, agent):
    walk_generation(walked, agent)


@pytest.mark.django_db
def test_walk_suggestions_and_applys_rewrite(walked, make_dataset, alice):
    walk_suggestions_and_rewrite(walked, make_dataset, alice)


# ---- the error table, on the run's cards and in Test connection --------------------------------

OLLAMA_FAULTS = {
    "RATE-LIMITED": (
        {"status": 429, "headers": {"Retry-After": "0"}},
        "Ollama rate limited the request (429) after 2 attempts: too many requests.",
    ),
    "OVERLOADED": (
        {"status": 503, "error": BUSY},
        f"Ollama is overloaded (503) after 2 attempts: {' '.join(BUSY.split())}.",
    ),
}


@pytest.mark.django_db
def test_the_error_table_on_the_run_cards(walked, make_dataset, alice, client_alice, settings):
    settings.EVALSITE_LLM_RETRIES = 1

    walk_error_cards(walked, make_dataset, alice, client_alice, OLLAMA_FAULTS)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("not running", "Could not connect to Ollama."),
        ("bad key", "Ollama rejected the API key (401)."),
        ("model not pulled", "Ollama has no model or deployment by that name (404): model 'llama9' not found."),
        ("rate limited", "Ollama rate limited the request (429): too many requests."),
        ("overloaded", f"Ollama is overloaded (503): {' '.join(BUSY.split())}."),
        ("context", "The conversation is longer than the model's context window (Ollama: the input length exceeds"),
    ],
)
def test_the_error_table_in_test_connection(walked, settings, fault, expected):
    if fault == "not running":
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            settings.EVALSITE_LLM_API_BASE = f"http://127.0.0.1:{closed.getsockname()[1]}"
    elif fault == "bad key":
        walked.api_key, settings.EVALSITE_LLM_API_KEY = "right-key", "wrong-key"
    elif fault == "model not pulled":
        settings.EVALSITE_LLM_MODEL = "ollama_chat/llama9"
    elif fault == "context":
        walked.num_ctx, walked.context_errors = 3, True
    else:
        walked.add_rule(task="probe", **OLLAMA_FAULTS["RATE-LIMITED" if fault == "rate limited" else "OVERLOADED"][0])

    chat = next(report for report in model_test_all() if report.purpose == "llm")

    assert not chat.ok
    assert chat.error.startswith(expected) and chat.error.endswith(f"(tried {settings.EVALSITE_LLM_API_BASE}/api/chat)")
