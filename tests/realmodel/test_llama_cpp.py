"""The gateway through the real litellm client against llama-cpp-python's server and SmolLM2.

These assert shapes, status codes and bounds, never the model's wisdom: a 135M model
answers badly, and that is fine as long as every answer or failure is bounded and named.
"""

from __future__ import annotations

import threading
import time

import jsonschema
import pytest

from agents.models import Agent
from evalsite import llm
from evalsite.llm import client
from runs import services
from runs.judging.scoring import JUDGE_SCHEMA, Evaluation, JudgeError, judge, judge_prompt
from runs.models import Result, Run
from tests.realmodel.server import CONTEXT_TOKENS, MODEL_ALIAS
from tests.runs.conftest import wait_settled

pytestmark = pytest.mark.realmodel

HELLO = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
REFUND = Evaluation(
    question="How long is the refund window?",
    answer="You can get a refund within 30 days of purchase.",
    expected_answer="Refunds are available within 30 days of purchase.",
)


def test_plain_chat_honours_max_tokens(real_llm):
    result = llm.complete(HELLO, task="agent", max_tokens=16)

    assert result.text.strip()
    assert 0 < result.completion_tokens <= 16
    assert result.finish_reason in ("stop", "length")
    assert result.prompt_tokens > 0 and result.attempts == 1


def test_an_answer_cut_at_max_tokens_says_length(real_llm):
    ask = [{"role": "user", "content": "Write a long story about a lighthouse keeper and the sea."}]

    result = llm.complete(ask, task="agent", max_tokens=8)

    assert result.finish_reason == "length" and result.truncated
    assert result.completion_tokens == 8


def test_the_judge_schema_is_enforced_in_llama_cpps_own_dialect(real_llm):
    messages = [
        {"role": "system", "content": "You grade answers."},
        {"role": "user", "content": judge_prompt(REFUND, {})},
    ]

    result = llm.complete_json(messages, schema=JUDGE_SCHEMA, task="judge", purpose="judge", temperature=0)
    again = llm.complete_json(messages, schema=JUDGE_SCHEMA, task="judge", purpose="judge", temperature=0)

    jsonschema.validate(result.data, JUDGE_SCHEMA)
    # json_schema got its 500 once; llama.cpp's json_object + schema answered; it is remembered.
    assert (result.json_mode, result.attempts) == ("llama_cpp", 2)
    assert (again.json_mode, again.attempts) == ("llama_cpp", 1)
    assert result.completion_tokens <= llm.max_tokens_for("judge")


def test_the_judge_scores_or_names_the_cause(real_llm):
    try:
        judgment = judge(REFUND, {}, {})
    except JudgeError as error:
        # A failed call, or an answer that failed its checks twice (runs/judging/checks.py).
        prefix = "Judge answer unusable: " if error.kind == "judge_unusable" else "The judge failed: "
        assert error.message.startswith(prefix)
        assert len(error.message) > len(prefix) + 10
    else:
        assert 0 <= judgment.score <= 10 and judgment.reasoning


def test_a_prompt_over_the_context_window_is_a_context_window_error(real_llm):
    huge = [{"role": "user", "content": "refund policy " * CONTEXT_TOKENS}]

    with pytest.raises(llm.LLMError) as caught:
        llm.complete(huge, task="agent")

    assert caught.value.kind == "context_window"
    assert caught.value.attempts == 1
    assert caught.value.status == 400


def test_tools_are_accepted_and_ignored(real_llm):
    ask = [{"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}]

    result = llm.complete(ask, task="agent", tools=[WEATHER_TOOL], max_tokens=32)

    assert result.tool_calls == []
    assert result.text.strip()


def test_embeddings_are_refused_with_the_servers_reason(real_llm):
    with pytest.raises(llm.LLMError) as caught:
        llm.embed(["hello"], retries=0)

    assert caught.value.kind == "server" and caught.value.status == 500
    assert "embedding=True" in caught.value.message


def test_two_requests_at_once_are_served_one_after_the_other(real_llm):
    held: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            held.append(client.slots_held(f"openai/{MODEL_ALIAS}"))
            time.sleep(0.01)

    results: list[llm.LLMResult] = []
    calls = [
        threading.Thread(target=lambda: results.append(llm.complete(HELLO, task="agent", max_tokens=24)))
        for _ in range(2)
    ]
    watcher = threading.Thread(target=watch)
    watcher.start()
    for call in calls:
        call.start()
    for call in calls:
        call.join()
    done.set()
    watcher.join()

    assert len(results) == 2 and all(r.text.strip() for r in results)
    assert max(held) == 1  # never two calls on the model at once
    assert all(r.attempts == 1 for r in results)


@pytest.mark.django_db(transaction=True)
def test_a_two_case_run_with_the_llm_judge_completes_within_its_bounds(
    real_llm, celery_worker, make_dataset, alice, settings
):
    dataset = make_dataset(
        2,
        kind=Agent.Kind.LLM,
        questions=["How long is the refund window?", "Which plan includes phone support?"],
        version={"model": f"openai/{MODEL_ALIAS}", "instructions": "Answer in one or two short sentences."},
    )
    worker = celery_worker(concurrency=2)
    bound = llm.call_bound("agent") + llm.call_bound("judge")

    run = wait_settled(
        services.run_start(agent=dataset.agent, dataset=dataset, user=alice), timeout=3 * bound, worker=worker
    )

    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    assert len(results) == 2
    for result in results:
        if result.status == Result.Status.ERROR:
            assert result.error and "Traceback" not in result.error, result.error
        else:
            assert result.status in (Result.Status.PASS, Result.Status.FAIL)
            assert result.score is not None and 0 <= result.score <= 10
        assert result.duration_ms is None or result.duration_ms <= bound * 1000


# The structured answers added with scenarios and rule coverage: llama.cpp turns each schema
# into its grammar (json_object + schema), so what SmolLM2 writes must validate against it.
NEW_SCHEMAS = {
    "simulator": (
        "simulator",
        "You play a customer whose goal is a refund for order A-1. Reply with JSON: the next message or the end.",
    ),
    "scenario judge": ("judge", "Grade this conversation against the user's goal (a refund) and say the failing turn."),
    "coverage rules": ("coverage", "Rewrite as testable rules: Refunds are possible within 30 days."),
    "coverage links": ("coverage", "Rules: K-1: refunds within 30 days. Case 1: Can I get a refund? Map the cases."),
}


@pytest.mark.parametrize("name", list(NEW_SCHEMAS))
def test_the_new_structured_answers_validate_in_llama_cpps_dialect(real_llm, name):
    from datasets.coverage import LINKS_SCHEMA, RULES_SCHEMA
    from runs.engine.simulator import SIMULATOR_SCHEMA
    from runs.judging.scenario import SCENARIO_JUDGE_SCHEMA

    schema = {
        "simulator": SIMULATOR_SCHEMA,
        "scenario judge": SCENARIO_JUDGE_SCHEMA,
        "coverage rules": RULES_SCHEMA,
        "coverage links": LINKS_SCHEMA,
    }[name]
    task, prompt = NEW_SCHEMAS[name]

    result = llm.complete_json([{"role": "user", "content": prompt}], schema=schema, task=task, temperature=0)

    jsonschema.validate(result.data, schema)
    assert result.json_mode == "llama_cpp"
