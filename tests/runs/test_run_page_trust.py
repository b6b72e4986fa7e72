"""The run page names what its figures leave out: results that need a judge model, judge answers
that were unusable, answers cut at their token limit, and a judge that failed preflight."""

import re

import pytest
from django.urls import reverse

from runs.models import Run
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db
BEHAVIOUR = "Agent explains monthly plans are refundable within 14 days; directs them to Billing > Refund"
UNUSABLE = "The reasoning is the schema's placeholder text: <2-4 short sentences>."


def _url(run, name="runs:detail"):
    return reverse(name, args=[run.agent_id, run.pk])


def _card(body, position):
    return re.search(rf'<li id="case-{position}".*?</li>\s*(?=<li id="case-|</ol>|$)', body, re.S).group(0)


@pytest.fixture
def trust_run(agent):
    dataset = DatasetFactory(agent=agent, name="Refund plan")
    cut = [{"call": "agent", "limit": 256}]
    return build_run(
        agent=agent,
        dataset=dataset,
        cases=[
            CaseSpec(repeats=[("pass", 9.0)]),
            CaseSpec(expected=BEHAVIOUR, repeats=[("abstained", None)]),
            CaseSpec(expected=BEHAVIOUR, repeats=[("abstained", None)], cut=cut),
            CaseSpec(repeats=[("error", None)], error_kind="judge_unusable", error=UNUSABLE),
            CaseSpec(repeats=[("fail", 3.0)], cut=cut),
        ],
    )


def test_the_summary_counts_abstentions_apart_from_the_pass_rate(client_alice, trust_run):
    body = client_alice.get(_url(trust_run)).content.decode()
    assert re.search(r"<dt[^>]*>Need a judge model</dt><dd[^>]*>2</dd>", body)
    assert "2 need a judge model" in body
    assert "left out of the pass rate" in body and "EVALSITE_JUDGE_MODEL" in body
    assert trust_run.pass_rate == 1 / 3  # 1 passed of pass, fail and error: the 2 abstentions are out


def test_cut_answers_and_unusable_judge_answers_are_counted(client_alice, trust_run):
    body = client_alice.get(_url(trust_run)).content.decode()
    assert "2 agent answers were cut at 256 tokens" in body
    assert "EVALSITE_LLM_MAX_TOKENS_AGENT" in body
    assert "1 judge answer unusable" in body


def test_cards_show_a_neutral_badge_the_cut_mark_and_the_unusable_reason(client_alice, trust_run):
    body = client_alice.get(_url(trust_run)).content.decode()
    abstained = _card(body, 1)
    assert 'class="result-card is-abstained"' in abstained
    assert '<span class="badge badge-abstained"' in abstained and "Needs a judge model" in abstained
    assert "badge-fail" not in abstained and "badge-pass" not in abstained
    assert "neither passed nor failed" in abstained
    assert "Answer cut at 256 tokens" in _card(body, 2) and "Answer cut at 256 tokens" in _card(body, 4)
    assert "badge-cut" not in _card(body, 0)
    unusable = _card(body, 3)
    assert "Judge answer unusable" in unusable
    assert "placeholder text: &lt;2-4 short sentences&gt;." in unusable  # the reason, escaped


def test_the_filter_shows_the_cases_that_need_a_judge(client_alice, trust_run):
    body = client_alice.get(_url(trust_run)).content.decode()
    assert re.search(r'filter-abstained".*?<span class="filter-count">2</span>', body, re.S)
    cards = client_alice.get(_url(trust_run, "runs:results"), {"filter": "abstained"}, HTTP_HX_REQUEST="true")
    cards = cards.content.decode()
    assert re.findall(r'<li id="case-(\d+)"', cards) == ["1", "2"]


def test_a_judged_run_has_no_judge_model_filter(client_alice, agent):
    run = build_run(agent=agent, cases=[CaseSpec(repeats=[("pass", 9.0)])])
    body = client_alice.get(_url(run)).content.decode()
    assert "filter-abstained" not in body and "need a judge model" not in body and "trust-notes" not in body


def test_a_run_whose_judge_failed_preflight_says_so_on_its_page_and_card(client_alice, agent):
    run = build_run(agent=agent, cases=[CaseSpec()], scorer=Run.Scorer.LLM, judge_failed_preflight=True)
    page = client_alice.get(_url(run)).content.decode()
    assert "The judge failed preflight: its scores are not trustworthy." in page
    runs_list = client_alice.get(reverse("runs:list", args=[agent.pk])).content.decode()
    assert "Judge failed preflight" in runs_list


def test_a_comparison_leaves_abstained_cases_out_and_names_them(agent):
    from runs.comparing.comparison import run_compare

    dataset = DatasetFactory(agent=agent, name="Plan")
    a = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(), CaseSpec(repeats=[("fail", 2.0)])])
    b = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(), CaseSpec(repeats=[("abstained", None)])])
    comparison = run_compare(a=a, b=b)
    assert [row.change for row in comparison.rows] == ["same", "unscored"]
    assert (comparison.totals_b.scored, comparison.totals_b.abstained) == (1, 1)
    assert comparison.totals_b.pass_rate == 1.0
    assert any(delta.label == "Need a judge model" for delta in comparison.deltas)


def test_the_review_line_of_an_abstained_card_is_no_error(client_alice, trust_run):
    body = client_alice.get(_url(trust_run)).content.decode()
    review = re.search(r'<section class="review".*?</section>', _card(body, 1), re.S).group(0)
    assert "No verdict: needs a judge model" in review and "badge-error" not in review
    assert "Answer unusable" in _card(body, 3)


def test_a_reviewer_can_give_the_verdict_an_abstention_lacks_but_not_agree_with_it(trust_run, alice):
    from django.core.exceptions import ValidationError

    from reviews.services import review_save

    result = trust_run.results.get(case__position=1)
    review = review_save(result=result, reviewer=alice, agrees=False, passed=True)
    assert review.passed is True
    with pytest.raises(ValidationError, match="gave no verdict here"):
        review_save(result=result, reviewer=alice, agrees=True)


def test_the_runs_list_counts_the_cases_that_need_a_judge(client_alice, trust_run):
    body = client_alice.get(reverse("runs:list", args=[trust_run.agent_id])).content.decode()
    assert re.search(r"<dt>Need a judge</dt><dd[^>]*>2</dd>", body)
    assert "Judge failed preflight" not in body


def test_the_review_figures_leave_abstentions_out_until_a_person_judges_them(trust_run, alice):
    from reviews.selectors import run_review_figures
    from reviews.services import review_save

    figures = run_review_figures(run=trust_run)
    assert (figures.judge_passed, figures.judge_counted, figures.abstained) == (1, 3, 2)
    assert (figures.reviewed_passed, figures.reviewed_counted) == (1, 3)
    review_save(result=trust_run.results.get(case__position=1), reviewer=alice, agrees=False, passed=True)
    figures = run_review_figures(run=trust_run)
    assert (figures.judge_passed, figures.judge_counted) == (1, 3)  # the judge's figure never changes
    assert (figures.reviewed_passed, figures.reviewed_counted) == (2, 4)
