"""Before a run starts: what it will probably cost and take (the start dialog, and
`GET /api/agents/{id}/eval/datasets/{id}/estimate`).

Each kind of call is estimated on its own, and says what it was estimated from (its `basis`):

    agent       results x one call; tokens per result from earlier runs of this dataset with
                this agent version, else the prompt's length (instructions + question, 4
                characters a token) and an answer as long as the expected answer
    judge       results x one call; tokens per call from earlier runs scored by the judge
                configuration the run will use (never another judge's: an offline scorer spends
                nothing), else the judge's own prompt (its instructions, criteria and the
                reviewers' worked examples) filled with the case
    re-asks     the judge asked `judge_resamples` more times for a score near the line: the
                share of results that were re-asked under this configuration, else a guess of
                half (from none to all)
    simulator   scenario cases' user simulator, from earlier runs of this dataset and version
                (its conversations' tokens), else its turn limit of short prompts
    paraphrases one call per smoke-test variant

priced with litellm's model cost map (`evalsite.llm.price`, litellm.cost_per_token). Each part
is a range: history gives 0.75x-1.5x of its mean, a prompt-size estimate (which cannot know the
answers' length) 0.5x-2x. A model litellm has no price for is "unknown price", never free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Avg, Count, Sum
from django.db.models.functions import Length
from django.utils import timezone

from accounts.models import Team
from agents.models import Agent, AgentVersion
from datasets.models import Dataset
from evalsite import llm
from runs.engine.simulator import DEFAULT_MAX_TURNS
from runs.judging import configs as judging
from runs.models import JudgeConfig, Result, Run

CHARS_PER_TOKEN = 4
JUDGE_ANSWER_TOKENS = 150  # a score and a few sentences of reasoning
PARAPHRASE_TOKENS = 60
SIMULATOR_TURN_TOKENS = (300, 40)  # one user-simulator call: the scenario and the talk so far, one message
HISTORY_RANGE = (0.75, 1.5)
PROMPT_RANGE = (0.5, 2.0)
REASK_GUESS = 0.5  # with no history, the share of results assumed near the line
# The earlier runs the figures come from (newest first), and the results read from them.
HISTORY_RUNS = 5
HISTORY_RESULTS = 2_000
JUDGED = (Result.Status.PASS, Result.Status.FAIL)


@dataclass
class Part:
    """One kind of call: how many, tokens per call (prompt, answer), its model's price, and
    what the figures come from."""

    label: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    model: str = ""
    cost: float | None = 0.0  # USD for every call at the central estimate; None: unknown price
    basis: str = ""
    low: float = PROMPT_RANGE[0]
    high: float = PROMPT_RANGE[1]

    @property
    def tokens(self) -> int:
        return self.calls * (self.prompt_tokens + self.completion_tokens)


@dataclass
class Estimate:
    cases: int
    results: int
    source: str  # "history" (any part from earlier runs) | "prompt"
    source_runs: int
    judge_config: JudgeConfig | None = None
    parts: list[Part] = field(default_factory=list)
    seconds: float | None = None  # central time estimate (None: no earlier run to time it by)
    factor_low: float = HISTORY_RANGE[0]  # of the time
    factor_high: float = HISTORY_RANGE[1]

    @property
    def calls(self) -> int:
        return sum(part.calls for part in self.parts)

    @property
    def tokens_low(self) -> int:
        return round(sum(part.tokens * part.low for part in self.parts))

    @property
    def tokens_high(self) -> int:
        return round(sum(part.tokens * part.high for part in self.parts))

    @property
    def unpriced(self) -> list[str]:
        return sorted({part.model or part.label for part in self.parts if part.calls and part.cost is None})

    @property
    def cost_low(self) -> float:
        return sum((part.cost or 0.0) * part.low for part in self.parts)

    @property
    def cost_high(self) -> float:
        return sum((part.cost or 0.0) * part.high for part in self.parts)

    @property
    def seconds_range(self) -> tuple[float, float] | None:
        return None if self.seconds is None else (self.seconds * self.factor_low, self.seconds * self.factor_high)


@dataclass
class _Case:
    """The dataset's average case, in tokens."""

    count: int
    question: float
    expected: float
    scenarios: int
    max_turns: int


def run_estimate(*, agent: Agent, dataset: Dataset, concurrency: int) -> Estimate:
    """The estimate of running `dataset` against the agent's current version now, judged by the
    dataset's current judge configuration."""
    version = agent.current_version
    case = _average_case(dataset)
    repeats = max(1, dataset.number_of_requests)
    variants = int(dataset.cases.aggregate(smoke=Sum("smoke_count", default=0))["smoke"] or 0)
    variants = variants if llm.is_configured("llm") else 0
    results = case.count * repeats + variants
    config = judging.dataset_judge_config(dataset=dataset)
    agent_history = _agent_history(dataset, version)
    estimate = Estimate(
        cases=case.count,
        results=results,
        source="prompt",
        source_runs=int(agent_history["runs"]) if agent_history else 0,
        judge_config=config,
    )
    agent_part = _agent_part(agent, version, case, results, agent_history)
    answer = agent_part.completion_tokens if agent_part else round(case.expected) or 50
    estimate.parts = [part for part in (agent_part, *_judge_parts(dataset, config, case, results, answer)) if part]
    if case.scenarios:
        estimate.parts.append(_simulator_part(dataset, version, case, repeats))
    if variants:
        model = llm.model_for("llm") or ""
        paraphrase = Part("Paraphrases", variants, round(case.question) + 80, PARAPHRASE_TOKENS, model=model)
        paraphrase.basis = "one call per smoke-test variant, from the question's length"
        estimate.parts.append(_priced(paraphrase))
    if any(part.low == HISTORY_RANGE[0] for part in estimate.parts):
        estimate.source = "history"
    if agent_history and agent_history["duration"] is not None:
        estimate.seconds = results * agent_history["duration"] / 1000 / max(1, concurrency)
    return estimate


def _average_case(dataset: Dataset) -> _Case:
    figures = dataset.cases.aggregate(
        count=Count("id"),
        question=Sum(Length("question"), default=0),
        expected=Sum(Length("expected_answer"), default=0),
    )
    count = figures["count"] or 0
    scenarios = [scenario for scenario in dataset.cases.values_list("scenario", flat=True) if scenario]
    turns = [int(scenario.get("max_turns") or DEFAULT_MAX_TURNS) for scenario in scenarios]
    return _Case(
        count=count,
        question=figures["question"] / count / CHARS_PER_TOKEN if count else 0,
        expected=figures["expected"] / count / CHARS_PER_TOKEN if count else 0,
        scenarios=len(scenarios),
        max_turns=round(sum(turns) / len(turns)) if turns else 0,
    )


def _agent_part(
    agent: Agent, version: AgentVersion | None, case: _Case, results: int, history: dict[str, Any] | None
) -> Part | None:
    prompt = round(_system_tokens(version) + case.question)
    if history:
        # Recorded tokens per result are prompt + answer together; the prompt part is what
        # its length says, the rest is the answer (priced at the answer's rate).
        total = round(history["agent"] or 0)
        split = (min(prompt, total), max(0, total - prompt))
        basis = f"tokens per case from the {_runs(history['runs'])} of this dataset with this agent version"
        low, high = HISTORY_RANGE
    else:
        split = (prompt, round(case.expected) or 50)
        basis = "no earlier run with this agent version: the prompt's length, an answer as long as the expected one"
        low, high = PROMPT_RANGE
    if agent.kind == Agent.Kind.LLM:
        model = llm.model_for("llm", (version.model if version else "") or None) or ""
        return _priced(Part("Agent", results, *split, model=model, basis=basis, low=low, high=high))
    if agent.kind == Agent.Kind.HTTP:
        # The team's own service answers: its price is its own (tokens as it reports them).
        return Part("Agent (your HTTP service)", results, *split, cost=None, basis=basis, low=low, high=high)
    return None


def _judge_parts(dataset: Dataset, config: JudgeConfig, case: _Case, results: int, answer: int) -> list[Part]:
    """The judge's first call per result and its re-asks near the line, from this configuration's
    own earlier runs, else from its prompt (worked examples included) filled with the case."""
    if not config.judge_model:
        return []  # the offline reference scorer calls no model
    history = _judge_history(config)
    resamples = config.resamples
    if history:
        per_call = history["tokens"] / history["calls"]
        prompt = min(round(per_call), _judge_prompt_tokens(config, case, answer))
        split = (prompt, max(0, round(per_call) - prompt))
        basis = f"tokens per call from the {_runs(history['runs'])} scored by judge v{config.number}"
        low, high = HISTORY_RANGE
        share = history["reasked"] / history["results"]
        reask_basis = f"{share:.0%} of the results of those runs were near the line"
        reask_low, reask_high = HISTORY_RANGE
    else:
        split = (_judge_prompt_tokens(config, case, answer), JUDGE_ANSWER_TOKENS)
        basis = f"no earlier run scored by judge v{config.number}: the size of its prompt (worked examples included)"
        low, high = PROMPT_RANGE
        share = REASK_GUESS
        reask_basis = "no earlier run by this judge, so half the results are assumed near it (none to all)"
        # From no result near the line to every one, at the prompt estimate's own range.
        reask_low, reask_high = 0.0, PROMPT_RANGE[1] / REASK_GUESS
    model = config.judge_model
    parts = [_priced(Part("Judge", results, *split, model=model, basis=basis, low=low, high=high))]
    if resamples:
        calls = round(results * share * resamples)
        basis = f"up to {resamples} per result near the line; {reask_basis}"
        reask = Part("Judge re-asks", calls, *split, model=model, basis=basis, low=reask_low, high=reask_high)
        parts.append(_priced(reask))
    return parts


def _judge_prompt_tokens(config: JudgeConfig, case: _Case, answer: int) -> int:
    template = config.prompt_template or judging.prompt_template(config.settings, offline=False)
    fixed = template.replace("{question}", "").replace("{answer}", "").replace("{expected_answer}", "")
    return round(len(fixed) / CHARS_PER_TOKEN + case.question + answer + case.expected)


def _simulator_part(dataset: Dataset, version: AgentVersion | None, case: _Case, repeats: int) -> Part:
    conversations = case.scenarios * repeats
    model = llm.model_for("llm") or ""
    history = _simulator_history(dataset, version)
    if history:
        per = round(history["tokens"])
        part = Part("User simulator", conversations, per, 0, model=model, low=HISTORY_RANGE[0], high=HISTORY_RANGE[1])
        part.basis = (
            f"tokens per conversation from the {_runs(history['runs'])} of this dataset with this agent version"
        )
        # Priced as prompt tokens: the simulator reads more than it writes.
        return _priced(part)
    prompt, answer = SIMULATOR_TURN_TOKENS
    part = Part("User simulator", conversations * case.max_turns, prompt, answer, model=model)
    part.basis = f"no earlier scenario run: up to {case.max_turns} user messages per conversation"
    return _priced(part)


def _priced(part: Part) -> Part:
    one = llm.price(part.model, part.prompt_tokens, part.completion_tokens)
    part.cost = None if one is None else one * part.calls
    return part


def _runs(count: int) -> str:
    return f"{count} latest run{'s' if count != 1 else ''}"


def _history_runs(runs: Any) -> list[int]:
    """The latest runs that ran all their cases: a stopped run's results are a biased sample."""
    finished = runs.filter(status=Run.Status.COMPLETED, completed__gt=0).exclude(purpose=Run.Purpose.RESCORE)
    return list(finished.order_by("-id").values_list("id", flat=True)[:HISTORY_RUNS])


def _agent_history(dataset: Dataset, version: AgentVersion | None) -> dict[str, Any] | None:
    """Mean agent tokens and duration per result over the latest runs of this dataset and version."""
    if version is None:
        return None
    run_ids = _history_runs(dataset.runs.filter(agent_version=version))
    if not run_ids:
        return None
    figures = Result.objects.filter(status__in=JUDGED, run_id__in=run_ids).aggregate(
        agent=Avg("agent_tokens"), duration=Avg("duration_ms"), results=Count("id")
    )
    if not figures["results"]:
        return None
    return {**figures, "runs": len(run_ids)}


def _judge_history(config: JudgeConfig) -> dict[str, Any] | None:
    """This configuration's judge calls: tokens, calls and re-asked results over its latest runs
    (re-scores included: their judge calls are the same calls)."""
    runs = Run.objects.filter(judge_config=config, status=Run.Status.COMPLETED, completed__gt=0)
    run_ids = list(runs.order_by("-id").values_list("id", flat=True)[:HISTORY_RUNS])
    rows = list(
        Result.objects.filter(status__in=JUDGED, run_id__in=run_ids, judge_tokens__gt=0).values_list(
            "judge_tokens", "judge_samples"
        )[:HISTORY_RESULTS]
    )
    if not rows:
        return None
    calls = [max(1, len(_samples(samples))) for _, samples in rows]
    return {
        "runs": len(run_ids),
        "results": len(rows),
        "tokens": sum(tokens for tokens, _ in rows),
        "calls": sum(calls),
        "reasked": sum(1 for count in calls if count > 1),
    }


def _samples(value: Any) -> list[Any]:
    if isinstance(value, str):  # a JSON column read raw on some backends
        value = json.loads(value or "[]")
    return list(value or [])


def _simulator_history(dataset: Dataset, version: AgentVersion | None) -> dict[str, Any] | None:
    if version is None:
        return None
    run_ids = _history_runs(dataset.runs.filter(agent_version=version))
    figures = Result.objects.filter(run_id__in=run_ids, simulator_tokens__gt=0).aggregate(
        tokens=Avg("simulator_tokens"), results=Count("id")
    )
    return {**figures, "runs": len(run_ids)} if figures["results"] else None


def _system_tokens(version: AgentVersion | None) -> float:
    if version is None:
        return 0
    text = "".join((version.instructions, version.skills, version.knowledge, version.guardrails))
    return len(text) / CHARS_PER_TOKEN


# ---- the team's monthly budget ----------------------------------------------------------

MONTHLY_WARNING = 0.8  # the share of the monthly budget at which the pages warn


@dataclass
class MonthlyBudget:
    budget: Decimal
    spent: Decimal

    @property
    def share(self) -> float:
        return float(self.spent / self.budget) if self.budget else 1.0

    @property
    def warning(self) -> bool:
        return self.share >= MONTHLY_WARNING

    @property
    def reached(self) -> bool:
        return self.spent >= self.budget


def team_month_budget(*, team: Team, now: datetime | None = None) -> MonthlyBudget | None:
    """What the team's runs recorded this calendar month (agent + judge), against its budget."""
    if team.monthly_budget is None:
        return None
    local = timezone.localtime(now or timezone.now())
    start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    spent = Run.objects.filter(agent__team=team, created_at__gte=start).aggregate(
        agent=Sum("agent_cost", default=Decimal(0)), judge=Sum("judge_cost", default=Decimal(0))
    )
    return MonthlyBudget(budget=team.monthly_budget, spent=spent["agent"] + spent["judge"])
