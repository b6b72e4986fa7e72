"""The Apply dialog's step 1: each field the chosen suggestions aim at, rewritten to take them in."""

from django.core.exceptions import ValidationError

from evalsite import llm
from runs.models import Run
from suggestions.affected import knowledge_with_facts, run_expected_answers, version_text
from suggestions.leaks import sentences, text_leaks
from suggestions.models import Suggestion

REWRITE_SCHEMA = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "minLength": 1}},
    "additionalProperties": False,
}
# A rewrite keeping less than this share of a field's text removed most of it: refused, not reviewed.
REWRITE_MIN_KEPT = 0.5
REWRITE_GUARD_FROM_CHARS = 80


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
        return _offline_rewrite(run=run, field=field, current=current, group=group)
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
    result = llm.complete_json(messages, schema=REWRITE_SCHEMA, task="rewrite", trace={"run": run.pk})
    if result.truncated:
        # Complete JSON, but the model stopped at its limit: the text may end mid-sentence.
        raise ValidationError(
            f"The model's rewrite of the {field} was cut at its length limit of {result.max_tokens} tokens, so it "
            "may be missing its end. Nothing was changed: raise EVALSITE_LLM_MAX_TOKENS_REWRITE and try again, "
            "or edit the text yourself."
        )
    text = result.data["text"]
    _rewrite_check(field, current, text, system)
    return text


def _offline_rewrite(*, run: Run, field: str, current: str, group: list[Suggestion]) -> str:
    """Each suggestion's concrete text (or its description), less any sentence that would leak the
    test: knowledge facts join the passage their case retrieves, other fields get new paragraphs."""
    answers, known = run_expected_answers(run), version_text(run.agent.current_version or run.agent_version)
    additions = []
    for suggestion in group:
        text = suggestion.proposed_text.strip() or suggestion.description.strip()
        clean = " ".join(s for s in sentences(text) if not text_leaks(s, answers=answers, known=known))
        if clean:
            additions.append((clean, [case.question for case in suggestion.cases.all()]))
    if field == "knowledge":
        return knowledge_with_facts(current, additions)
    return "\n\n".join(part for part in [current.strip(), *(text for text, _ in additions)] if part)


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
