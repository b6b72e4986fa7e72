"""The review control of one result (the judge's verdict, its reviews, agree / override, and
"the expected answer is wrong"), written in Python: the run page renders one per card, and as a
template (~35 nodes) it was a third of a card's cost (issue 20).

templates/reviews/partials/card_review.html calls it, so the result card, the review queue and
reviews:review (its htmx swap) render this one implementation. The markup is the template's it
replaced; where the template had whitespace between tags this writes a newline (the card's
{% spaceless %} drops it, elsewhere it renders as the space it was). Every value from the
dataset, the agent or a reviewer goes through escape().

Context: agent, run, user, csrf_token, next (where a plain post returns).
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.defaultfilters import date as date_filter
from django.template.defaultfilters import timesince_filter
from django.utils.formats import localize
from django.utils.html import conditional_escape as esc
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import template_localtime  # type: ignore[attr-defined]

from reviews.templatetags.reviews_tags import review_control as review_state
from runs.templatetags.runs_tags import score

register = template.Library()

_BADGE = {"pass": "Pass", "fail": "Fail"}


@register.simple_tag(takes_context=True)
def review_control_html(context: template.Context, result: Any, case: Any) -> SafeString:
    if not result or not result.is_finished:
        return mark_safe("")
    rc = review_state(context, result, case)
    pk, judged = result.pk, result.status
    token = context.get("csrf_token")
    csrf = ""
    if token and token != "NOTPROVIDED":  # what {% csrf_token %} writes
        csrf = f'<input type="hidden" name="csrfmiddlewaretoken" value="{esc(str(token))}">'
    hidden_next = f'<input type="hidden" name="next" value="{esc(str(context.get("next", "")))}">'
    target = f'hx-target="#review-{pk}" hx-swap="outerHTML"'
    action = esc(rc["action"])
    judge_badge = _BADGE.get(judged, "Error")
    out = [
        f'<section class="review" id="review-{pk}" data-review-control'
        f' aria-label="Review of case {case.display_number}">\n',
        '<div class="review-line">\n<span class="review-judge small">\n<span class="muted">Judge</span>\n',
        f'<span class="badge review-badge badge-{judged if judged in _BADGE else "error"}">{judge_badge}</span>\n',
    ]
    if result.score is not None:
        out.append(f"<span><strong>{score(result.score)}</strong>/10</span>\n")
    out.append('</span>\n<ul class="review-list small" aria-label="Reviews">\n')
    out += [_review_item(item) for item in rc["reviews"]] or ['<li class="muted">Not reviewed yet</li>\n']
    out.append("</ul>\n")
    if rc["disagree"]:
        out.append(
            '<span class="badge review-badge badge-flaky" title="Two or more reviewers gave different verdicts">'
            "Reviewers disagree</span>\n"
        )
    out.append('<div class="review-actions">\n')
    if judged in _BADGE:
        agreed = rc["agreed"]
        out.append(
            f'<form method="post" action="{action}" hx-post="{action}" {target} data-review-agree>\n'
            f'{csrf}<input type="hidden" name="verdict" value="agree">{hidden_next}\n'
            f'<button class="btn btn-sm{" is-chosen" if agreed else ""}" type="submit" aria-keyshortcuts="a"'
            f' title="Agree with the judge (a)">{"✓ Agreed" if agreed else "Agree"}'
            ' <kbd class="hide-sm">a</kbd></button>\n'
            "</form>\n"
        )
    out.append(
        '<div class="review-override">\n'
        f'<button class="btn btn-sm" type="button" data-review-toggle aria-controls="review-override-{pk}"'
        ' aria-expanded="true" aria-keyshortcuts="o" title="Override the verdict (o)">'
        f'{"Your override" if rc["override"] else "Override"} <kbd class="hide-sm">o</kbd></button>\n'
        f'<form class="review-form" id="review-override-{pk}" data-review-override data-review-panel method="post"'
        f' action="{action}" hx-post="{action}" {target}>\n'
        f"{csrf}{hidden_next}\n"
        '<fieldset class="review-verdict">\n<legend class="small">Your verdict</legend>\n'
        '<label><input type="radio" name="verdict" value="pass" required'
        f"{' checked' if rc['override_pass'] else ''}> Pass</label>\n"
        '<label><input type="radio" name="verdict" value="fail"'
        f"{' checked' if rc['override_fail'] else ''}> Fail</label>\n"
        "</fieldset>\n"
        '<label class="review-score small"><span>Score <span class="muted">(optional)</span></span>\n'
        '<input type="number" name="score" min="0" max="10" step="0.5" inputmode="decimal"'
        f' value="{rc["my_score"]}"></label>\n'
        '<label class="review-note-field small"><span>Note <span class="muted">(optional)</span></span>\n'
        f'<textarea name="note" rows="2" maxlength="2000">{esc(rc["note"])}</textarea></label>\n'
        '<div class="row"><button class="btn btn-sm btn-primary" type="submit">Save review</button></div>\n'
        "</form>\n</div>\n</div>\n</div>\n"
    )
    if rc["changes"]:
        link = f': <a href="{esc(rc["case_url"])}">see the case</a>' if rc["case_url"] else ""
        changed = " and ".join(esc(change) for change in rc["changes"])
        out.append(
            f'<p class="review-changed small" role="note">The dataset\'s {changed} changed after this run'
            f" (it kept its copy){link}.</p>\n"
        )
    if rc["correctable"]:
        out.append(_case_correction(rc, case, pk, csrf, hidden_next, target))
    out.append("</section>\n")
    return mark_safe("".join(out))


def _review_item(item: Any) -> str:
    if item.agrees:
        chip, said = "is-agree", "agrees"
    else:
        chip = "is-pass" if item.passed else "is-fail"
        verdict = "pass" if item.passed else "fail"
        figure = f" {score(item.score)}/10" if item.score is not None else ""
        said = f'says <span class="badge review-badge badge-{verdict}">{_BADGE[verdict]}</span>{figure}'
    note = f'<span class="review-note" hx-disable>“{esc(item.note)}”</span>\n' if item.note else ""
    when = item.updated_at
    stamp, shown = date_filter(template_localtime(when), "c"), localize(template_localtime(when))
    return (
        f'<li class="review-chip {chip}">\n<strong>{esc(item.reviewer.get_username())}</strong>\n{said}\n'
        f'<time class="muted" datetime="{esc(stamp)}" title="{esc(shown)}">'
        f"{esc(timesince_filter(when))} ago</time>\n{note}</li>\n"
    )


def _case_correction(rc: dict[str, Any], case: Any, pk: int, csrf: str, hidden_next: str, target: str) -> str:
    scenario = bool(case.data.get("scenario"))
    source = case.source_case
    action = esc(rc["correct_action"])
    if scenario:
        expected = f'<input type="hidden" name="expected_answer" value="{esc(source.expected_answer)}">'
    else:
        expected = (
            '<label class="small"><span>Expected answer</span>'
            f'<textarea name="expected_answer" rows="3">{esc(source.expected_answer)}</textarea></label>'
        )
    wrong = "The judge guideline is wrong" if scenario else "The expected answer is wrong"
    return (
        '<div class="review-case">\n'
        f'<button class="btn-link small" type="button" data-review-toggle aria-controls="review-case-{pk}"'
        f' aria-expanded="true">{wrong}</button>\n'
        f'<form class="review-form" id="review-case-{pk}" data-review-panel method="post" action="{action}"'
        f' hx-post="{action}" {target}>\n'
        f"{csrf}{hidden_next}\n"
        '<p class="small muted">Changes the case in the dataset (the next runs use it); this run keeps the answer'
        " it was judged against.</p>\n"
        f"{expected}\n"
        '<label class="small"><span>Judge guideline <span class="muted">(optional)</span></span>'
        f'<textarea name="judge_guideline" rows="2">{esc(source.judge_guideline)}</textarea></label>\n'
        '<div class="row"><button class="btn btn-sm" type="submit">Save to the dataset</button>'
        f' <a class="small" href="{esc(rc["case_url"])}">Open the case</a></div>\n'
        "</form>\n</div>\n"
    )
