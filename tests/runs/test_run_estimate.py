"""runs/estimate.py: the start dialog's estimate, from earlier runs and from prompt length."""

import pytest

from agents.models import Agent
from evalsite import llm
from runs import services
from runs.estimate import CHARS_PER_TOKEN, JUDGE_ANSWER_TOKENS, run_estimate
from runs.models import Result
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

PRICED = "openai/gpt-4o-mini"


@pytest.fixture
def priced(fake_llm, settings):
    settings.EVALSITE_LLM_MODEL = PRICED
    settings.EVALSITE_JUDGE_MODEL = PRICED
    return fake_llm


def _dataset(make_dataset, cases=4, **fields):
    return make_dataset(
        cases,
        kind=Agent.Kind.LLM,
        version={"instructions": "x" * 400, "skills": "", "knowledge": "", "guardrails": ""},
        questions=["q" * 80] * cases,
        expected_answer="e" * 40,
        **fields,
    )


def test_without_earlier_runs_the_tokens_come_from_the_prompt_length(make_dataset, priced):
    dataset = _dataset(make_dataset)
    dataset.number_of_requests = 2
    dataset.save()

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)

    assert estimate.source == "prompt" and estimate.results == 8
    agent_part, judge_part = estimate.parts
    assert (agent_part.calls, judge_part.calls) == (8, 8)
    # 400 characters of instructions and 80 of question, 4 characters a token; the answer
    # as long as the expected answer.
    assert agent_part.prompt_tokens == (400 + 80) // CHARS_PER_TOKEN
    assert agent_part.completion_tokens == 40 // CHARS_PER_TOKEN
    assert judge_part.completion_tokens == JUDGE_ANSWER_TOKENS
    one_call = llm.price(PRICED, agent_part.prompt_tokens, agent_part.completion_tokens)
    assert agent_part.cost == pytest.approx(8 * one_call)
    total = agent_part.cost + judge_part.cost
    assert (estimate.cost_low, estimate.cost_high) == (pytest.approx(total * 0.5), pytest.approx(total * 2))
    assert estimate.seconds is None  # nothing to time it by yet
    assert estimate.unpriced == []


def test_earlier_runs_of_the_same_dataset_and_version_give_the_tokens_and_time(make_dataset, alice, priced):
    dataset = _dataset(make_dataset)
    drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    Result.objects.update(agent_tokens=300, judge_tokens=500, duration_ms=1200)

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=2)

    assert estimate.source == "history" and estimate.source_runs == 1
    agent_part, judge_part = estimate.parts
    assert agent_part.prompt_tokens + agent_part.completion_tokens == 300
    assert agent_part.prompt_tokens == (400 + 80) // CHARS_PER_TOKEN  # the rest is the answer
    assert judge_part.prompt_tokens + judge_part.completion_tokens == 500
    assert estimate.tokens_low == round(4 * 800 * 0.75) and estimate.tokens_high == round(4 * 800 * 1.5)
    assert estimate.seconds == pytest.approx(4 * 1.2 / 2)


def test_a_new_agent_version_does_not_use_the_old_versions_runs(make_dataset, alice, priced):
    dataset = _dataset(make_dataset)
    drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    agent = dataset.agent
    old = agent.current_version
    old.pk, old.number = None, old.number + 1
    old.save()
    agent.current_version = old
    agent.save()

    assert run_estimate(agent=agent, dataset=dataset, concurrency=3).source == "prompt"


def test_a_model_without_a_price_is_unknown_not_free(make_dataset, fake_llm):
    dataset = _dataset(make_dataset)  # the fake's own model names: litellm has no price

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)

    assert estimate.unpriced == ["openai/fake-agent", "openai/fake-judge"]
    assert estimate.cost_high == 0


def test_smoke_variants_add_their_calls_and_a_paraphrase_each(make_dataset, priced):
    dataset = _dataset(make_dataset, cases=2, smoke_count=3)

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)

    assert estimate.results == 2 + 6
    assert [(part.label, part.calls) for part in estimate.parts] == [("Agent", 8), ("Judge", 8), ("Paraphrases", 6)]
