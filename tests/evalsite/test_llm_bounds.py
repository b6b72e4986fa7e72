"""The gateway's structured outputs per dialect and its bounds (answer length, timeouts,
the per-model concurrency limit), against the fake server over real HTTP."""

import pickle
import threading

import pytest

from evalsite import llm
from evalsite.llm import client, structured

HELLO = [{"role": "user", "content": "What is the capital of France?"}]
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "reasoning": {"type": "string", "maxLength": 500},
    },
    "required": ["score", "reasoning"],
    "additionalProperties": False,
}
GOOD = {"score": 9, "reasoning": "Paris is right."}


def test_llama_cpp_refuses_json_schema_with_a_500_and_its_own_form_is_used_then_remembered(fake_llm):
    fake_llm.set_server("llama.cpp")
    fake_llm.add_rule(task="judge", json=GOOD)

    first = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")
    structured._memo.clear()  # another worker process: it learns from Redis
    second = llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert first.data == GOOD and second.data == GOOD
    # The 500 for json_schema is not retried: it means "not this way", not "try again".
    assert [r.status for r in fake_llm.requests] == [500, 200, 200]
    assert (first.attempts, first.json_mode) == (2, "llama_cpp")
    assert (second.attempts, second.json_mode) == (1, "llama_cpp")
    assert fake_llm.requests[1].body["response_format"] == {"type": "json_object", "schema": VERDICT_SCHEMA}


def test_a_strict_schema_is_sent_strict(fake_llm):
    fake_llm.add_rule(task="judge", json=GOOD)
    llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    spec = fake_llm.requests[0].body["response_format"]["json_schema"]
    assert spec["strict"] is True
    # OpenAI's strict mode refuses maxLength; we check it ourselves after the answer.
    assert spec["schema"]["properties"]["reasoning"] == {"type": "string"}
    assert spec["schema"]["required"] == ["score", "reasoning"]
    assert not structured.is_strict({"type": "object", "properties": {"a": {"type": "string"}}})


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai/gpt-4o-mini", ["json_schema", "llama_cpp", "json_object", "prompt"]),
        ("ollama_chat/llama3.1", ["json_schema", "json_object", "prompt"]),
        ("hosted_vllm/qwen2.5", ["json_schema", "vllm", "json_object", "prompt"]),
        ("anthropic/claude-sonnet-4", ["json_schema", "json_object", "prompt"]),
        ("gemini/gemini-2.0-flash", ["json_schema", "json_object", "prompt"]),
    ],
)
def test_each_provider_gets_its_own_dialects(model, expected, settings):
    settings.EVALSITE_LLM_JSON_MODE = "auto"

    assert structured.ladder(model) == expected


def test_vllm_gets_guided_json_in_the_body(fake_llm, settings):
    settings.EVALSITE_LLM_JSON_MODE = "vllm"
    fake_llm.add_rule(task="judge", json=GOOD)

    llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert fake_llm.requests[0].body["guided_json"] == VERDICT_SCHEMA


def test_every_call_sends_the_max_tokens_of_its_purpose(fake_llm, settings):
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "judge": 300, "agent": 700}
    fake_llm.add_rule(task="judge", json=GOOD)

    llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")
    llm.complete(HELLO, task="agent")
    llm.complete(HELLO, task="agent", max_tokens=20)

    assert [r.body["max_tokens"] for r in fake_llm.requests] == [300, 700, 20]


def test_an_answer_cut_at_max_tokens_is_reported_as_cut_and_not_repaired(fake_llm, settings):
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "judge": 50}
    fake_llm.add_rule(task="judge", runaway=True)

    with pytest.raises(llm.LLMError) as caught:
        llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    error = caught.value
    assert error.kind == "truncated"
    assert error.message == (
        "The model's answer was cut at 50 tokens (the limit for judge calls, EVALSITE_LLM_MAX_TOKENS_JUDGE) "
        "before its JSON was complete."
    )
    assert "context window" not in error.message and "not valid JSON" not in error.message
    assert fake_llm.count() == 1  # no repair: it would be cut the same way
    assert error.result.completion_tokens == 50
    assert fake_llm.requests[0].response["choices"][0]["finish_reason"] == "length"


def test_a_plain_answer_cut_at_max_tokens_says_so(fake_llm):
    fake_llm.add_rule(reply="word " * 400)

    result = llm.complete(HELLO, task="agent", max_tokens=10)

    assert result.truncated and result.finish_reason == "length"
    assert result.completion_tokens == 10


def test_json_missing_a_field_is_reported_as_such(fake_llm):
    fake_llm.add_rule(task="judge", json={"score": 5})

    with pytest.raises(llm.LLMError) as caught:
        llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    assert caught.value.kind == "invalid_json"
    assert caught.value.message.startswith(
        'The model answered JSON, but the JSON has no "reasoning" field, also after one repair attempt.'
    )
    assert 'the JSON has no "reasoning" field' in fake_llm.requests[1].messages[-1]["content"]


def test_a_failed_repair_call_keeps_the_first_calls_tokens(fake_llm):
    fake_llm.add_rule(task="judge", broken_json=True, times=1)
    fake_llm.add_rule(task="judge", status=400, error="maximum context length", code="context_length_exceeded")

    with pytest.raises(llm.LLMError) as caught:
        llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge")

    first_usage = fake_llm.requests[0].response["usage"]
    assert caught.value.kind == "context_window"
    assert caught.value.result.prompt_tokens == first_usage["prompt_tokens"]
    assert caught.value.attempts == 2


def test_the_repair_call_echoes_a_bounded_answer(fake_llm):
    fake_llm.add_rule(task="judge", reply="x" * 20_000, times=1)
    fake_llm.add_rule(task="judge", json=GOOD)

    llm.complete_json(HELLO, schema=VERDICT_SCHEMA, task="judge", max_tokens=10_000)

    assert len(fake_llm.requests[1].messages[-2]["content"]) == llm.REPAIR_ECHO_CHARS


def test_llm_error_pickles_with_all_its_fields():
    result = llm.LLMResult(text="x", data=None, tool_calls=[], message={}, model="m", prompt_tokens=3)
    error = llm.LLMError("The model did not answer.", kind="timeout", attempts=2, retryable=True, result=result)

    copy = pickle.loads(pickle.dumps(error))

    assert (copy.message, copy.kind, copy.attempts, copy.retryable) == ("The model did not answer.", "timeout", 2, True)
    assert copy.result.prompt_tokens == 3 and str(copy) == "The model did not answer."
    assert pickle.loads(pickle.dumps(llm.LLMNotConfigured("embedding"))).kind == "not_configured"


def test_server_errors_carry_the_servers_reason(fake_llm):
    fake_llm.add_rule(status=500, error="CUDA out of memory on device 0")

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(HELLO, task="agent", retries=0)

    assert (
        caught.value.message == "The model provider failed with a server error (500): CUDA out of memory on device 0."
    )


def test_embeddings_refused_by_llama_cpp_say_why(fake_llm):
    fake_llm.set_server("llama.cpp")

    with pytest.raises(llm.LLMError) as caught:
        llm.embed(["hello"])

    assert caught.value.kind == "server"
    assert "must be created with embedding=True" in caught.value.message


def test_the_per_model_limit_makes_calls_queue_for_the_model(fake_llm, settings):
    settings.EVALSITE_LLM_CONCURRENCY = 1
    fake_llm.set_latency(0.3)
    threads = [threading.Thread(target=llm.complete, args=(HELLO,), kwargs={"task": "agent"}) for _ in range(3)]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert fake_llm.count() == 3
    assert fake_llm.peak_concurrency() == 1
    assert client.slots_held("openai/fake-agent") == 0


def test_a_call_that_waits_too_long_for_its_model_fails_as_busy(fake_llm, settings):
    settings.EVALSITE_LLM_CONCURRENCY = 1
    settings.EVALSITE_LLM_QUEUE_TIMEOUT = 0.3
    fake_llm.add_rule(hang=True)

    with pytest.raises(llm.LLMError) as timed_out:
        llm.complete(HELLO, task="agent", timeout=0.5)
    with pytest.raises(llm.LLMError) as busy:
        llm.complete(HELLO, task="agent")

    # The timed-out call keeps its slot: llama.cpp goes on generating the abandoned answer.
    assert timed_out.value.kind == "timeout"
    assert busy.value.kind == "busy" and busy.value.retryable
    assert busy.value.message.startswith("The model openai/fake-agent was busy with other calls for ")
    assert fake_llm.count() == 1


def test_the_call_bound_counts_every_attempt_and_the_queue(settings):
    settings.EVALSITE_LLM_TIMEOUT = 10
    settings.EVALSITE_LLM_TIMEOUTS = {"summary": 20}
    settings.EVALSITE_LLM_RETRIES = 1
    settings.EVALSITE_LLM_BACKOFF = 1
    settings.EVALSITE_LLM_CONCURRENCY = 1
    settings.EVALSITE_LLM_QUEUE_TIMEOUT = 100

    assert llm.timeout_for("judge") == 10 and llm.timeout_for("generate") == 30
    assert llm.call_bound("summary") == 2 * 20 + 1 + 100


def test_the_prompt_spells_out_the_schema_only_for_a_server_that_cannot_take_it(fake_llm):
    def no_json_mode(request: dict) -> dict:
        if "response_format" in request:
            return {"status": 400, "error": "response_format is not supported"}
        return {"json": GOOD}

    messages = [{"role": "system", "content": "You grade answers."}, *HELLO]
    llm.complete_json(messages, schema=VERDICT_SCHEMA, task="judge")
    fake_llm.reset()
    llm.forget_model_state()
    fake_llm.add_rule(task="judge", handler=no_json_mode)
    llm.complete_json(messages, schema=VERDICT_SCHEMA, task="judge")

    schema_text = '"required": ["score", "reasoning"]'
    prompt_only = fake_llm.requests[-1]
    assert "response_format" not in prompt_only.body
    assert prompt_only.messages[0]["content"].startswith("You grade answers.\n\nReply with only JSON matching")
    assert schema_text in prompt_only.messages[0]["content"]
    assert messages[0]["content"] == "You grade answers."  # the caller's list is left alone


def test_a_request_the_server_never_acknowledges_is_abandoned_within_the_workers_lease(settings):
    """A host cut off from the network: the kernel gives the request up (TCP_USER_TIMEOUT) rather
    than deliver it after the link is back, for a case handed to another worker meanwhile."""
    import socket

    from evalsite.llm.client import forget_clients, openai_client

    settings.EVALSITE_WORKER_HEARTBEAT_TTL, settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL = 15.0, 3.0
    forget_clients()
    try:
        pool = openai_client("http://127.0.0.1:9/v1", "key", 5.0)._client._transport._pool
        assert (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 12_000) in pool._socket_options
    finally:
        forget_clients()
