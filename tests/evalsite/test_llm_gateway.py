"""The LLM gateway against the fake server, over real HTTP with the real litellm client."""

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evalsite import llm
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
HELLO = [{"role": "user", "content": "What is the capital of France?"}]
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "verdict": {"type": "string", "enum": ["Correct", "Incorrect"]},
        "reasoning": {"type": "string", "maxLength": 2000},
    },
    "required": ["score", "verdict", "reasoning"],
}
GOOD_VERDICT = {"score": 9, "verdict": "Correct", "reasoning": "Paris is right."}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
# Exception class names (BadRequestError, litellm.Timeout, APIConnectionError...) and traceback text.
CLASS_NAME = re.compile(r"[A-Z]\w*(Error|Exception)\b|litellm|openai\.|Traceback")


def test_it_answers_and_records_tokens(fake_llm):
    result = llm.complete(HELLO, task="agent")

    assert result.text == "Fake answer to: What is the capital of France?"
    assert result.model == "openai/fake-agent"
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.attempts == 1
    assert result.tool_calls == [] and result.data is None
    assert result.message == {"role": "assistant", "content": result.text}
    assert isinstance(result.duration_ms, int)
    assert fake_llm.requests[0].model == "fake-agent"
    assert fake_llm.requests[0].headers["authorization"] == "Bearer test-key"


def test_a_call_logs_one_line_of_ours_and_none_of_the_http_stack(fake_llm, caplog):
    # The worker logs at INFO: the HTTP client under litellm (httpx, or the httpx2 fork that
    # newer openai releases bundle) would add a line per call to every case's log.
    with caplog.at_level("INFO"):
        llm.complete(HELLO, task="agent")

    names = {record.name for record in caplog.records}
    assert "evalsite.llm" in names
    assert not {name for name in names if name.startswith(("httpx", "httpcore"))}


def test_it_sends_task_and_trace_headers(fake_llm):
    llm.complete(HELLO, task="agent", trace={"run": 12, "case": 7, "repeat_no": 2})

    request = fake_llm.requests[0]
    assert request.task == "agent"
    assert request.trace == {"run": "12", "case": "7", "repeat_no": "2"}
    assert request.headers["x-evalsite-repeat-no"] == "2"
    assert fake_llm.count(task="agent", run=12, case=7, repeat_no=2) == 1
    assert fake_llm.count(run=13) == 0


def test_it_passes_temperature_and_max_tokens(fake_llm):
    llm.complete(HELLO, task="agent", temperature=0.2, max_tokens=50)

    body = fake_llm.requests[0].body
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 50


def test_it_parses_tool_calls(fake_llm):
    fake_llm.add_rule(
        tool_calls=[
            {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"id": "call_2", "name": "get_weather", "arguments": "{not json"},
        ]
    )

    result = llm.complete(HELLO, task="agent", tools=[WEATHER_TOOL])

    assert fake_llm.requests[0].tools == [WEATHER_TOOL]
    assert result.text == ""
    assert result.tool_calls == [
        {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"id": "call_2", "name": "get_weather", "arguments": {"_raw": "{not json"}},
    ]
    assert result.message["role"] == "assistant"
    assert result.message["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_a_tool_loop_can_continue_the_conversation(fake_llm):
    fake_llm.add_rule(tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}], times=1)
    first = llm.complete(HELLO, task="agent", tools=[WEATHER_TOOL])
    tool_answer = {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"}

    second = llm.complete([*HELLO, first.message, tool_answer], task="agent", tools=[WEATHER_TOOL])

    assert second.text.startswith("Fake answer to:")
    assert fake_llm.requests[1].messages[-2]["tool_calls"][0]["id"] == "call_1"


def test_it_returns_validated_json(fake_llm):
    fake_llm.add_rule(task="judge", json=GOOD_VERDICT)

    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge", purpose="judge")

    assert result.data == GOOD_VERDICT
    assert result.model == "openai/fake-judge"
    assert result.attempts == 1
    assert result.json_mode == "json_schema"
    sent = fake_llm.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "judge"
    assert sent["json_schema"]["schema"]["properties"]["score"] == VERDICT_SCHEMA["properties"]["score"]


def test_the_fake_judge_answers_by_default(fake_llm):
    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge", purpose="judge")

    assert result.data["score"] == 8


def test_it_repairs_broken_json_once(fake_llm):
    fake_llm.add_rule(task="judge", broken_json=True, times=1)
    fake_llm.add_rule(task="judge", json=GOOD_VERDICT)

    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert result.data == GOOD_VERDICT
    assert result.attempts == 2
    first, second = (r.response["usage"] for r in fake_llm.requests)
    assert result.prompt_tokens == first["prompt_tokens"] + second["prompt_tokens"]
    assert result.completion_tokens == first["completion_tokens"] + second["completion_tokens"]
    second = fake_llm.requests[1]
    assert second.messages[-2]["role"] == "assistant"
    assert "not valid JSON" in second.messages[-1]["content"]


def test_it_repairs_an_answer_that_breaks_the_schema(fake_llm):
    fake_llm.add_rule(task="judge", json={"score": 11, "verdict": "Correct", "reasoning": "x"}, times=1)
    fake_llm.add_rule(task="judge", json=GOOD_VERDICT)

    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert result.data == GOOD_VERDICT
    repair = fake_llm.requests[1].messages[-1]["content"]
    assert "at score: 11 is greater than the maximum of 10" in repair


def test_it_gives_up_after_one_repair(fake_llm):
    fake_llm.add_rule(task="judge", broken_json=True)

    with pytest.raises(llm.LLMError) as caught:
        llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    error = caught.value
    assert error.kind == "invalid_json"
    assert error.message == (
        "The model's answer was not valid JSON after one repair attempt: the answer is not valid JSON. "
        'Its answer began: “{"score": 8, "verdict": "Correct", "reasoning”.'
    )
    assert error.attempts == 2 and not error.retryable
    assert error.result.prompt_tokens > 0
    assert fake_llm.count(task="judge") == 2


def test_it_asks_again_without_response_format_when_the_server_rejects_it(fake_llm):
    def no_json_mode(request: dict) -> dict:
        if "response_format" in request:
            return {"status": 400, "error": "response_format is not supported by this server"}
        return {"json": GOOD_VERDICT}

    fake_llm.add_rule(task="judge", handler=no_json_mode)

    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")
    again = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert result.data == GOOD_VERDICT
    # json_schema, llama.cpp's json_object + schema, plain json_object, then the prompt alone.
    assert result.attempts == 4 and result.json_mode == "prompt"
    assert (again.attempts, again.json_mode) == (1, "prompt")  # remembered: only the first call paid
    assert "response_format" not in fake_llm.requests[-1].body


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"score": 9, "verdict": "Correct", "reasoning": "Paris is right."}\n```',
        'Here you go: {"score": 9, "verdict": "Correct", "reasoning": "Paris is right."} Hope it helps.',
        '<think>{"draft": 1}</think>{"score": 9, "verdict": "Correct", "reasoning": "Paris is right."}',
    ],
)
def test_it_finds_the_json_inside_a_chatty_answer(answer):
    assert llm.parse_json_answer(answer, VERDICT_SCHEMA) == (GOOD_VERDICT, None)


def test_raw_newlines_inside_strings_are_read(fake_llm):
    # llama.cpp's JSON grammar lets them through; strict JSON would refuse the whole answer.
    fake_llm.add_rule(task="judge", reply='{"score": 9, "verdict": "Correct", "reasoning": "Paris\nis right."}')

    result = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert result.data["reasoning"] == "Paris\nis right." and result.attempts == 1


def test_it_retries_429_then_succeeds(fake_llm):
    fake_llm.add_rule(status=429, headers={"Retry-After": "0"}, times=2)

    result = llm.complete(HELLO, task="agent")

    assert result.attempts == 3
    assert [r.status for r in fake_llm.requests] == [429, 429, 200]


def test_it_honours_retry_after(fake_llm):
    fake_llm.add_rule(status=429, headers={"Retry-After": "1"}, times=1)
    started = time.monotonic()

    result = llm.complete(HELLO, task="agent")

    assert result.attempts == 2
    assert time.monotonic() - started >= 1.0  # our own backoff would be 0.01 s


def test_it_retries_500_then_succeeds(fake_llm):
    fake_llm.add_rule(status=500, times=1)

    result = llm.complete(HELLO, task="agent")

    assert result.attempts == 2
    assert fake_llm.count() == 2


def test_it_stops_after_the_retry_budget(fake_llm, settings):
    settings.EVALSITE_LLM_RETRIES = 2
    fake_llm.add_rule(status=429, headers={"Retry-After": "0"})

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent")

    assert caught.value.kind == "rate_limit"
    assert caught.value.retryable
    assert caught.value.attempts == 3
    assert caught.value.message == "The model provider rate-limited the request (429) after 3 attempts."
    assert fake_llm.count() == 3


@pytest.mark.parametrize(
    ("status", "error", "kind", "message"),
    [
        (401, None, "auth", "The model provider rejected the API key (401)."),
        (403, None, "auth", "The model provider refused access to this model (403)."),
        (
            400,
            "Unknown parameter: foo",
            "bad_request",
            "The model provider rejected the request (400): Unknown parameter: foo.",
        ),
        (404, "The model `fake-agent` does not exist", "bad_request", None),
        (
            400,
            "This model's maximum context length is 8192 tokens.",
            "context_window",
            "The conversation is longer than the model's context window.",
        ),
        (
            400,
            "Your request was rejected as a result of the safety system.",
            "content_policy",
            "The model provider refused the request under its content policy.",
        ),
    ],
)
def test_it_never_retries_client_errors(fake_llm, status, error, kind, message):
    fake_llm.add_rule(status=status, error=error)

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent")

    assert caught.value.kind == kind
    assert not caught.value.retryable
    assert caught.value.attempts == 1
    assert message is None or caught.value.message == message
    assert not CLASS_NAME.search(caught.value.message)
    assert fake_llm.count() == 1


def test_a_context_window_error_known_only_by_its_code_is_still_one(fake_llm):
    # Newer provider wordings that litellm's message matching doesn't know.
    fake_llm.add_rule(
        status=400, error="Your input exceeds the context window of this model.", code="context_length_exceeded"
    )

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent")

    assert caught.value.kind == "context_window"
    assert caught.value.message == "The conversation is longer than the model's context window."
    assert (caught.value.attempts, fake_llm.count()) == (1, 1)


def test_a_case_longer_than_the_context_window_fails_on_its_own(fake_llm):
    fake_llm.set_context_window(1000)

    with pytest.raises(llm.LLMError) as caught:
        llm.complete([{"role": "user", "content": "x" * 100_000}], task="agent")
    small = llm.complete(HELLO, task="agent")

    assert caught.value.kind == "context_window"
    assert small.attempts == 1


def test_it_cuts_a_hanging_provider_at_our_timeout(fake_llm):
    fake_llm.add_rule(hang=True)
    started = time.monotonic()

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent", timeout=1, retries=0)

    assert time.monotonic() - started < 4
    assert caught.value.kind == "timeout"
    assert caught.value.retryable
    assert caught.value.message == "The model did not answer within 1 s."
    wait_for(lambda: fake_llm.in_flight == 0, timeout=3, interval=0.02, what="the fake to see the client leave")


def test_it_does_not_retry_a_timeout_unless_configured(fake_llm):
    fake_llm.add_rule(hang=True, times=1)

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent", timeout=0.5, retries=3)

    assert (caught.value.kind, caught.value.attempts) == ("timeout", 1)
    assert fake_llm.count() == 1


def test_it_retries_a_timeout_when_configured(fake_llm, settings):
    settings.EVALSITE_LLM_RETRY_TIMEOUTS = True
    fake_llm.add_rule(hang=True, times=1)

    result = llm.complete(HELLO, task="agent", timeout=0.5, retries=1)

    assert result.attempts == 2


def test_it_reports_an_unreachable_provider(fake_llm, settings):
    settings.EVALSITE_LLM_API_BASE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent", retries=1)

    assert caught.value.kind == "connection"
    assert caught.value.message == "Could not connect to the model provider after 2 attempts."


def test_it_refuses_to_run_without_a_model(settings):
    settings.EVALSITE_LLM_MODEL = ""
    settings.EVALSITE_JUDGE_MODEL = ""

    with pytest.raises(llm.LLMNotConfigured) as caught:
        llm.complete(HELLO, task="agent")

    assert caught.value.kind == "not_configured"
    assert caught.value.message == "No model is configured. Set EVALSITE_LLM_MODEL (see README) to use this feature."
    assert not llm.is_configured() and not llm.is_configured("judge")


def test_the_judge_falls_back_to_the_agent_model_and_overrides_win(settings):
    settings.EVALSITE_LLM_MODEL = "ollama/llama3"
    settings.EVALSITE_JUDGE_MODEL = ""
    settings.EVALSITE_EMBEDDING_MODEL = ""

    assert llm.model_for("judge") == "ollama/llama3"
    assert llm.model_for("judge", "anthropic/claude-sonnet-4") == "anthropic/claude-sonnet-4"
    assert not llm.is_configured("embedding")
    with pytest.raises(llm.LLMNotConfigured, match="EVALSITE_EMBEDDING_MODEL"):
        llm.embed(["hello"])


def test_the_fake_counts_parallel_requests(fake_llm):
    all_arrived = threading.Barrier(5, timeout=10)  # answer only once all five are in flight
    fake_llm.add_rule(handler=lambda request: {"reply": f"seat {all_arrived.wait()}"})
    threads = [
        threading.Thread(target=llm.complete, args=(HELLO,), kwargs={"task": "agent", "trace": {"run": 1}})
        for _ in range(5)
    ]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert fake_llm.peak_concurrency(run=1) == 5
    assert fake_llm.peak_concurrency(task="agent") == 5
    assert fake_llm.peak_concurrency(run=2) == 0
    assert fake_llm.in_flight == 0


def test_it_embeds_texts(fake_llm):
    vectors, usage = llm.embed(["the cat sat on the mat", "the cat sat on a mat", "quarterly tax report"])

    assert len(vectors) == 3 and len(vectors[0]) == 16
    assert _cosine(vectors[0], vectors[1]) > _cosine(vectors[0], vectors[2])
    assert usage.model == "openai/fake-embed"
    assert usage.prompt_tokens > 0 and usage.attempts == 1
    assert fake_llm.count(task="embedding") == 1


def test_embeddings_retry_only_through_our_loop(fake_llm):
    fake_llm.add_rule(task="embedding", status=503, times=1)

    _, usage = llm.embed(["hello"])

    assert usage.attempts == 2
    assert fake_llm.count() == 2  # the SDK added no retries of its own


def test_cost_is_zero_for_a_model_without_a_price(fake_llm):
    result = llm.complete(HELLO, task="agent")

    assert result.cost == 0.0
    assert isinstance(result.cost, float)


def test_a_model_with_a_known_price_gets_a_cost(fake_llm):
    # litellm prices gpt-4o-mini from the cost map bundled in its wheel, offline.
    result = llm.complete(HELLO, task="agent", model="openai/gpt-4o-mini")

    assert result.cost > 0.0
    assert result.cost == pytest.approx(llm.price("openai/gpt-4o-mini", result.prompt_tokens, result.completion_tokens))


def test_calls_to_one_server_reuse_one_client_and_a_new_server_or_key_gets_its_own(fake_llm, settings):
    from evalsite.llm import client

    llm.complete(HELLO, task="agent")
    llm.complete(HELLO, task="judge", purpose="judge")
    assert len(client._CLIENTS) == 1

    settings.EVALSITE_LLM_API_KEY = "other-key"
    llm.complete(HELLO, task="agent")
    settings.EVALSITE_LLM_API_BASE = fake_llm.url.replace("127.0.0.1", "localhost")
    llm.complete(HELLO, task="agent", trace={"run": 3})

    assert len(client._CLIENTS) == 3
    assert [r.headers["authorization"] for r in fake_llm.requests] == ["Bearer test-key"] * 2 + ["Bearer other-key"] * 2
    assert fake_llm.requests[-1].trace == {"run": "3"}
    assert fake_llm.requests[-1].headers["host"].startswith("localhost:")


def test_importing_the_gateway_does_not_import_litellm():
    code = "import sys, django; django.setup(); import evalsite.llm; print('litellm' in sys.modules)"
    env = {"DJANGO_SETTINGS_MODULE": "evalsite.settings", "PATH": "/usr/bin:/bin"}

    output = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert output.stdout.strip() == "False", output.stderr


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_a_thread_is_told_once_as_its_next_request_goes_out(fake_llm):
    # A run's lane saves its previous case meanwhile (runs/engine/lane.py).
    from evalsite.llm.client import on_request_sent

    calls: list[int] = []
    on_request_sent(lambda: calls.append(len(fake_llm.requests)))
    other = threading.Thread(target=llm.complete, args=(HELLO,), kwargs={"task": "agent"})
    other.start()
    other.join(timeout=30)
    assert calls == []  # another thread's request

    llm.complete(HELLO, task="agent")
    llm.complete(HELLO, task="agent")

    assert calls == [1]  # once, before the server had this thread's request


def test_a_callback_forgotten_is_not_called(fake_llm):
    from evalsite.llm.client import on_request_sent

    calls: list[str] = []
    on_request_sent(lambda: calls.append("sent"))
    on_request_sent(None)

    llm.complete(HELLO, task="agent")

    assert calls == []


def test_litellm_logs_none_of_our_calls_on_its_logging_thread(fake_llm):
    # Tokens, cost and duration of a call are ours (LLMResult, our log line). litellm's own
    # success logging built a payload on its logging thread after every call, about 2 ms of
    # CPU a case (bench/profile_cases.py) that the run's lanes shared the interpreter with.
    # A callback registered with litellm (public API) still sees a call made past the
    # gateway, the control: so it would see ours, were they logged.
    from evalsite.llm.client import litellm_module

    litellm = litellm_module()
    seen: list[str] = []

    def record(kwargs, response, start_time, end_time):
        seen.append(kwargs.get("model"))

    litellm.success_callback.append(record)
    try:
        llm.complete(HELLO, task="agent")
        llm.complete_json(HELLO, task="judge", schema=VERDICT_SCHEMA, purpose="judge")
        llm.embed(["hello"])
        litellm.completion(
            model="openai/control", messages=HELLO, api_base=fake_llm.url, api_key="test-key", max_retries=0
        )
        wait_for(lambda: "control" in seen, timeout=10, what="litellm's logging thread logging the control call")
    finally:
        litellm.success_callback.remove(record)

    assert seen == ["control"]
    assert fake_llm.count() == 4
