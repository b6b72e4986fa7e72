"""Learning cases (monitoring/learning.py and their pages): a production trace becomes a candidate,
the queue puts the most doubtful first, approve adds a test case to a dataset of the agent with
provenance back to the trace, reject keeps the reason; and the whole loop, from a thumbs-down to a
run of the dataset that fails the current version."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from agents.models import Agent
from datasets.models import Dataset
from monitoring import learning
from monitoring.models import LearningCase
from monitoring.views import LEARNING_PER_PAGE
from runs import services as run_services
from runs.models import Result
from tests.factories import AgentFactory, DatasetFactory
from tests.monitoring.factories import FeedbackFactory, OnlineScoreFactory, TraceFactory
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

EXPECTED = "Refunds are accepted within 14 days of delivery, with the receipt."


@pytest.fixture
def trace(agent):
    return TraceFactory(
        agent=agent,
        question="Can I still return my shoes?",
        answer="Sorry, we never take returns.",
        messages=[
            {"role": "system", "content": "You are the shop's assistant."},
            {"role": "user", "content": "Hi, I bought shoes last week."},
            {"role": "assistant", "content": "Great, how can I help?"},
            {"role": "user", "content": "Can I still return my shoes?"},
            {"role": "assistant", "content": "Sorry, we never take returns."},
        ],
    )


def _fresh(trace):
    from monitoring.selectors import trace_get

    return trace_get(agent=trace.agent, trace_pk=trace.pk)


# ---- the services ------------------------------------------------------------------------


def test_a_candidate_takes_the_question_and_earlier_turns_from_the_trace(trace, alice):
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)

    assert case.status == LearningCase.Status.CANDIDATE
    assert case.question == "Can I still return my shoes?"
    assert case.actual_answer == "Sorry, we never take returns."
    assert case.conversation == [
        {"role": "user", "content": "Hi, I bought shoes last week."},
        {"role": "assistant", "content": "Great, how can I help?"},
    ]
    assert (case.otel_trace_id, case.trace_time, case.service_name) == (
        trace.otel_trace_id,
        trace.started_at,
        "support-bot",
    )


def test_an_earlier_turn_that_only_called_a_tool_is_not_a_blank_turn_of_the_case(agent, alice):
    # A real client's earlier turn: the model called a tool (no text), the tool answered, the
    # model answered with the result. The case's history keeps what the user read.
    trace = TraceFactory(
        agent=agent,
        question="And when does it arrive?",
        messages=[
            {"role": "user", "content": "Where is my order A-1042?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "get_order_status"}]},
            {"role": "tool", "content": '{"status": "shipped"}', "tool_call_id": "c1"},
            {"role": "assistant", "content": "It has shipped."},
            {"role": "user", "content": "And when does it arrive?"},
        ],
    )

    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)

    assert case.conversation == [
        {"role": "user", "content": "Where is my order A-1042?"},
        {"role": "assistant", "content": "It has shipped."},
    ]


def test_a_second_pick_of_the_same_trace_finds_the_open_candidate(trace, alice):
    first = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)
    second = learning.learning_case_create(trace=_fresh(trace), reason="thumbs_down", user=alice)

    assert first.pk == second.pk
    assert LearningCase.objects.count() == 1


def test_a_trace_with_no_question_cannot_become_a_case(agent, alice):
    trace = TraceFactory(agent=agent, question="", messages=[])

    with pytest.raises(ValidationError, match="no question"):
        learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)


def test_an_outsider_cannot_make_or_review_a_case(trace, alice, charlie):
    with pytest.raises(PermissionDenied):
        learning.learning_case_create(trace=_fresh(trace), reason="picked", user=charlie)
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)
    dataset = DatasetFactory(agent=trace.agent)
    with pytest.raises(PermissionDenied):
        learning.learning_case_approve(case=case, dataset=dataset, expected_answer=EXPECTED, user=charlie)
    with pytest.raises(PermissionDenied):
        learning.learning_case_reject(case=case, reason="no", user=charlie)
    assert dataset.cases.count() == 0


def test_doubt_puts_a_judge_that_disagrees_with_the_user_first(agent, alice):
    calm = TraceFactory(agent=agent, question="Calm")
    low = TraceFactory(agent=agent, question="Low score")
    OnlineScoreFactory(trace=low, score=3)
    disputed = TraceFactory(agent=agent, question="Judge passed, user said no")
    OnlineScoreFactory(trace=disputed, score=9)
    FeedbackFactory(trace=disputed, value=0)
    for trace in (calm, low, disputed):
        learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)

    queue = [case.question for case in learning.learning_case_list(agent=agent)]

    assert queue == ["Judge passed, user said no", "Low score", "Calm"]


def test_approve_adds_a_test_case_with_provenance_back_to_the_trace(trace, alice):
    dataset = DatasetFactory(agent=trace.agent)
    case = learning.learning_case_create(trace=_fresh(trace), reason="thumbs_down", user=alice)

    test_case = learning.learning_case_approve(case=case, dataset=dataset, expected_answer=EXPECTED, user=alice)

    case.refresh_from_db()
    assert case.status == LearningCase.Status.APPROVED and case.test_case == test_case and case.dataset == dataset
    assert case.reviewed_by == alice and case.expected_answer == EXPECTED
    assert test_case.dataset == dataset
    assert test_case.question == "Can I still return my shoes?"
    assert test_case.expected_answer == EXPECTED
    assert test_case.turns == [{"user": "Hi, I bought shoes last week.", "expected": "Great, how can I help?"}]
    assert test_case.source_file == f"production trace {trace.otel_trace_id}"
    assert test_case.metadata == {
        "trace_id": trace.otel_trace_id,
        "trace_time": trace.started_at.isoformat(timespec="seconds"),
        "service": "support-bot",
    }
    assert "production" in test_case.tags


def test_approve_refuses_another_agents_dataset_and_an_empty_answer(trace, alice, team):
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)
    other = DatasetFactory(agent=AgentFactory(team=team))

    with pytest.raises(ValidationError, match="dataset of this agent"):
        learning.learning_case_approve(case=case, dataset=other, expected_answer=EXPECTED, user=alice)
    with pytest.raises(ValidationError, match="should have given"):
        learning.learning_case_approve(
            case=case, dataset=DatasetFactory(agent=trace.agent), expected_answer="  ", user=alice
        )
    assert other.cases.count() == 0


def test_a_case_is_reviewed_once(trace, alice):
    dataset = DatasetFactory(agent=trace.agent)
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)
    learning.learning_case_reject(case=case, reason="The user was joking.", user=alice)

    stale = LearningCase.objects.get(pk=case.pk)
    stale.status = LearningCase.Status.CANDIDATE  # a page loaded before the rejection
    with pytest.raises(ValidationError, match="already reviewed"):
        learning.learning_case_approve(case=stale, dataset=dataset, expected_answer=EXPECTED, user=alice)
    assert dataset.cases.count() == 0  # the test case made on the way was rolled back
    case.refresh_from_db()
    assert case.status == LearningCase.Status.REJECTED and case.reject_reason == "The user was joking."


def test_reject_needs_a_reason(trace, alice):
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)

    with pytest.raises(ValidationError, match="Say why"):
        learning.learning_case_reject(case=case, reason=" ", user=alice)


def test_a_case_keeps_its_text_after_retention_deletes_the_trace(trace, alice):
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)
    trace.delete()
    case.refresh_from_db()

    test_case = learning.learning_case_approve(
        case=case, dataset=DatasetFactory(agent=case.agent), expected_answer=EXPECTED, user=alice
    )

    assert case.trace is None and test_case.question == "Can I still return my shoes?"
    assert test_case.metadata["trace_id"] == case.otel_trace_id


def test_suggestions_list_thumbs_down_and_failed_traces_without_a_case(agent, alice):
    down = TraceFactory(agent=agent, question="Thumbs down")
    FeedbackFactory(trace=down, value=0)
    failed = TraceFactory(agent=agent, question="Failed score")
    OnlineScoreFactory(trace=failed, score=2)
    fine = TraceFactory(agent=agent, question="Fine")
    OnlineScoreFactory(trace=fine, score=9)
    FeedbackFactory(trace=fine, value=1)
    taken = TraceFactory(agent=agent, question="Already a case")
    FeedbackFactory(trace=taken, value=0)
    learning.learning_case_create(trace=_fresh(taken), reason="thumbs_down", user=alice)

    suggested = {trace.question for trace in learning.learning_suggestions(agent=agent)}

    assert suggested == {"Thumbs down", "Failed score"}


# ---- the pages ---------------------------------------------------------------------------


def _url(name, agent, *args):
    return reverse(f"monitoring:{name}", args=[agent.pk, *args])


def test_the_pages_make_review_and_approve_a_case(client_alice, trace, agent):
    dataset = DatasetFactory(agent=agent, name="Returns")
    FeedbackFactory(trace=trace, value=0)

    response = client_alice.post(_url("learning_case_create", agent, trace.pk), {"reason": "thumbs_down"})
    case = LearningCase.objects.get()
    assert response.status_code == 302 and response["Location"] == _url("learning_case", agent, case.pk)
    page = client_alice.get(_url("learning_case", agent, case.pk)).content.decode()
    assert "Sorry, we never take returns." in page and "Hi, I bought shoes last week." in page
    assert "What the judges and the user said" in page and "Thumbs down" in page
    queue = client_alice.get(_url("learning", agent)).content.decode()
    assert "Can I still return my shoes?" in queue and "Negative user feedback" in queue

    response = client_alice.post(
        _url("learning_case_approve", agent, case.pk), {"dataset": dataset.pk, "expected_answer": EXPECTED}
    )

    assert response.status_code == 302
    assert dataset.cases.get().expected_answer == EXPECTED
    page = client_alice.get(response["Location"]).content.decode()
    assert "Added to Returns as case 1." in page


def test_the_approve_form_refuses_a_blank_answer_and_keeps_the_page(client_alice, trace, agent):
    dataset = DatasetFactory(agent=agent)
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=None)

    response = client_alice.post(_url("learning_case_approve", agent, case.pk), {"dataset": dataset.pk})

    assert response.status_code == 422
    assert "This field is required." in response.content.decode()
    assert dataset.cases.count() == 0


def test_the_approve_form_offers_only_the_agents_datasets(client_alice, trace, agent, team):
    DatasetFactory(agent=agent, name="Mine")
    other = DatasetFactory(agent=AgentFactory(team=team), name="Someone else's")
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=None)

    page = client_alice.get(_url("learning_case", agent, case.pk)).content.decode()
    response = client_alice.post(
        _url("learning_case_approve", agent, case.pk), {"dataset": other.pk, "expected_answer": EXPECTED}
    )

    assert "Mine" in page and "Someone else" not in page
    assert response.status_code == 422 and other.cases.count() == 0


def test_the_reject_page_keeps_the_reason(client_alice, trace, agent):
    case = learning.learning_case_create(trace=_fresh(trace), reason="picked", user=None)

    response = client_alice.post(_url("learning_case_reject", agent, case.pk), {"reason": "A test message."})

    assert response.status_code == 302
    rejected = client_alice.get(_url("learning", agent), {"status": "rejected"}).content.decode()
    assert "Rejected: A test message." in rejected


def test_a_trace_without_a_question_is_refused_with_a_message(client_alice, agent):
    trace = TraceFactory(agent=agent, question="", messages=[])

    response = client_alice.post(_url("learning_case_create", agent, trace.pk), {"reason": "picked"}, follow=True)

    assert "no question" in response.content.decode()
    assert LearningCase.objects.count() == 0


# ---- the loop ----------------------------------------------------------------------------


def test_a_thumbs_down_becomes_a_case_that_fails_the_current_version(client_alice, alice, team, fake_llm):
    """The issue's loop: a bad production answer, turned down by its user, becomes a reviewed test
    case; a run of its dataset against the current version fails it."""
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM)
    trace = TraceFactory(agent=agent, question="How long do I have to return shoes?", answer="No returns.")
    FeedbackFactory(trace=trace, value=0, comment="That's wrong")
    dataset = DatasetFactory(agent=agent, name="From production")
    assert [t.pk for t in learning.learning_suggestions(agent=agent)] == [trace.pk]

    client_alice.post(_url("learning_case_create", agent, trace.pk), {"reason": "thumbs_down"})
    case = LearningCase.objects.get(agent=agent)
    client_alice.post(
        _url("learning_case_approve", agent, case.pk), {"dataset": dataset.pk, "expected_answer": EXPECTED}
    )
    test_case = Dataset.objects.get(pk=dataset.pk).cases.get()
    assert test_case.metadata["trace_id"] == trace.otel_trace_id

    # The fake agent still answers without the refund window; the judge sees the expected answer.
    fake_llm.add_rule(task="judge", contains=EXPECTED, json={"score": 2, "reasoning": "It never gives the 14 days."})
    run = drive(run_services.run_start(agent=agent, dataset=dataset, user=alice))

    result = run.results.get()
    assert result.status == Result.Status.FAIL
    assert result.case.question == "How long do I have to return shoes?"
    assert (run.passed, run.failed) == (0, 1)
    assert any(EXPECTED in request.text for request in fake_llm.requests if request.task == "judge")


def test_the_queue_costs_the_same_queries_for_1_or_20_cases(client_alice, agent, alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client_alice.get(_url("learning", agent)).status_code == 200
        return len(queries)

    def add() -> None:
        trace = TraceFactory(agent=agent)
        FeedbackFactory(trace=trace, value=0)
        learning.learning_case_create(trace=_fresh(trace), reason="thumbs_down", user=alice)
        FeedbackFactory(trace=TraceFactory(agent=agent), value=0)  # one more worth a look

    add()
    count()  # the first request of a session reads more (the session, the team)
    one = count()
    for _ in range(19):
        add()
    assert count() == one


def test_the_queue_pages_past_its_first_fifty_cases(client_alice, agent, alice):
    # Every candidate can be reached: the queue once stopped at 200, silently.
    for n in range(LEARNING_PER_PAGE + 3):
        trace = TraceFactory(agent=agent, question=f"Question number {n:03d}?")
        learning.learning_case_create(trace=_fresh(trace), reason="picked", user=alice)

    first = client_alice.get(_url("learning", agent)).content.decode()
    second = client_alice.get(_url("learning", agent) + "?status=candidate&page=2").content.decode()
    past = client_alice.get(_url("learning", agent) + "?status=candidate&page=9").content.decode()

    assert first.count('class="trace-row"') == LEARNING_PER_PAGE and "page=2" in first
    assert second.count('class="trace-row"') == 3 and "page=1" in second and "page=3" not in second
    shown = {q for q in range(LEARNING_PER_PAGE + 3) if f"Question number {q:03d}?" in first + second}
    assert len(shown) == LEARNING_PER_PAGE + 3
    assert "No more candidate learning cases" in past
