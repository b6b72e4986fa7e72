"""runs/engine/estimate.py: the start dialog's estimate, from earlier runs and from prompt length."""

import pytest
from django.urls import reverse

from accounts.services import api_token_create
from agents.models import Agent
from evalsite import llm
from runs import services
from runs.engine.estimate import CHARS_PER_TOKEN, JUDGE_ANSWER_TOKENS, run_estimate
from runs.judging import configs as judging
from runs.models import Result, Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

PRICED = "openai/gpt-4o-mini"


@pytest.fixture
def priced(fake_llm, settings):
    settings.EVALSITE_LLM_MODEL = PRICED
    settings.EVALSITE_JUDGE_MODEL = PRICED
    return fake_llm


def _part(estimate, label):
    return next(part for part in estimate.parts if part.label == label)


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
    agent_part, judge_part = _part(estimate, "Agent"), _part(estimate, "Judge")
    assert (agent_part.calls, judge_part.calls) == (8, 8)
    # 400 characters of instructions and 80 of question, 4 characters a token; the answer
    # as long as the expected answer.
    assert agent_part.prompt_tokens == (400 + 80) // CHARS_PER_TOKEN
    assert agent_part.completion_tokens == 40 // CHARS_PER_TOKEN
    assert judge_part.completion_tokens == JUDGE_ANSWER_TOKENS
    one_call = llm.price(PRICED, agent_part.prompt_tokens, agent_part.completion_tokens)
    assert agent_part.cost == pytest.approx(8 * one_call)
    central = sum(part.cost for part in estimate.parts)
    assert estimate.cost_high >= central * 2 and estimate.cost_low <= central * 0.5
    assert estimate.seconds is None  # nothing to time it by yet
    assert estimate.unpriced == []


def test_earlier_runs_of_the_same_dataset_and_version_give_the_tokens_and_time(make_dataset, alice, priced):
    dataset = _dataset(make_dataset)
    drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    Result.objects.update(agent_tokens=300, judge_tokens=500, duration_ms=1200)

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=2)

    assert estimate.source == "history" and estimate.source_runs == 1
    agent_part, judge_part = _part(estimate, "Agent"), _part(estimate, "Judge")
    assert agent_part.prompt_tokens + agent_part.completion_tokens == 300
    assert agent_part.prompt_tokens == (400 + 80) // CHARS_PER_TOKEN  # the rest is the answer
    assert judge_part.prompt_tokens + judge_part.completion_tokens == 500
    assert (agent_part.low, agent_part.high, judge_part.low, judge_part.high) == (0.75, 1.5, 0.75, 1.5)
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

    estimate = run_estimate(agent=agent, dataset=dataset, concurrency=3)
    assert "no earlier run with this agent version" in _part(estimate, "Agent").basis
    assert "latest run scored by judge v1" in _part(estimate, "Judge").basis  # the judge did not change


def test_a_model_without_a_price_is_unknown_not_free(make_dataset, fake_llm):
    dataset = _dataset(make_dataset)  # the fake's own model names: litellm has no price

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)

    assert estimate.unpriced == ["openai/fake-agent", "openai/fake-judge"]
    assert estimate.cost_high == 0


def test_smoke_variants_add_their_calls_and_a_paraphrase_each(make_dataset, priced):
    dataset = _dataset(make_dataset, cases=2, smoke_count=3)

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)

    assert estimate.results == 2 + 6
    calls = [(part.label, part.calls) for part in estimate.parts]
    assert calls == [
        ("Agent", 8),
        ("Judge", 8),
        ("Judge re-asks", 8),
        ("Paraphrases", 6),
    ]


# ---- the judge's own history, its prompt, and the actual cost (issue 34, item 2) -------------------


def _actual(run):
    run.refresh_from_db()
    return float(run.agent_cost + run.judge_cost + run.simulator_cost)


def _near(estimate, actual):
    """The actual cost within the estimated range, or the central estimate within 30 % of it."""
    central = sum(part.cost or 0 for part in estimate.parts)
    return estimate.cost_low <= actual <= estimate.cost_high or abs(central - actual) <= 0.3 * actual


def test_runs_scored_offline_say_nothing_about_a_model_judge(make_dataset, alice, priced, settings):
    dataset = _dataset(make_dataset)
    settings.EVALSITE_JUDGE_MODEL = ""
    settings.EVALSITE_LLM_MODEL = ""
    dataset.agent.kind = Agent.Kind.HTTP
    offline = Run.objects.create(
        agent=dataset.agent,
        agent_version=dataset.agent.current_version,
        dataset=dataset,
        judge_config=judging.dataset_judge_config(dataset=dataset),
        status=Run.Status.COMPLETED,
        completed=4,
    )
    case = offline.cases.create(position=0, question="q")
    Result.objects.create(run=offline, case=case, status=Result.Status.PASS, judge_tokens=0, agent_tokens=100)
    settings.EVALSITE_JUDGE_MODEL = PRICED
    settings.EVALSITE_LLM_MODEL = PRICED

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)

    judge = _part(estimate, "Judge")
    assert estimate.judge_config != offline.judge_config and estimate.judge_config.judge_model == PRICED
    assert judge.calls == 4 and judge.prompt_tokens > 100 and judge.cost > 0
    assert "no earlier run scored by judge v2" in judge.basis


def test_the_judge_prompt_estimate_counts_the_reviewers_worked_examples(make_dataset, priced):
    dataset = _dataset(make_dataset)
    plain = _part(run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3), "Judge").prompt_tokens
    example = {"question": "q" * 800, "answer": "a" * 800, "expected": "e" * 800, "verdict": "fail", "note": "n" * 400}

    def provider(ds, limit):
        return [example] * limit

    judging.register_alignment_examples_provider(provider)
    try:
        dataset.alignment_examples = 3
        dataset.save()
        with_examples = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)
    finally:
        judging.unregister_alignment_examples_provider(provider)  # the reviews app's own stays

    assert with_examples.judge_config.examples
    assert _part(with_examples, "Judge").prompt_tokens >= plain + 3 * 2800 // CHARS_PER_TOKEN


def test_re_asks_near_the_line_are_counted_from_the_judges_history(make_dataset, alice, priced):
    dataset = _dataset(make_dataset)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    first = Result.objects.filter(run=run).order_by("id").first()
    Result.objects.filter(run=run).update(judge_tokens=300, judge_samples=[])
    Result.objects.filter(pk=first.pk).update(judge_tokens=900, judge_samples=[6, 7, 6])

    estimate = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)

    judge, reask = estimate.parts[1], estimate.parts[2]
    assert judge.prompt_tokens + judge.completion_tokens == round((900 + 3 * 300) / 6)  # 6 calls for 4 results
    assert reask.label == "Judge re-asks" and "up to 2 per result" in reask.basis and reask.calls == round(4 * 0.25 * 2)
    assert "25% of the results" in reask.basis


def test_the_estimate_holds_against_the_cost_of_the_run_on_the_fake_server(make_dataset, alice, priced):
    dataset = _dataset(make_dataset, cases=5)
    priced.add_rule(task="agent", reply="Refunds are accepted within 30 days of purchase with a receipt.")
    priced.add_rule(task="judge", json={"score": 9, "reasoning": "Names the 30 days and the receipt, as expected."})

    before = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)
    first = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    again = run_estimate(agent=dataset.agent, dataset=dataset, concurrency=3)
    second = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert before.source == "prompt" and _near(before, _actual(first)), (
        before.cost_low,
        before.cost_high,
        _actual(first),
    )
    assert again.source == "history" and _near(again, _actual(second)), (
        again.cost_low,
        again.cost_high,
        _actual(second),
    )


def test_the_api_gives_the_estimate_with_its_basis(make_dataset, priced, client, alice, charlie):
    dataset = _dataset(make_dataset)
    url = f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/estimate"

    body = client.get(url, **_bearer(alice)).json()

    assert (
        body["results"] == 4
        and body["judge"]["fingerprint"] == judging.dataset_judge_config(dataset=dataset).fingerprint
    )
    assert body["cost_low"] < body["cost_high"] and body["unpriced"] == []
    assert [part["label"] for part in body["parts"]][:2] == ["Agent", "Judge"]
    assert all(part["basis"] for part in body["parts"])
    assert client.get(url, **_bearer(charlie)).status_code == 404


def _bearer(user):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=user, name='ci')[1]}"}


def test_the_run_evaluation_dialog_states_each_parts_basis(make_dataset, priced, client_alice):
    dataset = _dataset(make_dataset)

    html = client_alice.get(reverse("runs:start_dialog", args=[dataset.agent_id, dataset.pk])).content.decode()

    config = judging.dataset_judge_config(dataset=dataset)
    assert "No earlier run scored by judge v1: the size of its prompt" in html
    assert (
        "Judge re-asks" in html
        and "Up to 2 per result near the line" in html
        and f"fingerprint {config.short_fingerprint}" in html
    )
