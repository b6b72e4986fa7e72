"""Which of the agent's rules a dataset tests: rules, the case-to-rule map, and the AI map job.

Rules come from agents.rules (sentences and list items, ids stable across versions) or,
once a model has mapped the dataset for that version, from its testable statements.
Cases map to rules by word overlap (`lexical_links`, no model): a rule is exercised by a
case that shares at least half of the rule's content words (two at least), or that names
the rule it tests (generated cases record it in `tests_rule`). With a model, the map job
asks which rules each case exercises (`rule_map_execute`, a worker task; never inside a
request). The coverage page with the verdicts is runs.reports.coverage (runs may read datasets).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents.models import AgentVersion
from agents.rules import SECTIONS, AgentRule, rule_id, rules_split
from datasets.models import Dataset, RuleMap, TestCase
from evalsite import llm
from evalsite.text import content_terms

logger = logging.getLogger(__name__)

MIN_SHARE = 0.5  # of the rule's content words found in the case
MIN_SHARED_WORDS = 2
MAP_BATCH = 20  # cases per model request
MAX_RULES_FOR_MODEL = 120
SECTION_LETTERS = {section: letter for _, section, letter in SECTIONS}


@dataclass
class Coverage:
    """The rules of a version and the cases that exercise each, for one dataset."""

    rules: list[AgentRule]
    links: dict[int, list[str]]  # case pk -> rule ids, best first
    method: str  # "words" or "model"
    rule_map: RuleMap | None = None
    cases_by_rule: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for case_pk, ids in self.links.items():
            for identifier in ids:
                self.cases_by_rule.setdefault(identifier, []).append(case_pk)

    @property
    def by_id(self) -> dict[str, AgentRule]:
        return {rule.id: rule for rule in self.rules}


def coverage_for(*, dataset: Dataset, version: AgentVersion, cases: Iterable[TestCase] | None = None) -> Coverage:
    """The dataset's coverage of `version`: the model's map when one finished, else word overlap.

    A dataset from datasets.selectors.dataset_get says whether it has a finished map at all
    (`has_rule_map`), which saves the dataset page a query when it has none."""
    cases = list(cases if cases is not None else dataset.cases.all())
    mapped = getattr(dataset, "has_rule_map", True)
    rule_map = latest_rule_map(dataset=dataset, version=version, done=True, adopted=True) if mapped else None
    if rule_map is None:
        rules = rules_split(version)
        return Coverage(rules=rules, links=lexical_links(cases, rules), method="words")
    rules = [AgentRule(**rule) for rule in rule_map.rules]
    mapped = {int(pk): ids for pk, ids in rule_map.links.items()}
    # Cases added after the map was made are matched by their words until it is made again.
    newer = [case for case in cases if case.pk not in mapped]
    links = {case.pk: mapped[case.pk] for case in cases if case.pk in mapped} | lexical_links(newer, rules)
    return Coverage(rules=rules, links=links, method="model", rule_map=rule_map)


def latest_rule_map(
    *, dataset: Dataset, version: AgentVersion, done: bool = False, adopted: bool = False
) -> RuleMap | None:
    """The newest map of (dataset, version); with done, the newest finished one; with adopted,
    the newest finished one in use (not a proposal waiting beside the word map)."""
    maps = RuleMap.objects.filter(dataset=dataset, version=version)
    if done or adopted:
        maps = maps.filter(status=RuleMap.Status.DONE)
    if adopted:
        maps = maps.filter(adopted=True)
    return maps.order_by("-created_at", "-id").first()


def case_text(case: TestCase) -> str:
    turns = " ".join(str(turn.get("user", "")) for turn in case.turns or [] if isinstance(turn, dict))
    return " ".join((turns, case.question, case.expected_answer, case.judge_guideline, case.tests_rule))


def lexical_links(cases: Iterable[TestCase], rules: list[AgentRule]) -> dict[int, list[str]]:
    """case pk -> ids of the rules it exercises by word overlap (or by naming them), best first."""
    rule_terms = [(rule, set(content_terms(rule.text))) for rule in rules]
    links: dict[int, list[str]] = {}
    for case in cases:
        terms = set(content_terms(case_text(case)))
        cited = " ".join(case.tests_rule.split()).lower()
        scored: list[tuple[float, str]] = []
        for rule, wanted in rule_terms:
            if cited and " ".join(rule.text.split()).lower() in cited:
                scored.append((2.0, rule.id))
                continue
            if not wanted:
                continue
            shared = len(wanted & terms)
            share = shared / len(wanted)
            if share >= MIN_SHARE and shared >= min(MIN_SHARED_WORDS, len(wanted)):
                scored.append((share, rule.id))
        links[case.pk] = [identifier for _, identifier in sorted(scored, key=lambda item: -item[0])]
    return links


# ---- the AI map job ----------------------------------------------------------------------

RULES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rules": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"section": {"type": "string"}, "text": {"type": "string"}},
                "required": ["section", "text"],
            },
        }
    },
    "required": ["rules"],
}
LINKS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cases": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"case": {"type": "integer"}, "rules": {"type": "array", "items": {"type": "string"}}},
                "required": ["case", "rules"],
            },
        }
    },
    "required": ["cases"],
}
REPHRASE_PROMPT = (
    "You turn an AI agent's configuration into atomic, testable rules. Merge sentences that state one rule, "
    "split sentences that state several, and rephrase each as one statement a test can check "
    '("The agent refuses to share card numbers."). Keep every fact and number. Keep each rule\'s section '
    "(Instructions, Skills, Guardrails or Knowledge). Reply with JSON only."
)
MAP_PROMPT = (
    "You map test cases to the rules of an AI agent that they exercise. For each case, list the ids of the "
    "rules whose behaviour the case checks (none if it checks no rule). Use only the ids given. Reply with JSON only."
)


def rule_map_start(*, dataset: Dataset, version: AgentVersion, user: User) -> RuleMap:
    """Queue a model map of the dataset's cases to the version's rules; the job starts after commit."""
    if not llm.is_configured("llm"):
        raise ValidationError("Mapping with AI needs a model, and none is configured. The word-overlap map is shown.")
    if version.agent_id != dataset.agent_id:
        raise ValidationError("Choose a version of this dataset's agent.")
    if not dataset.cases.exists():
        raise ValidationError("The dataset has no test cases to map yet.")
    pending = RuleMap.objects.filter(
        dataset=dataset, version=version, status__in=(RuleMap.Status.QUEUED, RuleMap.Status.RUNNING)
    ).first()
    if pending is not None:
        return pending
    with transaction.atomic():
        rule_map = RuleMap.objects.create(dataset=dataset, version=version, created_by=user)
        transaction.on_commit(lambda: _enqueue(rule_map.pk), robust=True)
    return rule_map


def _enqueue(map_id: int) -> None:
    from datasets.tasks import dataset_rule_map as dataset_rule_map_task

    dataset_rule_map_task.delay(map_id)


def rule_map_execute(*, map_id: int) -> None:
    """The map job: rephrase the rules, then map the cases in batches; one write at the end."""
    claimed = RuleMap.objects.filter(pk=map_id, status=RuleMap.Status.QUEUED).update(status=RuleMap.Status.RUNNING)
    if not claimed:
        return
    rule_map = RuleMap.objects.select_related("dataset__agent", "version").get(pk=map_id)
    spent = _Spent()
    cases = list(rule_map.dataset.cases.all())
    try:
        rules = _rephrased_rules(rule_map.version, spent, {"rule_map": map_id})
        links = _model_links(cases, rules, spent, {"rule_map": map_id})
    except llm.LLMError as error:
        rule_map_fail(map_id=map_id, reason=f"The model could not map the cases. {error.message}")
        return
    tied = _tied(links, rules, cases, rules_split(rule_map.version))
    RuleMap.objects.filter(pk=map_id, status=RuleMap.Status.RUNNING).update(
        status=RuleMap.Status.DONE,
        rules=[{"id": r.id, "section": r.section, "text": r.text, "topic": r.topic} for r in rules],
        links={str(pk): ids for pk, ids in links.items()},
        tied=tied,
        # A map that ties fewer rules than plain word overlap is likely a weak model's (issue 33:
        # 0 of 39 against 10 of 39): it waits beside the word map instead of replacing it.
        adopted=tied["model"] >= tied["words"],
        tokens=spent.tokens,
        cost=Decimal(str(round(spent.cost, 6))),
        finished_at=timezone.now(),
    )


def _tied(
    links: dict[int, list[str]], rules: list[AgentRule], cases: list[TestCase], sentences: list[AgentRule]
) -> dict[str, int]:
    """How many rules have a case, by the model's map and by the word map of the same cases."""
    by_model = {identifier for ids in links.values() for identifier in ids}
    by_words = {identifier for ids in lexical_links(cases, sentences).values() for identifier in ids}
    return {
        "model": len(by_model & {rule.id for rule in rules}),
        "model_rules": len(rules),
        "words": len(by_words),
        "word_rules": len(sentences),
    }


def rule_map_adopt(*, rule_map: RuleMap) -> RuleMap:
    """Use a finished map that was kept as a proposal (the person chose it over the word map)."""
    if rule_map.status != RuleMap.Status.DONE:
        raise ValidationError("Only a finished map can be used.")
    RuleMap.objects.filter(pk=rule_map.pk).update(adopted=True)
    rule_map.adopted = True
    return rule_map


def rule_map_fail(*, map_id: int, reason: str) -> None:
    RuleMap.objects.filter(pk=map_id, status__in=(RuleMap.Status.QUEUED, RuleMap.Status.RUNNING)).update(
        status=RuleMap.Status.FAILED, error=reason[:2000], finished_at=timezone.now()
    )


@dataclass
class _Spent:
    tokens: int = 0
    cost: float = 0.0

    def add(self, result: llm.LLMResult) -> None:
        self.tokens += result.prompt_tokens + result.completion_tokens
        self.cost += result.cost


def _rephrased_rules(version: AgentVersion, spent: _Spent, trace: dict[str, Any]) -> list[AgentRule]:
    sentences = rules_split(version)[:MAX_RULES_FOR_MODEL]
    if not sentences:
        return []
    listing = "\n".join(f"- ({rule.section}) {rule.text}" for rule in sentences)
    answer = llm.complete_json(
        [{"role": "system", "content": REPHRASE_PROMPT}, {"role": "user", "content": f"The rules:\n{listing}"}],
        schema=RULES_SCHEMA,
        task="coverage",
        trace=trace,
    )
    spent.add(answer)
    assert answer.data is not None
    rules: list[AgentRule] = []
    seen: set[str] = set()
    for raw in answer.data.get("rules") or []:
        section = str(raw.get("section") or "").strip().title()
        text = " ".join(str(raw.get("text") or "").split())[:600]
        letter = SECTION_LETTERS.get(section)
        if letter is None or len(text.split()) < 2:
            continue
        identifier = rule_id(letter, text)
        if identifier not in seen:
            seen.add(identifier)
            rules.append(AgentRule(id=identifier, section=section, text=text))
    return rules or sentences  # a model that returns nothing usable leaves the sentences


def _model_links(
    cases: list[TestCase], rules: list[AgentRule], spent: _Spent, trace: dict[str, Any]
) -> dict[int, list[str]]:
    known = {rule.id for rule in rules}
    listing = "\n".join(f"{rule.id}: ({rule.section}) {rule.text}" for rule in rules)
    links: dict[int, list[str]] = {case.pk: [] for case in cases}
    for start in range(0, len(cases), MAP_BATCH):
        batch = cases[start : start + MAP_BATCH]
        shown = "\n".join(f"Case {number}: {case_text(case)[:800]}" for number, case in enumerate(batch, start=1))
        answer = llm.complete_json(
            [
                {"role": "system", "content": MAP_PROMPT},
                {"role": "user", "content": f"Rules:\n{listing}\n\nTest cases:\n{shown}"},
            ],
            schema=LINKS_SCHEMA,
            task="coverage",
            trace=trace,
        )
        spent.add(answer)
        assert answer.data is not None
        for item in answer.data.get("cases") or []:
            number = item.get("case")
            if isinstance(number, int) and 1 <= number <= len(batch):
                ids = [str(i) for i in item.get("rules") or [] if str(i) in known]
                links[batch[number - 1].pk] = list(dict.fromkeys(ids))
    return links


def rule_map_reap() -> int:
    """Fail maps no worker finished within the job time limit (killed worker, lost message)."""
    limit = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    stale = RuleMap.objects.filter(
        status__in=(RuleMap.Status.QUEUED, RuleMap.Status.RUNNING), created_at__lt=limit
    ).values_list("pk", flat=True)
    count = 0
    for map_id in list(stale):
        rule_map_fail(map_id=map_id, reason="The worker stopped before the map was finished. Map again.")
        count += 1
    return count


MAX_CHIPS = 4


def rule_chips_attach(*, dataset: Dataset, version: AgentVersion | None, page: Any) -> None:
    """Give each case of a page of the dataset `rule_chips`: the rules of `version` it tests (a few)."""
    if version is None:
        return
    page.object_list = list(page.object_list)
    if not page.object_list:
        return
    coverage = coverage_for(dataset=dataset, version=version, cases=page.object_list)
    by_id = coverage.by_id
    for case in page.object_list:
        case.rule_chips = [by_id[i] for i in coverage.links.get(case.pk, [])[:MAX_CHIPS] if i in by_id]
