"""The fake LLM server itself, spoken to with plain urllib (no litellm)."""

import base64
import json
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.fakellm import JUDGE_DEFAULT, FakeLLM
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _post(
    fake: FakeLLM, path: str, body: dict, task: str = "", timeout: float = 5, **trace: str | int
) -> tuple[int, dict, dict]:
    headers = {"Content-Type": "application/json", "X-Evalsite-Task": task}
    headers.update({f"X-Evalsite-{k.title()}": str(v) for k, v in trace.items()})
    request = urllib.request.Request(fake.url.removesuffix("/v1") + path, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def _chat(fake: FakeLLM, text: str, task: str = "agent", **extra: object) -> tuple[int, dict, dict]:
    body = {"model": "fake-agent", "messages": [{"role": "user", "content": text}], **extra}
    return _post(fake, "/v1/chat/completions", body, task=task)


def _content(body: dict) -> str:
    return body["choices"][0]["message"]["content"]


def test_it_answers_text_judge_and_json_by_default(fake_llm_server):
    fake_llm_server.reset()

    assert _content(_chat(fake_llm_server, "Hi there")[1]) == "Fake answer to: Hi there"
    assert json.loads(_content(_chat(fake_llm_server, "Grade this", task="judge")[1])) == JUDGE_DEFAULT
    json_mode = {"response_format": {"type": "json_object"}}
    assert _content(_chat(fake_llm_server, "Extract", task="extract", **json_mode)[1]) == "{}"


def test_it_reports_usage(fake_llm_server):
    fake_llm_server.reset()

    status, body, _ = _chat(fake_llm_server, "x" * 400)

    assert status == 200
    assert body["usage"]["prompt_tokens"] == 100
    assert body["usage"]["total_tokens"] == 100 + body["usage"]["completion_tokens"]


def test_the_first_matching_rule_wins_and_times_limits_it(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(task="judge", reply="judged")
    fake_llm_server.add_rule(contains="Paris", reply="once", times=1)
    fake_llm_server.add_rule(regex=r"capital of \w+", reply="by regex")

    assert _content(_chat(fake_llm_server, "Paris?", task="judge")[1]) == "judged"
    assert _content(_chat(fake_llm_server, "Paris?")[1]) == "once"
    assert _content(_chat(fake_llm_server, "Paris?")[1]).startswith("Fake answer")
    assert _content(_chat(fake_llm_server, "the capital of Spain")[1]) == "by regex"


def test_it_fails_on_request_with_status_and_headers(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(status=429, headers={"Retry-After": "3"})

    status, body, headers = _chat(fake_llm_server, "Hi")

    assert status == 429
    assert body["error"]["code"] == "rate_limit_exceeded"
    assert headers["Retry-After"] == "3"
    assert fake_llm_server.requests[0].status == 429


def test_it_returns_broken_json_tool_calls_and_computed_answers(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(contains="broken", broken_json=True)
    fake_llm_server.add_rule(contains="tool", tool_calls=[{"name": "lookup", "arguments": {"q": "x"}}])
    fake_llm_server.add_rule(
        contains="echo", handler=lambda request: {"reply": request["model"] + "/" + request["task"]}
    )

    with pytest.raises(ValueError):
        json.loads(_content(_chat(fake_llm_server, "broken")[1]))
    call = _chat(fake_llm_server, "tool")[1]["choices"][0]
    assert call["finish_reason"] == "tool_calls"
    assert call["message"]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"q": "x"}'}
    assert _content(_chat(fake_llm_server, "echo")[1]) == "fake-agent/agent"


def test_it_embeds_deterministically_in_float_and_base64(fake_llm_server):
    fake_llm_server.reset()
    body = {"model": "fake-embed", "input": ["red apple", "red apple"]}

    floats = _post(fake_llm_server, "/v1/embeddings", body)[1]["data"]
    packed = _post(fake_llm_server, "/embeddings", {**body, "encoding_format": "base64"})[1]["data"]

    assert floats[0]["embedding"] == floats[1]["embedding"]
    decoded = struct.unpack("<16f", base64.b64decode(packed[0]["embedding"]))
    assert decoded == pytest.approx(floats[0]["embedding"])


def test_it_lists_models_and_refuses_unknown_paths(fake_llm_server):
    fake_llm_server.reset()

    with urllib.request.urlopen(fake_llm_server.url + "/models", timeout=5) as response:
        models = [m["id"] for m in json.loads(response.read())["data"]]
    status, _, _ = _post(fake_llm_server, "/v1/completions", {})

    assert "fake-judge" in models
    assert status == 404


def test_reset_releases_a_hanging_request(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(hang=True)
    answered = []
    client = threading.Thread(target=lambda: answered.append(_chat(fake_llm_server, "Hi")))
    client.start()
    wait_for(lambda: fake_llm_server.in_flight == 1, timeout=3, interval=0.02, what="one request in flight")

    fake_llm_server.reset()
    client.join(timeout=3)

    assert not client.is_alive()
    assert answered[0][0] == 503


def test_a_client_that_gives_up_frees_its_slot(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(hang=True)
    body = {"model": "fake-agent", "messages": [{"role": "user", "content": "Hi"}]}

    with pytest.raises(TimeoutError):
        _post(fake_llm_server, "/v1/chat/completions", body, timeout=0.3)

    wait_for(lambda: fake_llm_server.in_flight == 0, timeout=3, interval=0.02, what="no request in flight")
    assert fake_llm_server.requests[0].status == 499


def test_it_measures_peak_concurrency_per_run(fake_llm_server):
    fake_llm_server.reset()
    all_arrived = threading.Barrier(5, timeout=10)  # answer only once all five are in flight
    fake_llm_server.add_rule(handler=lambda request: {"reply": f"seat {all_arrived.wait()}"})
    body = {"model": "fake-agent", "messages": [{"role": "user", "content": "Hi"}]}
    clients = [
        threading.Thread(
            target=_post, args=(fake_llm_server, "/v1/chat/completions", body, "agent"), kwargs={"run": run}
        )
        for run in [1, 1, 1, 2, 2]
    ]

    for client in clients:
        client.start()
    for client in clients:
        client.join()

    assert fake_llm_server.peak_concurrency() == 5
    assert fake_llm_server.peak_concurrency(run=1) == 3
    assert fake_llm_server.peak_concurrency(task="agent", run=2) == 2
    assert fake_llm_server.count(task="agent", run=2) == 2


def test_latency_delays_every_answer(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.set_latency(0.2)
    started = time.monotonic()

    _chat(fake_llm_server, "Hi")

    assert time.monotonic() - started >= 0.2


def test_sequential_requests_never_overlap(fake_llm_server):
    fake_llm_server.reset()

    for _ in range(5):
        _chat(fake_llm_server, "Hi")

    assert fake_llm_server.peak_concurrency() == 1


def test_it_cuts_an_answer_at_max_tokens_with_finish_reason_length(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(reply="word " * 100)

    _, body, _ = _chat(fake_llm_server, "Hi", max_tokens=5)

    assert body["choices"][0]["finish_reason"] == "length"
    assert _content(body) == "word " * 4
    assert body["usage"]["completion_tokens"] == 5


def test_a_runaway_json_answer_fills_max_tokens(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(runaway=True)

    _, body, _ = _chat(fake_llm_server, "Grade", task="judge", max_tokens=40)

    assert _content(body).startswith('{"reasoning": "and so')
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 40


def test_it_answers_as_cut_at_its_limit_when_told(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(reply="Refunds are", finish_reason="length")

    _, body, _ = _chat(fake_llm_server, "Hi", max_tokens=64)

    assert (_content(body), body["choices"][0]["finish_reason"]) == ("Refunds are", "length")
    assert body["usage"]["completion_tokens"] == 64


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "A short title, at most 200 characters"},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "reasoning": {"type": "string"},
    },
}


@pytest.mark.parametrize(
    "request_format",
    [
        {"response_format": {"type": "json_schema", "json_schema": {"name": "judge", "schema": SCHEMA}}},
        {"response_format": {"type": "json_object", "schema": SCHEMA}},  # llama.cpp's dialect
    ],
)
def test_a_placeholder_answer_echoes_the_schema_descriptions_and_the_prompts_templates(fake_llm_server, request_format):
    fake_llm_server.reset()
    fake_llm_server.add_rule(task="judge", placeholder=True, json={"score": 10})
    prompt = 'Reply with JSON only: {"score": <whole number 0-10>, "reasoning": "<2-4 short sentences>"}'

    _, body, _ = _chat(fake_llm_server, prompt, task="judge", **request_format)

    assert json.loads(_content(body)) == {
        "title": "A short title, at most 200 characters",
        "score": 10,
        "reasoning": "<2-4 short sentences>",
    }


def test_a_placeholder_answer_without_a_schema_echoes_the_prompts_templates(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.add_rule(task="judge", placeholder=True, json={"score": 0})

    _, body, _ = _chat(fake_llm_server, 'Reply: {"score": <0-10>, "reasoning": "<what was right>"}', task="judge")

    assert json.loads(_content(body)) == {"reasoning": "<what was right>", "score": 0}


def test_as_llama_cpp_it_refuses_json_schema_and_embeddings_with_500(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.set_server("llama.cpp")
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}

    refused, error, _ = _chat(
        fake_llm_server, "Hi", response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    )
    accepted, _, _ = _chat(fake_llm_server, "Hi", response_format={"type": "json_object", "schema": schema})
    no_embeddings, reason, _ = _post(fake_llm_server, "/v1/embeddings", {"model": "m", "input": ["x"]})

    assert (refused, accepted, no_embeddings) == (500, 200, 500)
    assert "llama_cpp/server" in error["error"]["message"]
    assert reason["error"]["message"] == "Llama model must be created with embedding=True to call this method"


def test_as_llama_cpp_it_serves_one_request_at_a_time(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.set_server("llama.cpp")
    fake_llm_server.set_latency(0.2)
    clients = [threading.Thread(target=_chat, args=(fake_llm_server, "Hi")) for _ in range(3)]

    for client in clients:
        client.start()
    for client in clients:
        client.join()

    served = sorted(fake_llm_server.requests, key=lambda r: r.seq_start)
    assert all(later.seq_start > earlier.seq_out for earlier, later in zip(served, served[1:], strict=False))
    assert fake_llm_server.peak_concurrency() == 3  # queued on the server counts as in flight


def test_as_llama_cpp_it_goes_on_generating_after_the_client_gave_up(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.set_server("llama.cpp")
    fake_llm_server.add_rule(delay=0.6)
    body = {"model": "fake-agent", "messages": [{"role": "user", "content": "Hi"}]}

    with pytest.raises(TimeoutError):
        _post(fake_llm_server, "/v1/chat/completions", body, timeout=0.2)

    assert fake_llm_server.in_flight == 1  # still busy with the abandoned answer
    wait_for(lambda: fake_llm_server.in_flight == 0, timeout=10, what="the abandoned answer to end")
    assert fake_llm_server.requests[0].status == 200


def test_it_runs_standalone():
    command = [sys.executable, "tests/fakellm.py", "--port", "0", "--latency", "0.01"]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as server:
        try:
            url = server.stdout.readline().split(" on ")[1].split()[0]
            with urllib.request.urlopen(url + "/models", timeout=5) as response:
                assert response.status == 200
        finally:
            server.terminate()
