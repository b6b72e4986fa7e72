"""Suggested changes: learn from a run's weak results, then apply chosen ones to the agent."""

import logging
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from agents.models import Agent, AgentVersion
from evalsite import llm
from evalsite.text import content_tokens, key_points, point_covered
from runs.models import Result, Run, RunCase
from suggestions.models import Suggestion

logger = logging.getLogger(__name__)

MAX_SUGGESTIONS = 10
# Weak results shown to the model; more adds cost without adding new lessons.
MAX_RESULTS_IN_PROMPT = 25
PASSING_AVERAGE = 7.0
EDITABLE_FIELDS = ("instructions", "skills", "knowledge", "guardrails")

SUGGESTIONS_SCHEMA = {
    "type": "object",
    "required": ["suggestions"],
    "properties": {
        "suggestions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["title", "category", "description"],
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "category": {"type": "string"},
                    "description": {"type": "string", "minLength": 1},
                    "proposed_text": {"type": "string"},
                    "cases": {"type": "array", "items": {"type": "integer"}},
                },
            },
        }
    },
}
REWRITE_SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}


@dataclass
class SuggestionEdit:
    """A suggestion as the user left it in the Apply dialog."""

    id: int
    title: str
    category: str
    description: str


def run_needs_suggestions(run: Run) -> bool:
    if run.status != Run.Status.COMPLETED:
        return False
    weak_average = run.average_score is not None and run.average_score < PASSING_AVERAGE
    return run.failed + run.errored > 0 or weak_average


def suggestion_generate(*, run_id: int) -> list[Suggestion]:
    """Propose changes for a completed run with failures or a weak average. Idempotent per run."""
    run = Run.objects.select_related("agent_version", "agent").get(pk=run_id)
    if not run_needs_suggestions(run) or run.suggestions.exists():
        return list(run.suggestions.all())
    results = _weak_results(run)
    if llm.is_configured("llm"):
        proposals, offline = _proposals_from_model(run, results), False
    else:
        proposals, offline = _proposals_offline(results), True
    proposals = _merge_similar(proposals)[:MAX_SUGGESTIONS]
    cases_by_position = {case.position: case for case in RunCase.objects.filter(run=run)}
    with transaction.atomic():
        if run.suggestions.exists():  # a concurrent job got here first
            return list(run.suggestions.all())
        created = []
        for position, proposal in enumerate(proposals):
            suggestion = Suggestion.objects.create(
                run=run,
                position=position,
                title=_cut(proposal["title"], Suggestion.TITLE_MAX),
                category=_category(proposal["category"]),
                description=_cut(proposal["description"], Suggestion.DESCRIPTION_MAX),
                proposed_text=proposal.get("proposed_text", ""),
                offline=offline,
            )
            cases = [cases_by_position[p] for p in proposal.get("cases", []) if p in cases_by_position]
            suggestion.cases.set(cases)
            created.append(suggestion)
    return created


def _weak_results(run: Run) -> list[Result]:
    threshold = run.scoring.get("pass_threshold", 7)
    results = (
        Result.objects.filter(run=run, variant=0)
        .exclude(status__in=[Result.Status.PENDING, Result.Status.RUNNING, Result.Status.SKIPPED])
        .select_related("case")
        .order_by("case__position", "repeat")
    )
    weak = [r for r in results if r.status != Result.Status.PASS or (r.score is not None and r.score < threshold)]
    # One result per case is enough to learn from; repeats say the same thing.
    seen: set[int] = set()
    unique = [r for r in weak if not (r.case_id in seen or seen.add(r.case_id))]
    return unique[:MAX_RESULTS_IN_PROMPT]


def _proposals_from_model(run: Run, results: list[Result]) -> list[dict]:
    version = run.agent_version
    cases = "\n\n".join(
        f"Case {r.case.position}:\nQuestion: {r.case.question}\nExpected: {r.case.expected_answer}\n"
        f"Actual: {r.actual_answer or '(no answer: ' + r.error + ')'}\n"
        f"Score: {r.score if r.score is not None else 'error'}/10\nJudge reasoning: {r.reasoning}\n"
        f"Tools called: {[call.get('name') for call in r.tool_calls] or 'none'}"
        for r in results
    )
    messages = [
        {
            "role": "system",
            "content": (
                "You improve AI agents from evaluation failures. Propose at most 10 concrete, distinct changes "
                "to the agent's configuration that would fix the failing cases without breaking others. "
                "Each change has a category: instructions, skills, knowledge, guardrails or other. "
                "Knowledge changes must state the missing facts exactly as the expected answers give them. "
                'Answer JSON: {"suggestions": [{"title": "short imperative title", "category": "...", '
                '"description": "what to change and why, citing the cases", "proposed_text": "text to add, '
                'if the change is an addition", "cases": [case numbers]}]}'
            ),
        },
        {
            "role": "user",
            "content": (
                f"Agent configuration:\n## Instructions\n{version.instructions}\n## Skills\n{version.skills}\n"
                f"## Knowledge\n{version.knowledge}\n## Guardrails\n{version.guardrails}\n\n"
                f"Failing or weak cases:\n\n{cases}"
            ),
        },
    ]
    result = llm.complete_json(messages, schema=SUGGESTIONS_SCHEMA, task="suggest", trace={"run": run.pk})
    return result.data["suggestions"]


def _proposals_offline(results: list[Result]) -> list[dict]:
    """Without a model: propose the expected answers' facts that the agent's answers missed."""
    proposals = []
    for result in results:
        missed = [p for p in key_points(result.case.expected_answer) if not point_covered(p, result.actual_answer)]
        if not missed:
            continue
        fact = " ".join(missed)
        proposals.append(
            {
                "title": f"Add to knowledge: {_cut(missed[0], 120)}",
                "category": Suggestion.Category.KNOWLEDGE,
                "description": (
                    f"The agent could not answer “{_cut(result.case.question, 300)}”. Its answer missed: "
                    f"{fact} Add this fact to the agent's knowledge so it can be retrieved."
                ),
                "proposed_text": fact,
                "cases": [result.case.position],
            }
        )
    return proposals


def _merge_similar(proposals: list[dict]) -> list[dict]:
    """Merge proposals of one category whose titles share most of their words."""
    merged: list[dict] = []
    for proposal in proposals:
        words = content_tokens(proposal["title"])
        for kept in merged:
            kept_words = content_tokens(kept["title"])
            overlap = len(words & kept_words) / max(1, len(words | kept_words))
            if _category(kept["category"]) == _category(proposal["category"]) and overlap >= 0.6:
                kept["description"] = f"{kept['description']}\n\n{proposal['description']}"
                if proposal.get("proposed_text") and proposal["proposed_text"] not in kept.get("proposed_text", ""):
                    kept["proposed_text"] = f"{kept.get('proposed_text', '')}\n{proposal['proposed_text']}".strip()
                kept["cases"] = sorted({*kept.get("cases", []), *proposal.get("cases", [])})
                break
        else:
            merged.append(dict(proposal))
    return merged


def _category(value: str) -> str:
    value = (value or "").strip().lower()
    return value if value in Suggestion.Category.values else Suggestion.Category.OTHER


def _cut(text: str, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def suggestion_edits_validate(*, run: Run, edits: list[SuggestionEdit]) -> list[Suggestion]:
    """Check the dialog's edits and save them onto the suggestions (which must belong to the run)."""
    if not edits:
        raise ValidationError("Select at least one suggestion to apply.")
    suggestions = {s.pk: s for s in run.suggestions.filter(pk__in=[e.id for e in edits])}
    if len(suggestions) != len(edits):
        raise ValidationError("One of the selected suggestions no longer exists. Reload the page.")
    applied = [s.title for s in suggestions.values() if s.state == Suggestion.State.APPLIED]
    if applied:
        raise ValidationError(f"Already applied: {', '.join(applied)}.")
    for edit in edits:
        if not edit.title.strip():
            raise ValidationError("Every selected suggestion needs a title.")
        if len(edit.title) > Suggestion.TITLE_MAX:
            raise ValidationError(f"Titles can be at most {Suggestion.TITLE_MAX} characters.")
        if len(edit.description) > Suggestion.DESCRIPTION_MAX:
            raise ValidationError(f"Descriptions can be at most {Suggestion.DESCRIPTION_MAX} characters.")
        if edit.category not in Suggestion.Category.values:
            raise ValidationError(f"Unknown category “{edit.category}”.")
        suggestion = suggestions[edit.id]
        suggestion.title, suggestion.category, suggestion.description = (
            edit.title.strip(),
            edit.category,
            edit.description.strip(),
        )
    Suggestion.objects.bulk_update(suggestions.values(), ["title", "category", "description"])
    return [suggestions[e.id] for e in edits]


def suggestion_rewrite_preview(*, run: Run, suggestions: list[Suggestion]) -> dict[str, tuple[str, str]]:
    """The agent's fields rewritten to take in the suggestions: {field: (current text, proposed text)}."""
    version = run.agent.current_version or run.agent_version
    by_field: dict[str, list[Suggestion]] = {}
    for suggestion in suggestions:
        by_field.setdefault(suggestion.target_field, []).append(suggestion)
    preview = {}
    for field, group in by_field.items():
        current = getattr(version, field)
        preview[field] = (current, _rewrite_field(run, field, current, group))
    return preview


def _rewrite_field(run: Run, field: str, current: str, group: list[Suggestion]) -> str:
    if not llm.is_configured("llm"):
        # Offline: add each suggestion's concrete text (or its description) as a new paragraph.
        additions = [s.proposed_text.strip() or s.description.strip() for s in group]
        return "\n\n".join(part for part in [current.strip(), *additions] if part)
    changes = "\n\n".join(f"- {s.title}: {s.description}\n  Text to add: {s.proposed_text}" for s in group)
    messages = [
        {
            "role": "system",
            "content": (
                f"You edit the {field} section of an AI agent's configuration. Rewrite it so that it takes in "
                "the requested changes. Keep everything that is still right, keep its style, do not add "
                'unrelated content. Answer JSON: {"text": "the complete new section"}'
            ),
        },
        {"role": "user", "content": f"Current {field}:\n{current}\n\nChanges to make:\n{changes}"},
    ]
    return llm.complete_json(messages, schema=REWRITE_SCHEMA, task="rewrite", trace={"run": run.pk}).data["text"]


def suggestion_apply(
    *, run: Run, user, suggestions: list[Suggestion], fields: dict[str, str]
) -> AgentVersion:
    """Make a new agent version from the final texts the user confirmed, and mark the suggestions applied."""
    from agents.services import agent_update

    agent = run.agent
    if agent.kind == Agent.Kind.HTTP:
        raise ValidationError("HTTP agents are configured elsewhere: download the change request instead.")
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError(f"These fields cannot be changed here: {', '.join(sorted(unknown))}.")
    titles = "; ".join(s.title for s in suggestions)
    note = _cut(f"Applied {len(suggestions)} suggestion(s) from run #{run.pk}: {titles}", 300)
    with transaction.atomic():
        before = agent.current_version_id
        version = agent_update(agent=agent, user=user, note=note, **fields).current_version
        if version is None or version.pk == before:
            raise ValidationError("The confirmed text is the same as the agent's current configuration.")
        Suggestion.objects.filter(pk__in=[s.pk for s in suggestions]).update(
            state=Suggestion.State.APPLIED, applied_version=version
        )
    return version


def suggestion_change_request(*, run: Run, suggestions: list[Suggestion]) -> str:
    """A Markdown change request for agents whose configuration lives outside Evalsite (http agents)."""
    lines = [
        f"# Change request for {run.agent.name}",
        "",
        f"From Evalsite run #{run.pk} of “{run.dataset_name}” (agent version {run.agent_version.number}): "
        f"{run.passed} passed, {run.failed} failed, {run.errored} errors"
        + (f", average score {run.average_score:.1f}/10." if run.average_score is not None else "."),
        "",
    ]
    for number, suggestion in enumerate(suggestions, start=1):
        cases = ", ".join(f"#{case.position + 1}" for case in suggestion.cases.all())
        lines += [f"## {number}. {suggestion.title}", "", f"**Category:** {suggestion.get_category_display()}", ""]
        lines += [suggestion.description, ""]
        if suggestion.proposed_text:
            lines += ["Proposed text:", "", *[f"> {line}" for line in suggestion.proposed_text.splitlines()], ""]
        if cases:
            lines += [f"Motivating cases: {cases}", ""]
    return "\n".join(lines)
