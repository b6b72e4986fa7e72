"""Suggestion generation: learn from a completed run's weak results (with the model, or offline)."""

import logging
import re

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from datasets.generation.checks import copied_from, shown, text_problem
from evalsite import llm
from evalsite.text import content_tokens, cut, is_refusal, key_points, point_covered
from runs.models import Result, Run, RunCase
from suggestions.affected import run_expected_answers, version_text
from suggestions.leaks import Leak, describes_behaviour, sentences, text_leaks
from suggestions.models import Suggestion, SuggestionGeneration
from suggestions.selectors import generation_is_stale, run_needs_suggestions

logger = logging.getLogger(__name__)

MAX_SUGGESTIONS = 10
# Weak results shown to the model; more adds cost without adding new lessons.
MAX_RESULTS_IN_PROMPT = 25
# A title or description this long found word for word in the prompt is the model echoing it.
ECHO_MIN_WORDS = 3
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


def suggestion_generation_on_run_finished(run: Run) -> None:
    """The run-finished hook (runs/hooks.py), registered in SuggestionsConfig.ready(): queue the
    suggestion job of a run that needs one. Idempotent, as a hook must be. A re-score asked no
    agent anything: its suggestions would be those of the run it judged again."""
    if run.purpose != Run.Purpose.RESCORE and run_needs_suggestions(run):
        suggestion_generation_start(run=run)  # queues the suggestion task on commit


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
        proposals = _proposals_offline(run, results, notes) if offline else _proposals_from_model(run, results, notes)
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
    if not offline:
        proposals = _without_leaks(proposals, run=run, notes=notes)
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
                title=cut(proposal["title"], Suggestion.TITLE_MAX),
                category=_category(proposal["category"]),
                description=cut(proposal["description"], Suggestion.DESCRIPTION_MAX),
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
    threshold = run.pass_threshold
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


def _proposals_from_model(run: Run, results: list[Result], notes: list[str]) -> list[dict]:
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
                "Knowledge changes state each missing fact as a plain fact in the knowledge's own style. Never "
                "copy an expected answer into the agent, and never describe what the agent is expected to say "
                'or do in a test\'s words ("Agent explains...", "directs them to..."): that teaches the agent '
                "its test. "
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
    return _without_echoes(result.data["suggestions"], str(messages[0]["content"]), notes)


def _without_echoes(proposals: list[dict], prompt: str, notes: list[str]) -> list[dict]:
    """Drop proposals whose title or description is the prompt's own description of the field
    ("short imperative title"), or a placeholder: a weak model fills the shape with it (issue 33)."""
    kept = []
    for proposal in proposals:
        echoed = [
            text
            for text in (proposal["title"], proposal["description"])
            if copied_from(text, [prompt], min_words=ECHO_MIN_WORDS) or text_problem(text, question=False)
        ]
        if echoed:
            notes.append(
                f"A suggestion was dropped: the model answered {shown(echoed[0])}, the instructions' own "
                "description of the field, not a change to make."
            )
        else:
            kept.append(proposal)
    return kept


def _proposals_offline(run: Run, results: list[Result], notes: list[str]) -> list[dict]:
    """Without a model: propose the facts that factual expected answers state and the knowledge lacks.

    A fact the version's knowledge already states is left out: adding it again would not help
    (the agent has it and did not find it), only duplicate it. An expected answer that is a
    refusal or describes behaviour ("Agent explains...") has no fact to add, and a fact that is
    the expected answer itself would hand the agent its test (suggestions/leaks.py): each is
    skipped with a note saying why.
    """
    knowledge = run.agent_version.knowledge
    answers = run_expected_answers(run)
    proposals = []
    for result in results:
        case = result.case
        if result.status == Result.Status.ABSTAINED:
            notes.append(
                f"Case #{case.display_number} was skipped: the offline scorer could not check it (its expected "
                "answer describes behaviour, not facts), so there is no fact to take from it. A judge model can "
                "check it and suggest a change."
            )
            continue
        if skipped := _offline_skip_reason(case.expected_answer):
            notes.append(f"Case #{case.display_number} was skipped: {skipped}")
            continue
        missed = [
            _as_fact(point)
            for point in key_points(case.expected_answer)
            if not point_covered(point, result.actual_answer) and not point_covered(point, knowledge)
        ]
        if not missed:
            continue
        fact = " ".join(missed)
        if leaks := text_leaks(fact, answers=answers, known=version_text(run.agent_version)):
            notes.append(
                f"Case #{case.display_number} was skipped: the fact it lacks would be added word for word as "
                f"its test's answer ({leaks[0].reason}). Add the fact to the knowledge in your own words, "
                "then verify."
            )
            continue
        proposals.append(
            {
                "title": f"Add to knowledge: {cut(fact, 120)}",
                "category": Suggestion.Category.KNOWLEDGE,
                "description": (
                    f"Case #{case.display_number} asks “{cut(case.question, 300)}” and the agent's knowledge "
                    f"does not have the fact its expected answer states: {fact} Adding it lets the agent "
                    f"retrieve it. Source: the expected answer of case #{case.display_number}."
                ),
                "proposed_text": fact,
                "cases": [case.position],
            }
        )
    return proposals


def _offline_skip_reason(expected: str) -> str:
    quoted = f"(“{cut(expected.strip(), 160)}”)"
    if is_refusal(expected):
        return (
            f"its expected answer is a refusal {quoted}, so it has no fact to add to the knowledge. "
            "Check how the instructions or guardrails tell the agent to decline."
        )
    if phrase := describes_behaviour(expected):
        return (
            f"its expected answer describes what the agent should do (“{phrase}”) rather than a fact, so "
            "nothing from it can be added to the agent without teaching it the test. A judge model can "
            "check this case and suggest a change."
        )
    return ""


_FRAMING = re.compile(r"^(?:yes|no)\b[\s:,.;!-]*", re.IGNORECASE)


def _as_fact(point: str) -> str:
    """A key point worded as a fact: without the answer's "Yes:" or "No," in front."""
    fact = _FRAMING.sub("", point.strip()).strip()
    fact = fact[:1].upper() + fact[1:]
    return fact if fact.endswith((".", "!", "?")) else f"{fact}."


def _without_leaks(proposals: list[dict], *, run: Run, notes: list[str]) -> list[dict]:
    """A model's proposals without leaks: one that repeats an expected answer is dropped, and
    behaviour-describing sentences are taken out of a text to add (dropped when none is left)."""
    answers, known = run_expected_answers(run), version_text(run.agent_version)
    kept = []
    for proposal in proposals:
        title = cut(str(proposal.get("title", "")), 80)
        words = " ".join(str(proposal.get(key, "")) for key in ("title", "description", "proposed_text"))
        copies = [leak for leak in text_leaks(words, answers=answers, known=known) if leak.kind == Leak.ANSWER]
        if copies:
            notes.append(f"The model's suggestion “{title}” was left out: {copies[0].reason}.")
            continue
        text = str(proposal.get("proposed_text") or "")
        clean = [s for s in sentences(text) if not text_leaks(s, answers=(), known=known)]
        if len(clean) < len(sentences(text)):
            phrase = next(leak for s in sentences(text) for leak in text_leaks(s, answers=(), known=known))
            if not clean:
                notes.append(f"The model's suggestion “{title}” was left out: {phrase.reason}.")
                continue
            notes.append(f"From the model's suggestion “{title}”, text was taken out: {phrase.reason}.")
            proposal = {**proposal, "proposed_text": " ".join(clean)}
        kept.append(proposal)
    return kept


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
