"""The monitoring pages of an agent: the monitoring page (online scores per judge configuration,
traffic figures, open alerts), the trace list (filters, search, paging, the poll) and a trace."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from monitoring.models import Alert, LearningCase, OnlineScore
from tests.factories import AgentFactory
from tests.monitoring.factories import (
    ConversationFactory,
    FeedbackFactory,
    JudgeConfigFactory,
    OnlineEvaluatorFactory,
    OnlineScoreFactory,
    SpanFactory,
    TraceFactory,
)

pytestmark = pytest.mark.django_db


def _url(name, agent, *args):
    return reverse(f"monitoring:{name}", args=[agent.pk, *args])


# ---- the monitoring page -----------------------------------------------------------------


def test_the_monitoring_page_draws_one_line_per_judge_configuration(client_alice, agent):
    evaluator = OnlineEvaluatorFactory(agent=agent, name="Helpfulness")
    old, new = JudgeConfigFactory(judge_model="openai/judge-a"), JudgeConfigFactory(judge_model="openai/judge-b")
    for score in (9, 9, 2):
        OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=old, score=score)
    OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=new, score=1)

    response = client_alice.get(_url("page", agent))

    body = response.content.decode()
    assert response.status_code == 200
    for start, end in (("chart-pass", "chart-score"), ("chart-score", "chart-volume")):
        chart = body[body.index(f'aria-labelledby="{start}-title"') : body.index(f'id="{end}-title"')]
        assert chart.count('<g class="mon-line">') == 2, start
        assert f"Helpfulness · {old.label}" in chart and f"Helpfulness · {new.label}" in chart
    assert "mean 6.7/10 of 3" in body and "mean 1.0/10 of 1" in body
    # The table gives each configuration its own figures: 2 of 3 passed, and 0 of 1.
    assert "67%" in body and "0%" in body


def test_two_judges_are_never_pooled_in_one_figure(client_alice, agent):
    evaluator = OnlineEvaluatorFactory(agent=agent)
    first, second = JudgeConfigFactory(), JudgeConfigFactory()
    OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=first, score=9)
    OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=second, score=1)

    body = client_alice.get(_url("page", agent)).content.decode()

    assert "<td>100%</td>" in body and "<td>0%</td>" in body
    assert "<td>50%</td>" not in body  # the pooled pass rate of both judges appears nowhere


def test_a_judge_that_failed_preflight_is_named_so_beside_its_skipped_scores(client_alice, agent):
    evaluator = OnlineEvaluatorFactory(agent=agent)
    failed = JudgeConfigFactory(preflight_status="failed")
    OnlineScoreFactory(
        trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=failed, status="skipped", score=None,
        error="judge failed preflight",
    )  # fmt: skip

    body = client_alice.get(_url("page", agent)).content.decode()

    table = body[body.index('class="table mon-judge-table"') : body.index("</table>")]
    assert "Preflight failed" in table and "1 skipped" in table and "%" not in table


def test_the_monitoring_page_shows_traffic_and_open_alerts(client_alice, agent):
    TraceFactory(agent=agent, duration_ms=100, cost="0.002")
    TraceFactory(agent=agent, duration_ms=300, status="error", error="upstream timeout", cost="0.003")
    evaluator = OnlineEvaluatorFactory(agent=agent, name="Accuracy")
    config = JudgeConfigFactory()
    Alert.objects.create(evaluator=evaluator, judge_config=config, pass_rate=0.4, window=20, threshold=0.8)
    Alert.objects.create(
        evaluator=evaluator, judge_config=config, pass_rate=0.1, window=20, threshold=0.8, resolved_at=timezone.now()
    )

    body = client_alice.get(_url("page", agent)).content.decode()

    assert "50.0%" in body  # error rate
    assert "$0.0050" in body
    assert "300 ms" in body  # p95
    assert body.count('class="alert alert-error mon-alert"') == 1
    assert "pass rate 40% over the last 20 scored, below 80%" in body
    assert '<rect class="mon-bar"' in body
    assert body.count('<rect class="mon-bar mon-bar-error"') == 1  # the errors' part of the bar


def test_the_monitoring_page_takes_a_period_and_ignores_a_bad_one(client_alice, agent):
    TraceFactory(agent=agent, started_at=timezone.now() - timedelta(days=3))

    day = client_alice.get(_url("page", agent), {"period": "24h"}).content.decode()
    week = client_alice.get(_url("page", agent), {"period": "7d"}).content.decode()
    bad = client_alice.get(_url("page", agent), {"period": "forever"})

    assert '<span class="stat-value">0</span>' in day
    assert '<span class="stat-value">1</span>' in week
    assert bad.status_code == 200


def test_the_monitoring_page_with_no_traffic_says_so(client_alice, agent):
    body = client_alice.get(_url("page", agent)).content.decode()

    assert "No online scores in this period" in body
    assert "Nothing in this period" in body


def test_the_agent_tabs_lead_to_monitoring(client_alice, agent):
    body = client_alice.get(reverse("agents:detail", args=[agent.pk])).content.decode()

    assert f'href="{_url("page", agent)}"' in body
    monitoring = client_alice.get(_url("page", agent)).content.decode()
    for name in ("traces", "learning", "evaluators"):
        assert f'href="{_url(name, agent)}"' in monitoring, name


# ---- the trace list ----------------------------------------------------------------------


def test_the_trace_list_is_newest_first(client_alice, agent):
    now = timezone.now()
    TraceFactory(agent=agent, question="Older question", started_at=now - timedelta(hours=2))
    TraceFactory(agent=agent, question="Newer question", started_at=now)

    body = client_alice.get(_url("traces", agent)).content.decode()

    assert body.index("Newer question") < body.index("Older question")


@pytest.mark.parametrize(
    ("params", "shown", "hidden"),
    [
        ({"service": "billing"}, "Billing question", "Support question"),
        ({"status": "error"}, "Billing question", "Support question"),
        ({"feedback": "negative"}, "Support question", "Billing question"),
        ({"score": "failed"}, "Billing question", "Support question"),
        ({"below": "5"}, "Billing question", "Support question"),
        ({"q": "refund"}, "Support question", "Billing question"),
        ({"q": "invoice"}, "Billing question", "Support question"),  # in the answer
        ({"date_from": "2026-01-02"}, "Support question", "Billing question"),
    ],
)
def test_the_trace_list_filters(client_alice, agent, params, shown, hidden):
    support = TraceFactory(agent=agent, question="Support question: my refund?", answer="Within 30 days.")
    billing = TraceFactory(
        agent=agent,
        service_name="billing",
        status="error",
        question="Billing question",
        answer="See your invoice.",
        started_at=timezone.make_aware(timezone.datetime(2026, 1, 1, 12)),
    )
    FeedbackFactory(trace=support, value=0)
    OnlineScoreFactory(trace=billing, score=2)
    OnlineScoreFactory(trace=support, score=9)

    body = client_alice.get(_url("traces", agent), params).content.decode()

    assert shown in body
    assert hidden not in body


def test_a_trace_id_finds_its_trace(client_alice, agent):
    wanted = TraceFactory(agent=agent, question="The one")
    TraceFactory(agent=agent, question="Another")

    body = client_alice.get(_url("traces", agent), {"q": wanted.otel_trace_id.upper()}).content.decode()

    assert "The one" in body and "Another" not in body


def test_bad_filters_filter_nothing_and_never_fail(client_alice, agent):
    TraceFactory(agent=agent, question="Still here")

    response = client_alice.get(_url("traces", agent), {"below": "lots", "date_from": "yesterday", "page": "9" * 40})

    assert response.status_code == 200
    assert "Still here" not in response.content.decode()  # page far past the last: empty
    response = client_alice.get(_url("traces", agent), {"below": "lots", "date_from": "yesterday"})
    assert "Still here" in response.content.decode()


def test_the_trace_list_pages(client_alice, agent, settings):
    from monitoring import views

    now = timezone.now()
    for number in range(views.TRACES_PER_PAGE + 2):
        TraceFactory(agent=agent, question=f"Question number {number:03d}", started_at=now - timedelta(minutes=number))

    first = client_alice.get(_url("traces", agent)).content.decode()
    second = client_alice.get(_url("traces", agent), {"page": "2"}).content.decode()

    assert "Question number 000" in first and "Question number 051" not in first
    assert "Older →" in first
    assert "Question number 051" in second and "← Newer" in second
    assert 'hx-trigger="every 3s"' in first
    assert 'hx-trigger="every 3s"' not in second  # a later page holds still


def test_the_poll_answers_the_list_region_alone(client_alice, agent):
    TraceFactory(agent=agent, question="Polled question")

    response = client_alice.get(_url("traces", agent), {"service": "support-bot"}, HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="trace-region"')
    assert "Polled question" in body
    assert "<html" not in body
    assert "service=support-bot" in body  # it polls on with the same filters


def test_the_trace_list_costs_the_same_queries_for_1_or_30_traces(client_alice, agent):
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client_alice.get(_url("traces", agent)).status_code == 200
        return len(queries)

    trace = TraceFactory(agent=agent)
    FeedbackFactory(trace=trace)
    OnlineScoreFactory(trace=trace)
    count()  # the first request of a session reads more (the session, the team): not the list's cost
    one = count()
    for _ in range(29):
        OnlineScoreFactory(trace=TraceFactory(agent=agent))
    assert count() == one
    assert one <= 10


def test_the_monitoring_page_costs_a_fixed_number_of_queries(client_alice, agent):
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client_alice.get(_url("page", agent)).status_code == 200
        return len(queries)

    evaluator = OnlineEvaluatorFactory(agent=agent)
    OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator)
    count()  # the first request of a session reads more (the session, the team)
    one = count()
    for _ in range(10):
        OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=JudgeConfigFactory())
    assert count() == one
    assert one <= 15


# ---- a trace -----------------------------------------------------------------------------


@pytest.fixture
def full_trace(agent):
    trace = TraceFactory(
        agent=agent,
        question="Where is order 42?",
        answer="It ships tomorrow.",
        messages=[
            {"role": "system", "content": "You are the shop's assistant."},
            {"role": "user", "content": "Where is order 42?"},
            {"role": "assistant", "content": "It ships tomorrow."},
        ],
        tool_calls=[
            {"name": "order_lookup", "arguments": '{"order": 42}', "result": '{"status": "packed"}', "id": "c1"}
        ],
        retrieval_documents=[{"id": "kb-7", "content": "Orders ship within two days.", "score": 0.82}],
        masked={"email": 2},
    )
    start = int(trace.started_at.timestamp() * 1e9)
    root = SpanFactory(
        trace=trace, name="agent run", start_time_unix_nano=start, end_time_unix_nano=start + 800_000_000
    )
    SpanFactory(
        trace=trace,
        name="order_lookup tool",
        parent_span_id=root.span_id,
        start_time_unix_nano=start + 200_000_000,
        end_time_unix_nano=start + 400_000_000,
        status_code="error",
    )
    OnlineScoreFactory(trace=trace, score=3, reasoning="It never says which carrier.")
    FeedbackFactory(trace=trace, value=0, comment="Wrong day!")
    return trace


def test_the_trace_page_shows_everything_the_trace_holds(client_alice, agent, full_trace):
    body = client_alice.get(_url("trace", agent, full_trace.pk)).content.decode()

    for text in (
        "You are the shop&#x27;s assistant.",
        "It ships tomorrow.",
        "order_lookup",
        "{&quot;status&quot;: &quot;packed&quot;}",
        "kb-7",
        "Orders ship within two days.",
        "It never says which carrier.",
        "Wrong day!",
        "Thumbs down",
        "2 email",
        full_trace.otel_trace_id,
    ):
        assert text in body, text
    score = full_trace.scores.get()
    assert score.judge_config.label in body


def test_the_span_tree_nests_children_with_timing_bars(client_alice, agent, full_trace):
    body = client_alice.get(_url("trace", agent, full_trace.pk)).content.decode()

    assert body.index("agent run") < body.index("order_lookup tool")
    assert 'style="--depth: 1"' in body
    assert "200.0 ms" in body and "800.0 ms" in body
    assert 'x="25.0" width="25.0"' in body  # the bar starts a quarter in and lasts a quarter


def test_a_trace_of_another_agent_is_404(client_alice, agent, team, full_trace):
    other = AgentFactory(team=team)

    assert client_alice.get(_url("trace", other, full_trace.pk)).status_code == 404


def test_another_teams_trace_is_404_on_every_page(client_charlie, agent, full_trace):
    case = LearningCase.objects.create(
        agent=agent,
        trace=full_trace,
        otel_trace_id=full_trace.otel_trace_id,
        trace_time=full_trace.started_at,
        reason="picked",
        question="Q",
    )
    for url in (
        _url("page", agent),
        _url("traces", agent),
        _url("trace", agent, full_trace.pk),
        _url("learning", agent),
        _url("learning_case", agent, case.pk),
    ):
        assert client_charlie.get(url).status_code == 404, url
    for url in (
        _url("learning_case_create", agent, full_trace.pk),
        _url("learning_case_approve", agent, case.pk),
        _url("learning_case_reject", agent, case.pk),
    ):
        assert client_charlie.post(url, {"reason": "x"}).status_code == 404, url


def test_the_pages_refuse_the_wrong_method(client_alice, agent, full_trace):
    assert client_alice.post(_url("page", agent)).status_code == 405
    assert client_alice.post(_url("traces", agent)).status_code == 405
    assert client_alice.post(_url("trace", agent, full_trace.pk)).status_code == 405
    assert client_alice.get(_url("learning_case_create", agent, full_trace.pk)).status_code == 405


def test_a_score_that_does_not_count_says_so(client_alice, agent):
    trace = TraceFactory(agent=agent)
    OnlineScoreFactory(trace=trace, status=OnlineScore.Status.UNUSABLE, score=None, passed=None, error="empty reply")

    body = client_alice.get(_url("trace", agent, trace.pk)).content.decode()

    assert "Judge answer unusable" in body
    assert "Not counted: empty reply" in body


def test_masked_personal_data_is_marked_as_masked_and_text_stays_escaped(client_alice, agent):
    trace = TraceFactory(
        agent=agent,
        question="Mail me at [masked:email] <script>alert(1)</script>",
        messages=[{"role": "user", "content": "Mail me at [masked:email] <script>alert(1)</script>"}],
        tool_calls=[{"name": "crm", "arguments": '{"card": "[masked:card]"}', "result": "", "id": ""}],
        masked={"email": 1, "card": 1},
    )

    body = client_alice.get(_url("trace", agent, trace.pk)).content.decode()

    assert '<mark class="masked" title="Masked before storage">email masked</mark>' in body
    assert '<mark class="masked" title="Masked before storage">card masked</mark>' in body
    assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)" in body
    assert "[masked:email]" not in body
    assert "Personal data was masked before this trace was stored: 1 card, 1 email." in body


def test_a_trace_shows_the_scores_of_its_whole_conversation(client_alice, agent):
    conversation = ConversationFactory(agent=agent, session_id="chat-77", trace_count=2)
    trace = TraceFactory(agent=agent, conversation=conversation)
    OnlineScoreFactory(
        trace=None, conversation=conversation, evaluator=OnlineEvaluatorFactory(agent=agent, name="Whole chat"), score=3
    )
    OnlineScoreFactory(
        trace=None, conversation=conversation, evaluator=OnlineEvaluatorFactory(agent=agent, name="Tone"), score=9
    )

    body = client_alice.get(_url("trace", agent, trace.pk)).content.decode()

    assert "Scores of the whole conversation" in body and "session chat-77" in body
    assert "Whole chat" in body and "Tone" in body
    assert "Not scored online." in body  # the trace itself was not
