"""Before a run starts: what it will probably cost and take (the start dialog).

    results = cases x (repeats + smoke variants)
    calls   = results x agent call + results x judge call + variants x paraphrase call
    tokens  = per call, from earlier runs of the same dataset and agent version (their
              recorded tokens per result), else from the prompt length (4 characters a token)

priced with litellm's model prices (`evalsite.llm.price`, litellm.cost_per_token). The
result is a range: earlier runs give 0.75x-1.5x of their mean, prompt length (which
cannot know the answers' length) 0.5x-2x. A model litellm has no price for is named as
"unknown price" instead of counting as free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import Avg, Count, Q, Sum
from django.db.models.functions import Length
from django.utils import timezone

from accounts.models import Team
from agents.models import Agent, AgentVersion
from datasets.models import Dataset
from evalsite import llm
from runs.models import Result, Run
from runs.scoring import JUDGE_INSTRUCTIONS, JUDGE_RUBRIC

CHARS_PER_TOKEN = 4
JUDGE_ANSWER_TOKENS = 150  # a score and a few sentences of reasoning
PARAPHRASE_TOKENS = 60
HISTORY_RANGE = (0.75, 1.5)
PROMPT_RANGE = (0.5, 2.0)
# The earlier runs the figures come from (newest first).
HISTORY_RUNS = 5


@dataclass
class Part:
    """One kind of call: how many, tokens per call (prompt, answer), its model's price."""

    label: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    model: str = ""
    cost: float | None = 0.0  # USD for every call at the central estimate; None: unknown price

    @property
    def tokens(self) -> int:
        return self.calls * (self.prompt_tokens + self.completion_tokens)


@dataclass
class Estimate:
    cases: int
    results: int
    source: str  # "history" | "prompt"
    source_runs: int
    parts: list[Part] = field(default_factory=list)
    seconds: float | None = None  # central time estimate (None: no earlier run to time it by)
    factor_low: float = 1.0
    factor_high: float = 1.0

    @property
    def calls(self) -> int:
        return sum(part.calls for part in self.parts)

    @property
    def tokens_low(self) -> int:
        return round(sum(part.tokens for part in self.parts) * self.factor_low)

    @property
    def tokens_high(self) -> int:
        return round(sum(part.tokens for part in self.parts) * self.factor_high)

    @property
    def unpriced(self) -> list[str]:
        return sorted({part.model or part.label for part in self.parts if part.calls and part.cost is None})

    @property
    def cost_low(self) -> float:
        return sum(part.cost or 0.0 for part in self.parts) * self.factor_low

    @property
    def cost_high(self) -> float:
        return sum(part.cost or 0.0 for part in self.parts) * self.factor_high

    @property
    def seconds_range(self) -> tuple[float, float] | None:
        return None if self.seconds is None else (self.seconds * self.factor_low, self.seconds * self.factor_high)


def run_estimate(*, agent: Agent, dataset: Dataset, concurrency: int) -> Estimate:
    """The estimate of running `dataset` against the agent's current version now."""
    version = agent.current_version
    cases = dataset.cases.aggregate(
        count=Count("id"),
        smoke=Sum("smoke_count", default=0),
        question=Sum(Length("question"), default=0),
        expected=Sum(Length("expected_answer"), default=0),
    )
    count = cases["count"] or 0
    repeats = max(1, dataset.number_of_requests)
    variants = int(cases["smoke"] or 0) if llm.is_configured("llm") else 0
    results = count * repeats + variants
    history = _history(dataset, version)
    question = cases["question"] / count / CHARS_PER_TOKEN if count else 0
    expected = cases["expected"] / count / CHARS_PER_TOKEN if count else 0
    agent_prompt = round(_system_tokens(version) + question)
    judge_prompt = round((len(JUDGE_INSTRUCTIONS) + len(JUDGE_RUBRIC)) / CHARS_PER_TOKEN + question + 2 * expected)
    estimate = Estimate(cases=count, results=results, source="history" if history else "prompt", source_runs=0)
    if history:
        estimate.source_runs = int(history["runs"])
        estimate.factor_low, estimate.factor_high = HISTORY_RANGE
        # Recorded tokens per result are prompt + answer together; the prompt part is what
        # its length says, the rest is the answer (priced at the answer's rate).
        agent_total, judge_total = round(history["agent"] or 0), round(history["judge"] or 0)
        agent_split = (min(agent_prompt, agent_total), max(0, agent_total - agent_prompt))
        judge_split = (min(judge_prompt, judge_total), max(0, judge_total - judge_prompt))
        if history["duration"] is not None:
            estimate.seconds = results * history["duration"] / 1000 / max(1, concurrency)
    else:
        estimate.factor_low, estimate.factor_high = PROMPT_RANGE
        agent_split = (agent_prompt, round(expected) or 50)
        judge_split = (judge_prompt, JUDGE_ANSWER_TOKENS)
    estimate.parts = _parts(agent, version, dataset, results, variants, agent_split, judge_split, question)
    return estimate


def _parts(
    agent: Agent,
    version: AgentVersion | None,
    dataset: Dataset,
    results: int,
    variants: int,
    agent_split: tuple[int, int],
    judge_split: tuple[int, int],
    question: float,
) -> list[Part]:
    judge_model = llm.model_for("judge", dataset.judge_model or None) or ""
    parts = []
    if agent.kind == Agent.Kind.LLM:
        model = llm.model_for("llm", (version.model if version else "") or None) or ""
        parts.append(_priced(Part("Agent", results, *agent_split, model=model)))
    elif agent.kind == Agent.Kind.HTTP:
        # The team's own service answers: its price is its own (tokens as it reports them).
        parts.append(Part("Agent (your HTTP service)", results, *agent_split, cost=None))
    if judge_model:
        parts.append(_priced(Part("Judge", results, *judge_split, model=judge_model)))
    if variants:
        model = llm.model_for("llm") or ""
        parts.append(_priced(Part("Paraphrases", variants, round(question) + 80, PARAPHRASE_TOKENS, model=model)))
    return parts


def _priced(part: Part) -> Part:
    one = llm.price(part.model, part.prompt_tokens, part.completion_tokens)
    part.cost = None if one is None else one * part.calls
    return part


def _history(dataset: Dataset, version: AgentVersion | None) -> dict[str, float] | None:
    """Mean tokens and duration per result over the latest runs of this dataset and version."""
    if version is None:
        return None
    run_ids = list(
        dataset.runs.filter(agent_version=version, completed__gt=0)
        .order_by("-id")
        .values_list("id", flat=True)[:HISTORY_RUNS]
    )
    if not run_ids:
        return None
    finished = Q(status__in=(Result.Status.PASS, Result.Status.FAIL))
    figures = Result.objects.filter(finished, run_id__in=run_ids).aggregate(
        agent=Avg("agent_tokens"), judge=Avg("judge_tokens"), duration=Avg("duration_ms"), results=Count("id")
    )
    if not figures["results"]:
        return None
    return {**figures, "runs": len(run_ids)}


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
