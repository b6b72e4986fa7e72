"""The run page: summary, result cards, filters and order, the live poll, Stop, and its query budget."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django_htmx.http import HTMX_STOP_POLLING

from runs import selectors, services
from runs.models import Result, Run
from tests.factories import DatasetFactory
from tests.runs.conftest import drive, execute_one
from tests.runs.review_helpers import XSS, CaseSpec, build_run, finish_case

pytestmark = pytest.mark.django_db


def _url(run, name="runs:detail"):
    return reverse(name, args=[run.agent_id, run.pk])


def _poll(client, run, **params):
    return client.get(_url(run), params, HTTP_HX_REQUEST="true")


def _seen(body: str) -> str:
    return re.search(r'<input id="live-seen" type="hidden" name="seen" value="([^"]*)"', body).group(1)


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent, name="Refund policy")


@pytest.fixture
def engine_run(make_dataset, agent, alice, no_llm):
    """A real run (offline scorer, knowledge agent) of 5 cases, nothing executed yet."""
    return services.run_start(agent=agent, dataset=make_dataset(5, agent=agent), user=alice)


def _execute_next(run):
    return execute_one(run)


# ---- the summary -------------------------------------------------------------------


def test_the_summary_shows_every_figure(client_alice, agent, dataset):
    run = build_run(
        agent=agent,
        dataset=dataset,
        cases=[
            CaseSpec(repeats=[("pass", 9.0)]),
            CaseSpec(repeats=[("fail", 3.0)]),
            CaseSpec(repeats=[("error", None)]),
        ],
    )
    Run.objects.filter(pk=run.pk).update(robustness=0.75, consistency=1.5, summary="The agent misses numbers.")

    body = client_alice.get(_url(run)).content.decode()

    assert 'class="badge badge-flaky"' in body and "Completed with errors" in body
    assert "3 of 3 finished" in body
    assert re.search(r"Passed</dt><dd class=\"green-text\">1<", body)
    assert re.search(r"Failed</dt><dd class=\"red-text\">1<", body)
    assert re.search(r"Errors</dt><dd class=\"red-text\">1<", body)
    assert '6<span class="run-stat-unit">/10</span>' in body  # (9 + 3) / 2
    assert "75%" in body  # robustness
    assert "±1.5" in body  # consistency
    assert '$0.0030 <span class="muted">agent</span>' in body
    assert '$0.0015 <span class="muted">judge</span>' in body
    assert "Duration</dt>" in body
    assert "version 1" in body
    assert "Offline reference scorer (no judge model)" in body
    assert "The agent misses numbers." in body


def test_an_llm_judged_run_names_its_judge(client_alice, agent, dataset):
    run = build_run(
        agent=agent, dataset=dataset, scorer=Run.Scorer.LLM, judge_model="openai/gpt-4o", cases=[CaseSpec()]
    )
    body = client_alice.get(_url(run)).content.decode()
    assert "<code>openai/gpt-4o</code>" in body
    assert "LLM judge · openai/gpt-4o" in body
    assert "Offline reference scorer (no judge model)" not in body


def test_a_run_without_a_summary_shows_why(client_alice, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    body = client_alice.get(_url(run)).content.decode()
    assert "No summary: no model is configured." in body


def test_a_failed_run_shows_its_error(client_alice, agent, dataset):
    run = build_run(
        agent=agent, dataset=dataset, status=Run.Status.FAILED, error="No knowledge to answer from.", cases=[]
    )
    body = client_alice.get(_url(run)).content.decode()
    assert "The run failed:</strong> No knowledge to answer from." in body


# ---- the cards ----------------------------------------------------------------------


def test_a_card_shows_everything_about_its_case(client_alice, agent, dataset):
    spec = CaseSpec(
        question="Which plan has SSO?",
        expected="Enterprise has single sign-on.",
        answer="Only Enterprise.",
        tags=["security"],
        case_id="SEC-7",
        data={
            "expected_tools": [{"name": "lookup_plan", "args": {}}],
            "documents": [{"id": 99, "name": "plans.pdf", "file_type": "pdf"}],
        },
    )
    run = build_run(agent=agent, dataset=dataset, cases=[spec])
    Result.objects.filter(run=run).update(tool_calls=[{"name": "lookup_plan", "args": {"plan": "enterprise"}}])

    body = client_alice.get(_url(run)).content.decode()
    card = body[body.index('<li id="case-0"') :]

    assert '<span class="badge badge-pass">Pass</span>' in card
    assert "Score: </span><strong>9</strong>/10" in card
    assert "400 ms" in card
    assert "Which plan has SSO?" in card
    assert '<div class="textblock result-expected">Enterprise has single sign-on.</div>' in card
    assert "Only Enterprise." in card
    assert "Offline reference scorer: 1 of 1 key points covered." in card
    assert "ROUGE-L" in card and "50%" in card
    assert (
        '<span class="tool-name">lookup_plan</span>(<span class="tool-args">plan=&quot;enterprise&quot;</span>)' in card
    )
    assert "SEC-7" in card and "security" in card
    assert "plans.pdf" in card
    assert reverse("datasets:document_preview", args=[agent.pk, dataset.pk, 99]) in card
    assert 'href="#case-0"' in card


def test_an_error_card_shows_the_error_message(client_alice, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(repeats=[("error", None)])])
    body = client_alice.get(_url(run)).content.decode()
    assert '<span class="badge badge-error">Error</span>' in body
    assert "The agent timed out after 30 s." in body


def test_repeats_show_as_attempts_with_their_consistency(client_alice, agent, dataset):
    run = build_run(
        agent=agent, dataset=dataset, cases=[CaseSpec(repeats=[("pass", 9.0), ("fail", 5.0), ("pass", 8.0)])]
    )
    card = client_alice.get(_url(run)).content.decode()
    assert "3 repeats" in card
    assert "score spread 4" in card
    assert 'class="badge badge-flaky"' in card and ">Flaky<" in card
    assert "Score: </span><strong>7.3</strong>/10" in card  # mean of the attempts
    assert '<span class="badge badge-fail">Fail</span>' in card  # one attempt failed: the case did not pass


def test_smoke_variants_show_on_the_card(client_alice, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(variants=[("pass", 8.0), ("fail", 2.0)])])
    body = client_alice.get(_url(run)).content.decode()
    assert "Smoke-test variants" in body
    assert "1 of 2 passed" in body
    assert "Paraphrase 2: How long is the refund window?" in body


def test_agent_answers_and_questions_are_shown_as_text(client_alice, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(question=XSS, answer=XSS, expected=XSS, tags=[XSS])])
    Result.objects.filter(run=run).update(reasoning=XSS)
    for response in (client_alice.get(_url(run)), _poll(client_alice, run)):
        body = response.content.decode()
        assert "<script>alert" not in body
        assert "<img src=x" not in body
        assert 'hx-get="/accounts/logout/"' not in body
    body = client_alice.get(_url(run)).content.decode()
    assert body.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 3
    assert "{{ 7*7 }}" in body
    assert re.search(r'<div class="result-body" hx-disable>', body)


# ---- filters, order, pages -----------------------------------------------------------


@pytest.fixture
def mixed_run(agent, dataset):
    return build_run(
        agent=agent,
        dataset=dataset,
        scoring={"number_of_requests": 2},
        cases=[
            CaseSpec(question="Q passed", repeats=[("pass", 9.0), ("pass", 10.0)]),
            CaseSpec(question="Q failed", repeats=[("fail", 2.0), ("fail", 3.0)]),
            CaseSpec(question="Q errored", repeats=[("error", None), ("error", None)]),
            CaseSpec(question="Q flaky", repeats=[("pass", 8.0), ("fail", 4.0)]),
        ],
    )


@pytest.mark.parametrize(
    "name, shown",
    [
        ("all", {"Q passed", "Q failed", "Q errored", "Q flaky"}),
        ("passed", {"Q passed"}),
        ("failed", {"Q failed", "Q flaky"}),
        ("error", {"Q errored"}),
        ("flaky", {"Q flaky"}),
        ("not_run", set()),
    ],
)
def test_filters_pick_the_cases(client_alice, mixed_run, name, shown):
    body = client_alice.get(_url(mixed_run), {"filter": name}).content.decode()
    found = {q for q in ("Q passed", "Q failed", "Q errored", "Q flaky") if f">{q}</div>" in body}
    assert found == shown


def test_filter_pills_show_counts(client_alice, mixed_run):
    body = client_alice.get(_url(mixed_run)).content.decode()
    counts = dict(re.findall(r'filter-pill filter-(\w+)".*?<span class="filter-count">(\d+)</span>', body, re.S))
    assert counts == {"all": "4", "passed": "1", "failed": "2", "error": "1", "not_run": "0", "flaky": "1"}
    # Flaky within the run (its repeats disagree), told apart from the "Flaky · flipped" badge across runs.
    assert re.search(r'filter-flaky"[^>]*title="[^"]*repeats[^"]*"[^>]*>Flaky repeats <span', body)


def test_a_not_run_pill_picks_the_cases_a_stopped_run_never_ran(client_alice, agent, dataset):
    run = build_run(
        agent=agent,
        dataset=dataset,
        status=Run.Status.STOPPED,
        cases=[CaseSpec(question="Q ran"), CaseSpec(question="Q never ran", repeats=[("skipped", None)])],
    )
    body = client_alice.get(_url(run)).content.decode()
    pills = re.findall(r'filter-pill filter-(\w+)"', body)
    assert pills == ["all", "passed", "failed", "error", "not_run", "flaky"]
    assert re.search(r'filter-not_run".*?>Not run <span class="filter-count">1</span>', body, re.S)
    shown = client_alice.get(_url(run), {"filter": "not_run"}).content.decode()
    assert '-line">Q never ran</span>' in shown and '-line">Q ran</span>' not in shown
    by_score = client_alice.get(_url(run), {"filter": "not_run", "sort": "score"}).content.decode()
    assert '-line">Q never ran</span>' in by_score


# ---- cards collapse to one line -------------------------------------------------------------


def test_cards_are_one_line_until_opened_and_expand_all_is_in_the_url(client_alice, mixed_run):
    body = client_alice.get(_url(mixed_run)).content.decode()
    card = body[body.index('<li id="case-0"') : body.index("</li>", body.index('<li id="case-0"'))]
    summary = card[card.index("<summary") : card.index("</summary>")]
    # The line: number, badge, score and the question; the rest is inside the <details>.
    assert '<details class="result-details">' in card
    assert "Case 1" in summary and "badge-pass" in summary and "Score: </span><strong>9.5</strong>/10" in summary
    assert '<span class="result-line" id="case-0-line">Q passed</span>' in summary
    assert "Expected answer" not in summary
    expand = f"{_url(mixed_run)}?expand=1#results"
    assert f'href="{expand}"' in body and ">Expand all</a>" in body

    opened = client_alice.get(_url(mixed_run), {"expand": "1", "filter": "failed"}).content.decode()
    assert opened.count('<details class="result-details" open>') == 2
    assert ">Collapse all</a>" in opened
    # Filters, order and the live poll keep the state.
    assert f'href="{_url(mixed_run)}?filter=passed&amp;expand=1#results"' in opened
    assert '<input type="hidden" name="expand" value="1">' in opened


def test_the_results_view_pushes_the_expanded_state_into_the_address(client_alice, mixed_run):
    response = client_alice.get(
        _url(mixed_run, "runs:results"), {"filter": "failed", "expand": "1"}, HTTP_HX_REQUEST="true"
    )
    assert response["HX-Push-Url"] == f"{_url(mixed_run)}?filter=failed&expand=1"
    assert response.content.decode().count('<details class="result-details" open>') == 2


def test_a_card_failed_by_its_trajectory_says_so_next_to_the_badge(client_alice, agent, dataset):
    """A 10/10 answer that called the wrong tools: "Fail" with the check that failed it, not "Comprehensive" alone."""
    run = build_run(agent=agent, dataset=dataset, scorer=Run.Scorer.LLM, cases=[CaseSpec(repeats=[("fail", 10.0)])])
    detail = "Expected lookup_order then issue_refund, in this order; the agent called issue_refund(amount=79)."
    Result.objects.filter(run=run).update(
        verdict="Comprehensive",
        scorers=[
            {"name": "trajectory", "label": "Trajectory (strict)", "score": 0.0, "passed": False, "detail": detail}
        ],
    )
    body = client_alice.get(_url(run)).content.decode()
    start = body.index('<summary class="result-head"')
    summary = body[start : body.index("</summary>", start)]
    assert '<span class="badge badge-fail">Fail</span><span class="badge badge-check"' in summary
    assert '✗ <span class="hide-sm">Trajectory (strict) check failed</span>' in summary
    assert "Failed on the Trajectory (strict) check</strong>, although the answer scored 10/10: " + detail in body


def test_sorting_by_score_puts_the_lowest_first(client_alice, mixed_run):
    body = client_alice.get(_url(mixed_run), {"sort": "score"}).content.decode()
    order = [body.index(f">{q}</div>") for q in ("Q errored", "Q failed", "Q flaky", "Q passed")]
    assert order == sorted(order)


def test_sorting_by_duration_puts_the_slowest_first(client_alice, agent, dataset):
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(question="Q fast"), CaseSpec(question="Q slow")])
    Result.objects.filter(run=run, case__position=1).update(duration_ms=9000)
    body = client_alice.get(_url(run), {"sort": "duration"}).content.decode()
    assert body.index(">Q slow</div>") < body.index(">Q fast</div>")


def test_the_results_view_swaps_the_list_for_htmx(client_alice, mixed_run):
    response = client_alice.get(_url(mixed_run, "runs:results"), {"filter": "error"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section id="results"')
    assert ">Q errored</div>" in body and ">Q passed</div>" not in body
    assert response["HX-Push-Url"] == _url(mixed_run) + "?filter=error"


def test_the_results_view_without_htmx_opens_the_page(client_alice, mixed_run):
    response = client_alice.get(_url(mixed_run, "runs:results"), {"filter": "error"})
    assert response.status_code == 302
    assert response["Location"] == _url(mixed_run) + "?filter=error#results"


def test_long_runs_load_more_cards_on_demand(client_alice, agent, dataset):
    run = build_run(
        agent=agent,
        dataset=dataset,
        cases=[CaseSpec(question=f"Q{n:03d}") for n in range(selectors.CARDS_PER_PAGE + 5)],
    )
    body = client_alice.get(_url(run)).content.decode()
    assert body.count('class="result-card ') == selectors.CARDS_PER_PAGE
    assert "Load more cases" in body

    more = client_alice.get(_url(run, "runs:results"), {"after": selectors.CARDS_PER_PAGE}, HTTP_HX_REQUEST="true")
    text = more.content.decode()
    assert text.count('class="result-card ') == 5
    first, last = selectors.CARDS_PER_PAGE, selectors.CARDS_PER_PAGE - 1
    assert f">Q{first:03d}</div>" in text and f">Q{last:03d}</div>" not in text
    assert '<div id="load-more" class="load-more" hx-swap-oob="true">' in text
    assert "Load more cases" not in text


# ---- the live poll -------------------------------------------------------------------


def test_an_active_run_page_polls_and_has_a_slot_per_unfinished_case(client_alice, engine_run):
    body = client_alice.get(_url(engine_run)).content.decode()
    assert body.count('hx-trigger="every 3s"') >= 1
    assert 'hx-include="#live-state, #suggestions-panel-state"' in body
    assert body.count('class="case-slot" hidden') == 5
    assert _seen(body) == ""


def test_the_poll_returns_only_the_cards_finished_since_the_last_one(client_alice, engine_run):
    _execute_next(engine_run)  # case 1
    first = _poll(client_alice, engine_run, seen="")
    body = first.content.decode()
    assert first.status_code == 200
    assert '<li id="case-0" class="result-card is-pass" hx-swap-oob="true">' in body
    assert body.count('class="result-card ') == 1
    assert 'hx-trigger="every 3s"' in body

    _execute_next(engine_run)  # case 2
    second = _poll(client_alice, engine_run, seen=_seen(body)).content.decode()
    assert '<li id="case-1" class="result-card is-pass" hx-swap-oob="true">' in second
    assert 'id="case-0"' not in second
    assert second.count('class="result-card ') == 1
    assert "2 of 5 finished" in second

    nothing_new = _poll(client_alice, engine_run, seen=_seen(second)).content.decode()
    assert 'class="result-card' not in nothing_new


def test_the_poll_updates_the_filter_counts(client_alice, engine_run):
    _execute_next(engine_run)
    body = _poll(client_alice, engine_run, seen="").content.decode()
    assert '<nav id="result-filters" class="result-filters" aria-label="Filter results" hx-swap-oob="true">' in body
    assert re.search(r'filter-passed".*?filter-count">1<', body, re.S)


def test_the_poll_drops_slots_that_finish_outside_the_filter(client_alice, agent, dataset):
    run = build_run(
        agent=agent, dataset=dataset, status=Run.Status.RUNNING, cases=[CaseSpec(repeats=[("running", None)])] * 2
    )
    finish_case(run, 0, Result.Status.PASS)
    finish_case(run, 1, Result.Status.FAIL, score=2.0)
    body = _poll(client_alice, run, seen="", filter="failed").content.decode()
    assert '<li id="case-0" hx-swap-oob="delete"></li>' in body
    assert '<li id="case-1" class="result-card is-fail" hx-swap-oob="true">' in body


def test_the_poll_leaves_cases_beyond_the_loaded_pages_alone(client_alice, agent, dataset):
    run = build_run(
        agent=agent, dataset=dataset, status=Run.Status.RUNNING, cases=[CaseSpec(repeats=[("running", None)])] * 3
    )
    finish_case(run, 2)
    body = _poll(client_alice, run, seen="", upto=2).content.decode()
    assert 'id="case-2"' not in body
    assert _seen(body) == ""  # the cursor covers the loaded range only: the poll reads nothing beyond it


def test_load_more_renders_the_cases_finished_beyond_the_range_and_adds_them_to_the_cursor(
    client_alice, agent, dataset
):
    run = build_run(
        agent=agent, dataset=dataset, status=Run.Status.RUNNING, cases=[CaseSpec(repeats=[("running", None)])] * 3
    )
    finish_case(run, 0)
    finish_case(run, 2)
    seen = selectors.seen_encode({0})  # the page shows case 0 finished and has loaded cases 0-1
    more = client_alice.get(_url(run, "runs:results"), {"after": 2, "seen": seen}, HTTP_HX_REQUEST="true")
    text = more.content.decode()
    assert '<li id="case-2" class="result-card is-pass">' in text
    assert '<input id="live-seen" type="hidden" name="seen" value="BQ" hx-swap-oob="true">' in text
    assert selectors.seen_decode("BQ") == {0, 2}
    # The next poll over the whole range has nothing new to send.
    body = _poll(client_alice, run, seen="BQ").content.decode()
    assert 'class="result-card' not in body


def test_a_finished_run_stops_polling(client_alice, engine_run):
    drive(engine_run)
    response = _poll(client_alice, engine_run, seen=selectors.seen_encode({0, 1}))
    body = response.content.decode()
    assert response.status_code == HTMX_STOP_POLLING
    assert "hx-trigger" not in body
    assert body.count('class="result-card ') == 3  # the last ones arrive with the final response
    # The charts come with it on their own tab only (the results tab has none to refresh).
    assert '<section id="run-charts"' not in body
    charts = _poll(client_alice, engine_run, tab="charts").content.decode()
    assert '<section id="run-charts"' in charts and 'class="result-card ' not in charts


def test_a_finished_run_page_does_not_poll(client_alice, engine_run):
    drive(engine_run)
    body = client_alice.get(_url(engine_run)).content.decode()
    assert 'hx-get="' + _url(engine_run) + '"' not in body
    assert "case-slot" not in body


def test_stop_from_the_page_keeps_the_finished_results(client_alice, engine_run):
    _execute_next(engine_run)
    page = client_alice.get(_url(engine_run)).content.decode()
    stop_url = reverse("runs:stop", args=[engine_run.agent_id, engine_run.pk])
    assert f'<form id="stop-form" method="post" action="{stop_url}"' in page
    assert 'data-dialog-open="stop-dialog"' in page

    response = client_alice.post(stop_url, HTTP_HX_REQUEST="true")
    assert response["HX-Redirect"] == _url(engine_run)

    after = client_alice.get(_url(engine_run)).content.decode()
    engine_run.refresh_from_db()
    assert engine_run.status == Run.Status.STOPPED
    assert "Stopped" in after
    assert after.count('class="result-card is-pass"') == 1
    assert "Not run: the run was stopped." in after
    assert 'data-dialog-open="stop-dialog"' not in after


def test_stopping_a_finished_run_says_so(client_alice, engine_run):
    drive(engine_run)
    response = client_alice.post(reverse("runs:stop", args=[engine_run.agent_id, engine_run.pk]), follow=True)
    assert "already finished" in response.content.decode()


# ---- speed --------------------------------------------------------------------------


def _big_run(agent, dataset, size):
    return build_run(
        agent=agent,
        dataset=dataset,
        status=Run.Status.RUNNING,
        cases=[
            CaseSpec(question=f"Q{n}", tags=["a", "b"], repeats=[("pass", 9.0) if n % 2 else ("running", None)])
            for n in range(size)
        ],
    )


def _queries(client, url, **kwargs):
    with CaptureQueriesContext(connection) as context:
        response = client.get(url, **kwargs)
    assert response.status_code == 200
    return len(context.captured_queries)


def test_the_page_and_its_poll_cost_the_same_queries_for_10_or_1000_results(client_alice, agent, dataset):
    small, big = _big_run(agent, dataset, 10), _big_run(agent, dataset, 1000)
    client_alice.get(_url(small))  # warm the session and caches
    assert _queries(client_alice, _url(big)) == _queries(client_alice, _url(small))
    poll = {"HTTP_HX_REQUEST": "true"}
    assert _queries(client_alice, _url(big), **poll) == _queries(client_alice, _url(small), **poll)


def test_the_page_and_its_poll_stay_within_their_query_budget(
    client_alice, agent, dataset, django_assert_max_num_queries
):
    run = _big_run(agent, dataset, 1000)
    # 20 (3 of them the session's first save): one reads the reviews of the page's cards
    # (runs.selectors.CARD_PREFETCHES), one the results with an unusable judge answer or a
    # cut one (runs.judging.trust); the run comes with its agent, and an active run's charts come
    # after the page (runs:charts).
    with django_assert_max_num_queries(20):
        client_alice.get(_url(run))
    finish_case(run, 0)
    with django_assert_max_num_queries(9):  # runs.judging.trust's one query included
        client_alice.get(_url(run), {"seen": ""}, HTTP_HX_REQUEST="true")


# ---- access ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["runs:detail", "runs:results"])
def test_only_get_is_allowed(client_alice, mixed_run, name):
    assert client_alice.post(_url(mixed_run, name)).status_code == 405


@pytest.mark.parametrize("name", ["runs:detail", "runs:results"])
def test_outsiders_get_404_and_anonymous_visitors_log_in(client_charlie, client, mixed_run, name):
    assert client_charlie.get(_url(mixed_run, name)).status_code == 404
    assert client.get(_url(mixed_run, name))["Location"].startswith(reverse("accounts:login"))


def test_a_teammate_sees_the_run(client_bob, mixed_run):
    assert client_bob.get(_url(mixed_run)).status_code == 200


# ---- one consistent state -------------------------------------------------------------


def test_the_poll_that_sees_the_run_end_brings_the_suggestions_panel_with_it(client_alice, engine_run):
    page = client_alice.get(_url(engine_run), {"tab": "suggestions"}).content.decode()
    assert 'hx-include="#live-state, #suggestions-panel-state"' in page
    assert 'name="panel" value="active"' in page
    drive(engine_run)

    body = _poll(client_alice, engine_run, seen="", panel="active", tab="suggestions").content.decode()
    assert 'id="suggestions-live" class="suggestions-live" hx-swap-oob="true"' in body
    assert "Suggestions appear here when the run finishes." not in body
    assert 'data-dialog-open="stop-dialog"' not in body and "Running" not in body
    # Once the page has the final panel, later polls leave it alone (an open dialog stays open).
    body = _poll(client_alice, engine_run, seen="", panel="none_needed", tab="suggestions").content.decode()
    assert 'id="suggestions-live"' not in body


def test_a_finished_runs_page_renders_one_finished_state(client_alice, engine_run):
    drive(engine_run)
    page = client_alice.get(_url(engine_run)).content.decode()
    assert 'data-dialog-open="stop-dialog"' not in page
    assert "Suggestions appear here when the run finishes." not in page
    assert "5 of 5 finished" in page
