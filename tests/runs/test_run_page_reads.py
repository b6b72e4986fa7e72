"""The run page's reads (runs/outcomes.py, runs/run_page.py): one page of cases, the poll's
loaded range and the counts come from the database, agree with the per-case rule of
`case_outcome_list`, and never read every case of an active run."""

import pytest
from django.urls import reverse

from runs import outcomes, selectors
from runs.models import Run
from runs.reports import charts
from tests.runs.review_helpers import CaseSpec, build_run, finish_case

pytestmark = pytest.mark.django_db


def _url(run, name="runs:detail"):
    return reverse(name, args=[run.agent_id, run.pk])


@pytest.fixture
def varied_run(agent):
    """Every kind of case: repeats that agree or not, variants, errors, one never run, one running."""
    return build_run(
        agent=agent,
        status=Run.Status.RUNNING,
        scoring={"number_of_requests": 2},
        cases=[
            CaseSpec(question="passed", repeats=[("pass", 9.0), ("pass", 9.5)], tags=["a"]),
            CaseSpec(question="failed", repeats=[("fail", 2.0), ("fail", 3.0)], tags=["a", "b"]),
            CaseSpec(question="flaky", repeats=[("pass", 8.0), ("fail", 4.0)], tags=["b"]),
            CaseSpec(question="errored", repeats=[("error", None), ("pass", 9.0)]),
            CaseSpec(question="never ran", repeats=[("skipped", None), ("skipped", None)]),
            CaseSpec(question="running", repeats=[("pass", 9.0), ("running", None)], tags=["a"]),
            CaseSpec(question="variant pending", repeats=[("pass", 9.0), ("pass", 9.0)], variants=[("pending", None)]),
            CaseSpec(question="variant failed", repeats=[("pass", 9.0), ("pass", 7.0)], variants=[("fail", 2.0)]),
        ]
        * 3,
    )


@pytest.fixture
def single_run(agent):
    """One result per case, as most runs are."""
    states = [("pass", 9.0), ("fail", 3.0), ("error", None), ("skipped", None), ("running", None)]
    return build_run(
        agent=agent,
        status=Run.Status.RUNNING,
        cases=[
            CaseSpec(question=f"Q{n}", repeats=[states[n % 5]], tags=[f"t{n % 3}"] if n % 4 else []) for n in range(20)
        ],
    )


@pytest.mark.parametrize("fixture", ["varied_run", "single_run"])
def test_the_counts_in_sql_are_the_per_case_rule(request, fixture):
    run = request.getfixturevalue(fixture)
    assert selectors.case_counts(run=run) == selectors.case_filter_counts(selectors.case_outcome_list(run=run))


@pytest.mark.parametrize("fixture", ["varied_run", "single_run"])
@pytest.mark.parametrize("name", list(selectors.FILTERS))
def test_a_page_read_in_sql_is_the_page_of_every_outcome(request, monkeypatch, fixture, name):
    run = request.getfixturevalue(fixture)
    monkeypatch.setattr(outcomes, "CARDS_PER_PAGE", 4)  # several pages of a small run
    every = selectors.case_outcome_list(run=run)
    after = 0
    while True:
        read = selectors.case_page_read(run=run, filter_name=name, sort="position", after=after)
        expected = selectors.case_page(every, filter_name=name, sort="position", after=after)
        assert read == expected
        if read.next_after is None:
            break
        after = read.next_after


def test_a_range_is_its_slice_of_every_outcome(varied_run):
    every = selectors.case_outcome_list(run=varied_run)
    assert selectors.case_outcome_range(run=varied_run, start=5, stop=13) == every[5:13]
    assert selectors.case_outcome_range(run=varied_run, start=20) == every[20:]


@pytest.mark.parametrize("fixture", ["varied_run", "single_run"])
def test_the_charts_grouped_in_sql_draw_what_every_outcome_draws(request, fixture):
    run = request.getfixturevalue(fixture)
    scores = selectors.run_scores(run=run)
    bins = charts.score_histogram_of_bins(selectors.run_score_bins(run=run), threshold=7)
    assert bins == charts.score_histogram(scores, threshold=7)
    grouped = charts.tag_pass_rates_of_counts(selectors.tag_outcome_counts(run=run))
    assert grouped == charts.tag_pass_rates(selectors.case_outcome_list(run=run, with_tags=True))
    assert not grouped.empty


def test_an_active_runs_page_and_poll_never_read_every_case(client_alice, agent, monkeypatch):
    run = build_run(
        agent=agent,
        status=Run.Status.RUNNING,
        cases=[CaseSpec(question=f"Q{n}", repeats=[("running", None)]) for n in range(selectors.CARDS_PER_PAGE + 30)],
    )
    finish_case(run, 1)
    finish_case(run, selectors.CARDS_PER_PAGE + 10)  # beyond the first page

    def every_case(**kwargs):
        raise AssertionError("the whole run was read")

    monkeypatch.setattr(outcomes, "case_outcome_list", every_case)
    monkeypatch.setattr(selectors, "case_outcome_list", every_case)
    page = client_alice.get(_url(run)).content.decode()
    assert page.count('class="result-card ') == 1 and 'filter-passed"' in page
    poll = client_alice.get(_url(run), {"seen": "", "upto": selectors.CARDS_PER_PAGE}, HTTP_HX_REQUEST="true")
    body = poll.content.decode()
    assert '<li id="case-1" class="result-card is-pass" hx-swap-oob="true">' in body
    assert f'id="case-{selectors.CARDS_PER_PAGE + 10}"' not in body
    # A filter's page: the passed cases and the slots of running ones, from case 0 on.
    passed = client_alice.get(_url(run, "runs:results"), {"filter": "passed"}, HTTP_HX_REQUEST="true").content.decode()
    assert '<li id="case-1" class="result-card is-pass">' in passed and "Load more cases" in passed


def test_an_active_runs_page_loads_its_charts_after_itself(client_alice, single_run):
    page = client_alice.get(_url(single_run), {"tab": "charts"}).content.decode()
    assert f'hx-get="{_url(single_run, "runs:charts")}" hx-trigger="load"' in page
    assert "Score distribution" not in page
    body = client_alice.get(_url(single_run, "runs:charts"), HTTP_HX_REQUEST="true").content.decode()
    assert '<section id="run-charts"' in body and "Score distribution" in body and "Pass rate by tag" in body


def test_a_finished_runs_page_has_its_charts_and_draws_them_once(client_alice, agent, django_assert_max_num_queries):
    run = build_run(agent=agent, cases=[CaseSpec(tags=["a"]), CaseSpec(repeats=[("fail", 2.0)], tags=["b"])])
    first = client_alice.get(_url(run), {"tab": "charts"}).content.decode()
    assert (
        "Score distribution" in first
        and "Pass rate by tag" in first
        and 'hx-trigger="load"' not in first.split('id="run-charts"')[1].split(">")[0]
    )
    charts_url = _url(run, "runs:charts")
    # Drawn already: the charts' own view reads the run and nothing of its results.
    with django_assert_max_num_queries(4):
        again = client_alice.get(charts_url, HTTP_HX_REQUEST="true").content.decode()
    assert "Score distribution" in again
