"""Suggested changes: learn from a run's weak results, then apply chosen ones to the agent."""

import logging
import random
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Agent, AgentVersion
from evalsite import llm
from evalsite.text import content_tokens, is_refusal, key_points, point_covered
from runs.models import Result, Run, RunCase
from suggestions.models import Suggestion, SuggestionGeneration

logger = logging.getLogger(__name__)

MAX_SUGGESTIONS = 10
# Weak results shown to the model; more adds cost without adding new lessons.
MAX_RESULTS_IN_PROMPT = 25
PASSING_AVERAGE = 7.0
EDITABLE_FIELDS = ("instructions", "skills", "knowledge", "guardrails")
# A job queued or running this long was lost (its task outlives the hard time limit, 960 s):
# the page offers to try again instead of showing "generating" forever.
GENERATION_STALE_AFTER = timedelta(minutes=20)
# A job whose worker died this many times (OOM, kill -9) fails instead of being redelivered forever.
GENERATION_MAX_ATTEMPTS = 3
GENERATION_INTERNAL_ERROR = "An internal error stopped the suggestions. The details are in the worker log."

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
REWRITE_SCHEMA = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "minLength": 1}},
    "additionalProperties": False,
}
# A rewrite keeping less than this share of a field's text removed most of it: refused, not reviewed.
REWRITE_MIN_KEPT = 0.5
REWRITE_GUARD_FROM_CHARS = 80


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


def generation_is_stale(generation: SuggestionGeneration) -> bool:
    return generation.is_active and generation.queued_at < timezone.now() - GENERATION_STALE_AFTER


def suggestion_generation_start(*, run: Run, user: User | None = None) -> SuggestionGeneration:
    """Queue the suggestion job of a completed run: called when the run finishes, and by the
    "Suggest changes" button. Idempotent: a job that is queued, running or done is returned
    as it is; only a failed, lost or empty one is queued again."""
    if run.status != Run.Status.COMPLETED:
        raise ValidationError("Suggestions come from completed runs.")
    if not run_needs_suggestions(run):
        raise ValidationError("Every case passed with a good average score: there is nothing to suggest.")
    now = timezone.now()
    with transaction.atomic():
        generation, created = SuggestionGeneration.objects.select_for_update().get_or_create(
            run=run, defaults={"queued_at": now, "requested_by": _user_or_none(user)}
        )
        if not created:
            if run.suggestions.exists():
                return generation
            retry = (
                generation.status == SuggestionGeneration.Status.FAILED
                or generation_is_stale(generation)
                # "Try again" on a job that found nothing; the run's own finish never repeats one.
                or (generation.status == SuggestionGeneration.Status.DONE and user is not None)
            )
            if not retry:
                return generation
            generation.status, generation.error, generation.attempts = SuggestionGeneration.Status.QUEUED, "", 0
            generation.queued_at, generation.started_at, generation.finished_at = now, None, None
            generation.requested_by = _user_or_none(user)
            generation.save()
        transaction.on_commit(lambda: _enqueue_generation(run.pk), robust=True)
    return generation


def _enqueue_generation(run_id: int) -> None:
    from suggestions.tasks import suggestion_generate as suggestion_generate_task

    suggestion_generate_task.delay(run_id=run_id)


def _user_or_none(user: User | None) -> User | None:
    return user if user is not None and user.is_authenticated else None


def suggestion_generate(*, run_id: int) -> list[Suggestion]:
    """Propose changes for a completed run with failures or a weak average. Idempotent per run."""
    run = Run.objects.select_related("agent_version", "agent").get(pk=run_id)
    if not run_needs_suggestions(run) or run.suggestions.exists():
        _generation_settle(run, SuggestionGeneration.Status.DONE)
        return list(run.suggestions.all())
    offline = not llm.is_configured("llm")
    if _generation_claim(run, offline=offline) > GENERATION_MAX_ATTEMPTS:
        message = (
            f"The suggestion job stopped {GENERATION_MAX_ATTEMPTS} times (its worker was killed or ran out of memory)."
        )
        _generation_settle(run, SuggestionGeneration.Status.FAILED, message)
        return []
    results = _weak_results(run)
    notes: list[str] = []
    try:
        proposals = _proposals_offline(run, results, notes) if offline else _proposals_from_model(run, results)
    except DatabaseError:
        raise  # the task retries database errors; the job stays running meanwhile
    except llm.LLMError as error:
        _generation_settle(
            run, SuggestionGeneration.Status.FAILED, f"The model could not suggest changes: {error.message}"
        )
        raise
    except Exception:
        logger.exception("Suggestions for run %s failed unexpectedly", run.pk)
        _generation_settle(run, SuggestionGeneration.Status.FAILED, GENERATION_INTERNAL_ERROR)
        raise
    proposals = _merge_similar(proposals)[:MAX_SUGGESTIONS]
    cases_by_position = {case.position: case for case in RunCase.objects.filter(run=run)}
    with transaction.atomic():
        # The job row serialises two copies of the task (a redelivery): the second finds the first's rows.
        SuggestionGeneration.objects.select_for_update().filter(run=run).first()
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
        SuggestionGeneration.objects.filter(run=run).update(notes=notes)
        _generation_settle(run, SuggestionGeneration.Status.DONE)
    return created


def _generation_claim(run: Run, *, offline: bool) -> int:
    """Mark the job running (creating it when the service is called directly); returns its attempt number."""
    now = timezone.now()
    claimed = SuggestionGeneration.objects.filter(run=run).update(
        status=SuggestionGeneration.Status.RUNNING,
        started_at=now,
        offline=offline,
        error="",
        attempts=F("attempts") + 1,
    )
    if not claimed:
        SuggestionGeneration.objects.get_or_create(
            run=run,
            defaults={"status": SuggestionGeneration.Status.RUNNING, "queued_at": now, "started_at": now,
                      "offline": offline, "attempts": 1},
        )  # fmt: skip
    return SuggestionGeneration.objects.filter(run=run).values_list("attempts", flat=True).first() or 1


def _generation_settle(run: Run, status: str, error: str = "") -> None:
    SuggestionGeneration.objects.filter(run=run).update(status=status, error=error, finished_at=timezone.now())


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
    unique: list[Result] = []
    for result in weak:
        if result.case_id not in seen:
            seen.add(result.case_id)
            unique.append(result)
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


def _proposals_offline(run: Run, results: list[Result], notes: list[str]) -> list[dict]:
    """Without a model: propose the expected answers' facts that the agent's answers missed.

    Facts the version's knowledge already states are left out: adding them again would not
    help (the agent has them and did not find them), only duplicate them. A case whose
    expected answer is a refusal has no fact to add: it is skipped, with a note saying why.
    """
    knowledge = run.agent_version.knowledge
    proposals = []
    for result in results:
        if is_refusal(result.case.expected_answer):
            notes.append(
                f"Case #{result.case.display_number} was skipped: its expected answer is a refusal "
                f"(“{_cut(result.case.expected_answer.strip(), 160)}”), so it has no fact to add to the knowledge. "
                "Check how the instructions or guardrails tell the agent to decline."
            )
            continue
        missed = [
            p
            for p in key_points(result.case.expected_answer)
            if not point_covered(p, result.actual_answer) and not point_covered(p, knowledge)
        ]
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
        preview[field] = (current, suggestion_field_rewrite(run=run, field=field, current=current, group=group))
    return preview


def suggestion_field_rewrite(*, run: Run, field: str, current: str, group: list[Suggestion]) -> str:
    """One field rewritten for review; with a model, only from a job (suggestions/rewrite.py)."""
    if not llm.is_configured("llm"):
        # Offline: add each suggestion's concrete text (or its description) as a new paragraph.
        additions = [s.proposed_text.strip() or s.description.strip() for s in group]
        return "\n\n".join(part for part in [current.strip(), *additions] if part)
    changes = "\n\n".join(f"- {s.title}: {s.description}\n  Text to add: {s.proposed_text}" for s in group)
    system = (
        f"You edit the {field} section of an AI agent's configuration. Rewrite it so that it takes in "
        "the requested changes. Keep everything that is still right, keep its style, do not add "
        'unrelated content. Answer with a JSON object whose only key "text" holds the whole rewritten section.'
    )
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Current {field}:\n{current}\n\nChanges to make:\n{changes}"},
    ]
    text = llm.complete_json(messages, schema=REWRITE_SCHEMA, task="rewrite", trace={"run": run.pk}).data["text"]
    _rewrite_check(field, current, text, system)
    return text


def _rewrite_check(field: str, current: str, text: str, instructions: str) -> None:
    """Refuse a rewrite that would lose the field instead of editing it, before anyone reviews it."""
    new, old = text.strip(), current.strip()
    if len(new) < 40 and new.lower().strip(' ."') in instructions.lower():
        raise ValidationError(
            f"The model returned its instructions' own wording instead of a rewritten {field} (“{new}”). "
            "Nothing was changed: try again, or edit the text yourself."
        )
    if len(old) >= REWRITE_GUARD_FROM_CHARS and len(new) < len(old) * REWRITE_MIN_KEPT:
        raise ValidationError(
            f"The model's rewrite of the {field} would remove most of it ({len(new):,} of {len(old):,} characters "
            "left). Nothing was changed: try again, or edit the text yourself."
        )


def suggestion_apply(
    *,
    run: Run,
    user: User | None,
    suggestions: list[Suggestion],
    fields: dict[str, str],
    base_version: AgentVersion | None = None,
) -> AgentVersion:
    """Make a new agent version from the final texts the user confirmed, and mark the suggestions applied.

    `base_version` is the version the user previewed against: if someone saved the agent
    since, applying would silently drop their change, so it is refused instead.
    """
    from agents.services import agent_update

    agent = run.agent
    if agent.kind == Agent.Kind.HTTP:
        raise ValidationError("HTTP agents are configured elsewhere: download the change request instead.")
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError(f"These fields cannot be changed here: {', '.join(sorted(unknown))}.")
    if not suggestions:
        raise ValidationError("Select at least one suggestion to apply.")
    titles = "; ".join(s.title for s in suggestions)
    note = _cut(f"Applied {len(suggestions)} suggestion(s) from run #{run.pk}: {titles}", 300)
    with transaction.atomic():
        before = Agent.objects.select_for_update().values_list("current_version_id", flat=True).get(pk=agent.pk)
        if base_version is not None and before != base_version.pk:
            raise ValidationError(
                "The agent's configuration changed since this preview was made. Preview the changes again."
            )
        applied = Suggestion.objects.filter(pk__in=[s.pk for s in suggestions], state=Suggestion.State.APPLIED)
        if applied.exists():
            raise ValidationError(f"Already applied: {', '.join(applied.values_list('title', flat=True))}.")
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
        cases = ", ".join(f"#{case.display_number}" for case in suggestion.cases.all())
        lines += [f"## {number}. {suggestion.title}", "", f"**Category:** {suggestion.get_category_display()}", ""]
        lines += [suggestion.description, ""]
        if suggestion.proposed_text:
            lines += ["Proposed text:", "", *[f"> {line}" for line in suggestion.proposed_text.splitlines()], ""]
        if cases:
            lines += [f"Motivating cases: {cases}", ""]
    return "\n".join(lines)


def run_verify(
    *,
    parent: Run,
    user: User | None,
    version: AgentVersion,
    sample_passing: int | None = None,
    request_key: str = "",
) -> Run:
    """Re-run the parent's case snapshot against `version` (a new run, purpose "verify").

    All cases, or (cheaper) the cases that did not pass plus a random sample of
    `sample_passing` passing ones, to catch regressions without paying for every case.
    """
    from runs.services import run_rerun

    if parent.is_active:
        raise ValidationError("Wait for the run to finish before verifying a change against it.")
    if version.agent_id != parent.agent_id:
        raise ValidationError("That version belongs to another agent.")
    outcomes = case_outcomes(run=parent)
    if sample_passing is None:
        positions = sorted(parent.cases.values_list("position", flat=True))
    else:
        if sample_passing < 0:
            raise ValidationError("The number of passing cases to sample cannot be negative.")
        failing = [p for p, outcome in outcomes.items() if outcome != Result.Status.PASS]
        passing = [p for p, outcome in outcomes.items() if outcome == Result.Status.PASS]
        positions = sorted(failing + random.sample(passing, min(sample_passing, len(passing))))
    if not positions:
        raise ValidationError(
            "There are no cases to verify: this run has no failing cases and no passing ones were sampled."
        )
    return run_rerun(
        run=parent, user=user, request_key=request_key, version=version, purpose=Run.Purpose.VERIFY, positions=positions
    )


def case_outcomes(*, run: Run) -> dict[int, str]:
    """Each scored case's outcome by position: pass only when every repeat passed, else fail or error.

    Smoke-test variants are left out (they measure robustness, not the case), as are cases
    with no finished result (skipped by Stop, or still running).
    """
    outcomes: dict[int, str] = {}
    rows = Result.objects.filter(run=run, variant=0, status__in=Result.FINISHED_STATUSES).values_list(
        "case__position", "status"
    )
    rank: dict[str, int] = {Result.Status.PASS: 0, Result.Status.FAIL: 1, Result.Status.ERROR: 2}
    for position, status in rows:
        if position not in outcomes or rank[status] > rank[outcomes[position]]:
            outcomes[position] = status
    return outcomes
