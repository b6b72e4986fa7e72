"""Template tags the result cards use to show reviews (runs' templates load them; runs' Python
never imports reviews). They format, they do not query: they read what the cards' prefetch
loaded (runs.selectors.CARD_PREFETCHES, filled by reviews/hooks.py). Figures that need queries
are a view's: reviews:run_figures and reviews:agent_panel, loaded into the run and agent pages."""

from __future__ import annotations

from typing import Any

from django import template

from reviews.agreement import reviewer_agreement
from runs.templatetags.runs_tags import card_url, score

register = template.Library()


@register.simple_tag(takes_context=True)
def review_control(context: template.Context, result: Any, case: Any) -> dict[str, Any]:
    """What one review control shows, computed once in Python (the run page has up to a page of
    them): the reviews, the user's own, whether reviewers disagree, what of the case changed
    since the run, and the forms' URLs. Context: agent, run, user."""
    agent, run = context["agent"], context["run"]
    reviews = list(result.reviews.all())
    mine = review_by(result, context.get("user"))
    override = mine is not None and not mine.agrees
    verdicts = [review.passed for review in reviews]
    figures = reviewer_agreement([verdicts])
    linked = bool(case.source_case_id and run.dataset_id)
    return {
        "reviews": reviews,
        "agreed": mine is not None and mine.agrees,
        "override": override,
        "override_pass": override and mine.passed,
        "override_fail": override and not mine.passed,
        "my_score": score(mine.score) if mine is not None and mine.score is not None else "",
        "note": mine.note if mine is not None else "",
        "disagree": figures.pairs > figures.agreed,
        "changes": case_changes(case),
        "action": card_url("reviews:review", agent.pk, run.pk, result.pk),
        "correct_action": card_url("reviews:case_correct", agent.pk, run.pk, result.pk),
        "case_url": card_url("datasets:case_edit", agent.pk, run.dataset_id, case.source_case_id) if linked else "",
        "correctable": linked and case.source_case is not None,
    }


@register.filter
def review_by(result: Any, user: Any) -> Any:
    """The user's review of the result, from its prefetched reviews."""
    if result is None or not getattr(user, "is_authenticated", False):
        return None
    return next((review for review in result.reviews.all() if review.reviewer_id == user.pk), None)


@register.filter
def reviewers_disagree(result: Any) -> bool:
    verdicts = [review.passed for review in result.reviews.all()] if result is not None else []
    figures = reviewer_agreement([verdicts])
    return figures.pairs > figures.agreed


@register.filter
def case_changes(case: Any) -> list[str]:
    """What of the dataset's case changed after the run took its copy (from the prefetched source case)."""
    source = case.source_case if case is not None and case.source_case_id else None
    if source is None:
        return []
    changed = []
    if source.expected_answer != case.expected_answer:
        changed.append("expected answer")
    if source.judge_guideline != (case.data.get("judge_guideline") or ""):
        changed.append("judge guideline")
    return changed
