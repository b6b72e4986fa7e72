"""The monitoring API (monitoring/api.py): traces (filters, detail with spans, scores and feedback),
the monitoring figures per judge configuration, learning cases (list, create, approve, reject);
another team's trace or case is a 404 on every operation; list queries do not grow with the rows."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.services import api_token_create
from monitoring.models import LearningCase
from tests.factories import AgentFactory, DatasetFactory
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


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.fixture
def outsider(charlie):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=charlie, name='x')[1]}"}


@pytest.fixture
def trace(agent):
    trace = TraceFactory(
        agent=agent,
        question="Where is my parcel?",
        answer="It left the depot.",
        tool_calls=[{"name": "track", "arguments": "{}", "result": "in transit", "id": "c1"}],
        masked={"phone": 1},
    )
    SpanFactory(trace=trace, name="chat")
    OnlineScoreFactory(trace=trace, score=4, reasoning="No delivery date.")
    FeedbackFactory(trace=trace, value=0, comment="Useless")
    return trace


def _get(client, name, auth, *args, **params):
    return client.get(reverse(f"api:{name}", args=args), params, **auth)


def _post(client, name, auth, body, *args):
    return client.post(reverse(f"api:{name}", args=args), body, content_type="application/json", **auth)


def test_the_trace_list_is_newest_first_with_its_marks(client, auth, agent, trace):
    TraceFactory(agent=agent, question="Older", started_at=trace.started_at.replace(year=2025))

    body = _get(client, "monitoring_traces", auth, agent.pk).json()

    assert body["count"] == 2
    first = body["items"][0]
    assert first["id"] == trace.pk and first["otel_trace_id"] == trace.otel_trace_id
    assert (first["negative_feedback"], first["failed_score"], first["lowest_score"]) == (True, True, 4.0)
    assert body["items"][1]["question"] == "Older"


def test_the_trace_list_filters_like_the_page(client, auth, agent, trace):
    TraceFactory(agent=agent, question="A fine one", service_name="other")

    def questions(**params):
        return [
            item["question"] for item in _get(client, "monitoring_traces", auth, agent.pk, **params).json()["items"]
        ]

    assert questions(service="other") == ["A fine one"]
    assert questions(negative_feedback="true") == ["Where is my parcel?"]
    assert questions(score_below=5) == ["Where is my parcel?"]
    assert questions(q="parcel") == ["Where is my parcel?"]
    assert _get(client, "monitoring_traces", auth, agent.pk, score_below=11).status_code == 422


def test_a_trace_has_its_spans_scores_and_feedback(client, auth, agent, trace):
    response = _get(client, "monitoring_trace", auth, agent.pk, trace.pk)

    body = response.json()
    assert response.status_code == 200
    assert [span["name"] for span in body["spans"]] == ["chat"]
    score = body["scores"][0]
    assert (score["status"], score["score"], score["passed"], score["reasoning"]) == (
        "scored",
        4.0,
        False,
        "No delivery date.",
    )
    assert score["judge_config"] == trace.scores.get().judge_config.label
    assert body["feedback"][0] == {**body["feedback"][0], "kind": "thumbs", "value": 0.0, "negative": True}
    assert body["tool_calls"][0]["name"] == "track" and body["masked"] == {"phone": 1}
    assert body["conversation_scores"] == []


def test_the_monitoring_figures_keep_judges_apart(client, auth, agent):
    evaluator = OnlineEvaluatorFactory(agent=agent)
    OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=JudgeConfigFactory(), score=9)
    OnlineScoreFactory(trace=TraceFactory(agent=agent), evaluator=evaluator, judge_config=JudgeConfigFactory(), score=1)

    body = _get(client, "monitoring_page", auth, agent.pk).json()

    assert body["traces"] == 2
    assert sorted(line["pass_rate"] for line in body["judge_configurations"]) == [0.0, 1.0]


def test_learning_cases_through_the_api(client, auth, agent, trace):
    dataset = DatasetFactory(agent=agent)

    created = _post(client, "monitoring_learning_case_create", auth, {"reason": "thumbs_down"}, agent.pk, trace.pk)
    again = _post(client, "monitoring_learning_case_create", auth, {}, agent.pk, trace.pk)

    assert created.status_code == 201 and again.status_code == 200
    case = created.json()
    assert case["id"] == again.json()["id"] and case["actual_answer"] == "It left the depot."
    listed = _get(client, "monitoring_learning", auth, agent.pk).json()
    assert [item["id"] for item in listed["items"]] == [case["id"]]

    approved = _post(
        client,
        "monitoring_learning_case_approve",
        auth,
        {"dataset_id": dataset.pk, "expected_answer": "Tomorrow before noon."},
        agent.pk,
        case["id"],
    )

    assert approved.status_code == 200, approved.json()
    assert approved.json()["status"] == "approved" and approved.json()["dataset_id"] == dataset.pk
    assert dataset.cases.get().source_file == f"production trace {trace.otel_trace_id}"
    twice = _post(
        client,
        "monitoring_learning_case_approve",
        auth,
        {"dataset_id": dataset.pk, "expected_answer": "Again."},
        agent.pk,
        case["id"],
    )
    assert twice.status_code == 400 and "already reviewed" in twice.json()["detail"]


def test_the_api_refuses_bad_reviews_with_a_message(client, auth, agent, team, trace):
    case = _post(client, "monitoring_learning_case_create", auth, {}, agent.pk, trace.pk).json()
    foreign = DatasetFactory(agent=AgentFactory(team=team))

    wrong_dataset = _post(
        client,
        "monitoring_learning_case_approve",
        auth,
        {"dataset_id": foreign.pk, "expected_answer": "x"},
        agent.pk,
        case["id"],
    )
    empty_reason = _post(client, "monitoring_learning_case_reject", auth, {"reason": ""}, agent.pk, case["id"])
    unknown = _post(client, "monitoring_learning_case_reject", auth, {"reason": "x", "why": 1}, agent.pk, case["id"])
    rejected = _post(client, "monitoring_learning_case_reject", auth, {"reason": "Spam"}, agent.pk, case["id"])

    assert wrong_dataset.status_code == 404 and foreign.cases.count() == 0
    assert empty_reason.status_code == 422 and unknown.status_code == 422
    assert rejected.status_code == 200 and rejected.json()["reject_reason"] == "Spam"


def test_another_teams_trace_and_case_are_404_on_every_operation(client, outsider, agent, trace):
    case = LearningCase.objects.create(
        agent=agent, trace=trace, otel_trace_id=trace.otel_trace_id, trace_time=trace.started_at, reason="picked"
    )
    dataset = DatasetFactory(agent=agent)
    reads = [
        ("monitoring_page", (agent.pk,)),
        ("monitoring_traces", (agent.pk,)),
        ("monitoring_trace", (agent.pk, trace.pk)),
        ("monitoring_learning", (agent.pk,)),
        ("monitoring_learning_case", (agent.pk, case.pk)),
    ]
    writes = [
        ("monitoring_learning_case_create", (agent.pk, trace.pk), {}),
        ("monitoring_learning_case_approve", (agent.pk, case.pk), {"dataset_id": dataset.pk, "expected_answer": "x"}),
        ("monitoring_learning_case_reject", (agent.pk, case.pk), {"reason": "x"}),
    ]

    for name, args in reads:
        assert _get(client, name, outsider, *args).status_code == 404, name
    for name, args, body in writes:
        assert _post(client, name, outsider, body, *args).status_code == 404, name
    case.refresh_from_db()
    assert case.status == "candidate" and dataset.cases.count() == 0


def test_a_trace_of_another_agent_of_the_team_is_404(client, auth, team, trace):
    other = AgentFactory(team=team)

    assert _get(client, "monitoring_trace", auth, other.pk, trace.pk).status_code == 404


def test_the_lists_cost_the_same_queries_for_1_or_20_rows(client, auth, agent, trace, alice):
    from monitoring import learning

    def count(name):
        with CaptureQueriesContext(connection) as queries:
            assert _get(client, name, auth, agent.pk).status_code == 200
        return len(queries)

    learning.learning_case_create(trace=trace, reason="picked", user=alice)
    count("monitoring_traces")  # the token's first use of the minute writes its last-used time
    one = {name: count(name) for name in ("monitoring_traces", "monitoring_learning")}
    for _ in range(19):
        extra = TraceFactory(agent=agent)
        OnlineScoreFactory(trace=extra)
        FeedbackFactory(trace=extra)
        learning.learning_case_create(trace=extra, reason="picked", user=alice)

    assert {name: count(name) for name in one} == one


def test_a_trace_carries_its_conversations_scores(client, auth, agent):
    conversation = ConversationFactory(agent=agent)
    trace = TraceFactory(agent=agent, conversation=conversation)
    evaluator = OnlineEvaluatorFactory(agent=agent, name="Whole chat")
    OnlineScoreFactory(trace=None, conversation=conversation, evaluator=evaluator, score=3)

    body = _get(client, "monitoring_trace", auth, agent.pk, trace.pk).json()

    assert body["session_id"] == conversation.session_id
    assert [(s["evaluator"], s["score"], s["passed"]) for s in body["conversation_scores"]] == [
        ("Whole chat", 3.0, False)
    ]
    assert body["scores"] == []
