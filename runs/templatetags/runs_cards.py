"""The body of a result card (what shows when a card is opened: the meta line, the question,
the expected and actual answers, the scorer's reasoning, the scorers, the tool calls, the
attempts and the variants), written in Python for the run page (issue 20).

A page has up to a page of cards, and the template engine spends 5 µs or so per node: this body
was half of a card's cost in templates/runs/partials/result_card.html (~100 nodes a card). Here
it is one tag, a few µs per section. The markup is the template's, to the byte (after the card's
{% spaceless %}); every value from the dataset, the agent or the judge goes through escape().
A scenario's chat and the judge's samples keep their templates (result_scenario.html,
result_judge.html): rendered only for the cards that have them.

Context: run, card (runs.selectors.CaseCard); the included templates read the rest of it.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.defaultfilters import linebreaksbr
from django.utils.html import conditional_escape as esc
from django.utils.safestring import SafeString, mark_safe

from runs.templatetags.runs_tags import compact_json, millis, score, scorer_value

register = template.Library()

OFFLINE = "offline"


def _get(mapping: dict[str, Any], key: str) -> Any:
    """mapping.key as a template reads it: "" when the key is missing."""
    return mapping.get(key, "")


@register.simple_tag(takes_context=True)
def card_body(context: template.Context, card: Any) -> SafeString:
    run = context["run"]
    outcome, case, primary = card.outcome, card.case, card.primary
    out: list[str] = ['<div class="result-body" hx-disable>', _meta(run, card)]
    for check in card.failed_checks:
        label = esc(_get(check, "label") or _get(check, "name"))
        scored = ""
        if outcome.score is not None and outcome.score >= run.pass_threshold:
            scored = f", although the answer scored {score(outcome.score)}/10"
        out.append(
            f'<div class="result-error result-check" role="note"><strong>Failed on the {label} check</strong>'
            f"{scored}: {esc(_get(check, 'detail'))}</div>"
        )
    if outcome.status == "skipped":
        out.append(f'<p class="result-question-inline">{esc(case.question)}</p>')
        out.append(f'<p class="small muted">{esc((primary.error if primary else "") or "Not run.")}</p>')
    else:
        out.append(_earlier_turns(card))
        if card.is_scenario:
            out.append(_included(context, "runs/partials/result_scenario.html"))
        else:
            out.append(_answers(case, primary))
        if primary.reasoning:
            out.append(_reasoning(run, primary))
        if run.judge_config or primary.judge_samples:
            out.append(_included(context, "runs/partials/result_judge.html"))
        if primary.scorers:
            out.append(_scorers(primary.scorers))
        expected_tools = case.data.get("expected_tools")
        if primary.tool_calls or expected_tools:
            out.append(_tool_calls(primary.tool_calls, expected_tools, case.data.get("trajectory_mode")))
        if card.repeated:
            out.append(_attempts(card))
        if card.variants:
            out.append(_variants(card))
    out.append("</div>")
    return mark_safe("".join(out))


def _included(context: template.Context, name: str) -> str:
    """A section that keeps its template, rendered like {% include %} (the card's names are in the context)."""
    assert context.template is not None  # set while a template renders
    return str(context.template.engine.get_template(name).render(context))


def _meta(run: Any, card: Any) -> str:
    outcome, case, primary = card.outcome, card.case, card.primary
    parts = [
        '<div class="result-meta small">',
        f'<a class="result-link" href="#case-{case.position}" title="Link to this case">#{outcome.number}</a>',
    ]
    if case.case_id:
        parts.append(f'<span class="chip chip-id" title="Case id">{esc(case.case_id)}</span>')
    parts += [f'<span class="chip chip-tag">{esc(tag)}</span>' for tag in card.tags]
    if primary and primary.verdict and card.single and outcome.status != "skipped":
        title = "Offline reference scorer" if run.scorer == OFFLINE else "LLM judge"
        parts.append(f'<span class="result-verdict" title="{title}">{esc(primary.verdict)}</span>')
    parts.append("</div>")
    return "".join(parts)


def _earlier_turns(card: Any) -> str:
    turns = card.earlier_turns
    if not turns:
        return ""
    items = "".join(
        f'<li class="turn turn-{esc(_get(message, "role"))}"><span class="turn-role">'
        f"{'User' if message.get('role') == 'user' else 'Agent'}</span>"
        f'<div class="turn-text">{esc(_get(message, "content"))}</div></li>'
        for message in turns
    )
    return (
        '<div class="result-block"><h4>Conversation before the last question</h4>'
        f'<ol class="transcript">{items}</ol></div>'
    )


def _answers(case: Any, primary: Any) -> str:
    question = esc(primary.question or case.question)
    expected: str
    if case.expected_answer:
        expected = esc(case.expected_answer)
    else:
        expected = '<span class="muted">None given: judged against the criteria.</span>'
    if primary.status == "error":
        actual = f'<div class="result-error" role="note"><strong>Error:</strong> {esc(primary.error)}</div>'
        if primary.actual_answer:
            actual += f'<div class="textblock result-actual">{esc(primary.actual_answer)}</div>'
    else:
        answer = esc(primary.actual_answer) if primary.actual_answer else '<span class="muted">(empty answer)</span>'
        actual = f'<div class="textblock result-actual">{answer}</div>'
    return (
        '<div class="result-qa">'
        f'<div class="result-block"><h4>Question</h4><div class="textblock result-question">{question}</div></div>'
        '<div class="result-block"><h4>Expected answer</h4>'
        f'<div class="textblock result-expected">{expected}</div></div>'
        f'<div class="result-block"><h4>Actual answer</h4>{actual}</div>'
        "</div>"
    )


def _reasoning(run: Any, primary: Any) -> str:
    if run.scorer == OFFLINE:
        label = '<span class="scorer-label scorer-offline">Offline reference scorer</span>'
    else:
        model = f" · {esc(run.judge_model)}" if run.judge_model else ""
        label = f'<span class="scorer-label">LLM judge{model}</span>'
    return (
        f'<div class="result-block result-reasoning"><h4>Scorer reasoning {label}</h4>'
        f"<p>{linebreaksbr(primary.reasoning, autoescape=True)}</p></div>"
    )


def _scorers(rows: list[dict[str, Any]]) -> str:
    body = []
    for row in rows:
        value = row.get("score")
        meter = ""
        if value is not None:
            width = _percent_width(value)
            meter = f'<span class="meter" aria-hidden="true"><span style="width: {width}%"></span></span>'
        passed = row.get("passed")
        badge = (
            '<span class="badge badge-pass">match</span>'
            if passed is True
            else '<span class="badge badge-fail">no match</span>'
            if passed is False
            else ""
        )
        figure = scorer_value(row)
        body.append(
            f'<tr><th scope="row">{esc(_get(row, "label") or _get(row, "name"))}</th>'
            f'<td class="scorer-figure">{meter}<span>{figure}</span></td>'
            f'<td>{badge}</td><td class="scorer-detail">{esc(_get(row, "detail"))}</td></tr>'
        )
    rows_html = "".join(body)
    table = f'<table class="scorer-table"><tbody>{rows_html}</tbody></table>'
    return f'<div class="result-block"><h4>Scorers</h4>{table}</div>'


def _percent_width(value: Any) -> str:
    """{% widthratio value 1 100 %}."""
    try:
        return str(round(float(value) * 100))
    except (ValueError, TypeError, OverflowError):
        return ""


def _tool_calls(calls: list[dict[str, Any]], expected: list[dict[str, Any]] | None, mode: str | None) -> str:
    head = "Tool calls"
    if expected:
        names = " → ".join(esc(_get(tool, "name")) for tool in expected)
        head += f' <span class="muted small">(expected: {names}, {esc(mode or "strict")})</span>'
    if calls:
        items = "".join(
            f'<li><code class="tool-call"><span class="tool-name">{esc(_get(call, "name"))}</span>('
            + (f'<span class="tool-args">{esc(compact_json(_get(call, "args")))}</span>' if _get(call, "args") else "")
            + ")</code></li>"
            for call in calls
        )
        listing = f'<ol class="tool-calls">{items}</ol>'
    else:
        listing = '<p class="small muted">The agent called no tool.</p>'
    return f'<div class="result-block"><h4>{head}</h4>{listing}</div>'


def _attempts(card: Any) -> str:
    spread = f" · score spread {score(card.spread)}" if card.spread is not None else ""
    rows = "".join(
        f"<tr><td>{attempt.repeat + 1}</td>"
        f'<td><span class="badge badge-{esc(attempt.status)}">{esc(attempt.get_status_display())}</span></td>'
        f"<td>{score(attempt.score)}</td>"
        f'<td class="nowrap">{millis(attempt.duration_ms)}</td>'
        f'<td><div class="clamp">{esc(attempt.error) if attempt.error else esc(attempt.actual_answer)}</div></td></tr>'
        for attempt in card.attempts
    )
    return (
        '<div class="result-block"><h4>Attempts'
        f' <span class="muted small">· {len(card.attempts)} repeats{spread}</span></h4>'
        '<div class="table-wrap flat"><table class="table attempts-table"><thead><tr><th scope="col">#</th>'
        '<th scope="col">Status</th><th scope="col">Score</th><th scope="col">Time</th><th scope="col">Answer</th>'
        f"</tr></thead><tbody>{rows}</tbody></table></div></div>"
    )


def _variants(card: Any) -> str:
    rows = []
    for variant in card.variants:
        question = esc(variant.question) if variant.question else f'<span class="muted">{esc(variant.error)}</span>'
        error = f'<div class="small red-text">{esc(variant.error)}</div>' if variant.status == "error" else ""
        rows.append(
            f'<tr><td>{variant.variant}</td><td><div class="clamp">{question}</div>{error}</td>'
            f'<td><span class="badge badge-{esc(variant.status)}">{esc(variant.get_status_display())}</span></td>'
            f"<td>{score(variant.score)}</td></tr>"
        )
    return (
        '<div class="result-block"><h4>Smoke-test variants <span class="muted small">'
        f"· {card.variants_passed} of {card.variants_run} passed (not in the average)</span></h4>"
        '<div class="table-wrap flat"><table class="table attempts-table"><thead><tr><th scope="col">#</th>'
        '<th scope="col">Paraphrased question</th><th scope="col">Status</th><th scope="col">Score</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></div>"
    )
