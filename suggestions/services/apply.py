"""Applying suggestions: the Apply dialog's edits, the new agent version, and the change
request of agents configured elsewhere."""

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from agents.models import Agent, AgentVersion
from agents.services import agent_update
from evalsite.text import cut
from runs.models import Run
from suggestions.affected import run_expected_answers, version_text
from suggestions.leaks import text_leaks
from suggestions.models import Suggestion
from suggestions.selectors import suggestion_apply_blocker

EDITABLE_FIELDS = ("instructions", "skills", "knowledge", "guardrails")


@dataclass
class SuggestionEdit:
    """A suggestion as the user left it in the Apply dialog."""

    id: int
    title: str
    category: str
    description: str


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
    agent = run.agent
    if blocker := suggestion_apply_blocker(agent=agent):
        raise ValidationError(blocker)
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError(f"These fields cannot be changed here: {', '.join(sorted(unknown))}.")
    if not suggestions:
        raise ValidationError("Select at least one suggestion to apply.")
    _refuse_leaks(run=run, fields=fields, base=base_version or agent.current_version)
    titles = "; ".join(s.title for s in suggestions)
    note = cut(f"Applied {len(suggestions)} suggestion(s) from run #{run.pk}: {titles}", 300)
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


def _refuse_leaks(*, run: Run, fields: dict[str, str], base: AgentVersion | None) -> None:
    """Refuse text that would teach the agent its test: a copy of an expected answer of the run's
    dataset, or a description of expected behaviour, that the agent did not have before."""
    answers, known = run_expected_answers(run), version_text(base)
    problems = [
        f"The {name}: {leak.reason}."
        for name, text in fields.items()
        for leak in text_leaks(text, answers=answers, known=known)
    ]
    if problems:
        raise ValidationError(
            "This text would teach the agent its own test, so Verify could no longer tell whether it improved. "
            + " ".join(problems[:5])
            + " Take it out, or state the fact in the knowledge's own words."
        )


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
