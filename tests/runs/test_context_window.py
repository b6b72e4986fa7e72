"""Check 26 in docs/architecture.md: a case longer than the model's context window errors on its own.

The fake answers an over-long prompt the way OpenAI does (400, code context_length_exceeded),
so litellm's real mapping and our gateway's run. That case must become one readable Error,
asked once (a 400 never gets better by retrying), while the rest of the run is scored as usual
and the run completes, its summary included.
"""

import pytest
from django.urls import reverse

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

CONTEXT_WINDOW_CHARS = 20_000
HUGE_QUESTION = "Please check my order history line by line: " + "order A-1 paid, shipped, delivered. " * 2_800
QUESTIONS = [
    "How long is the refund window?",
    HUGE_QUESTION,
    "Do you ship to Canada?",
    "Can I earn loyalty points on sale items?",
]
READABLE = "The conversation is longer than the model's context window."
# What must never reach a QA person: tracebacks, exception classes, litellm's prefixes.
LEAKS = ("Traceback", "ContextWindowExceededError", "BadRequestError", "OpenAIException", "litellm", 'File "')


@pytest.fixture
def huge_run(make_dataset, alice, fake_llm):
    """A 4-case LLM-agent run, case 2 about 100 KB, driven in-process to its end."""
    assert len(HUGE_QUESTION) > 5 * CONTEXT_WINDOW_CHARS
    fake_llm.set_context_window(CONTEXT_WINDOW_CHARS)
    fake_llm.add_rule(
        task="judge",
        contains="loyalty points",
        json={"score": 2, "verdict": "Incorrect", "reasoning": "It never says whether sale items earn points."},
    )
    dataset = make_dataset(len(QUESTIONS), kind=Agent.Kind.LLM, questions=QUESTIONS)
    return drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))


def _result(run: Run, question: str) -> Result:
    return Result.objects.get(run=run, case__question=question)


def test_the_over_long_case_errors_with_a_readable_message(huge_run, fake_llm):
    result = _result(huge_run, HUGE_QUESTION)

    assert result.status == Result.Status.ERROR
    assert result.error == READABLE
    assert not any(leak in result.error for leak in LEAKS)
    assert result.score is None
    assert result.attempts == 1


def test_the_over_long_case_is_asked_once_and_never_judged(huge_run, fake_llm):
    result = _result(huge_run, HUGE_QUESTION)

    asked = [r for r in fake_llm.requests if r.task == "agent" and r.trace.get("case") == str(result.pk)]
    assert len(asked) == 1
    assert asked[0].status == 400
    assert asked[0].response["error"]["code"] == "context_length_exceeded"
    assert fake_llm.count(task="judge", case=result.pk) == 0


def test_the_other_cases_are_scored_normally(huge_run, fake_llm):
    others = {question: _result(huge_run, question) for question in QUESTIONS if question != HUGE_QUESTION}

    for result in others.values():
        assert result.error == ""
        assert result.actual_answer.startswith("Fake answer to:")
        assert fake_llm.count(task="agent", case=result.pk) == 1
        assert fake_llm.count(task="judge", case=result.pk) == 1
    statuses = {question: (result.status, result.score) for question, result in others.items()}
    assert statuses == {
        QUESTIONS[0]: (Result.Status.PASS, 8),
        QUESTIONS[2]: (Result.Status.PASS, 8),
        QUESTIONS[3]: (Result.Status.FAIL, 2),
    }


def test_the_run_completes_with_one_error_and_its_summary(huge_run):
    assert huge_run.status == Run.Status.COMPLETED
    assert (huge_run.total, huge_run.completed) == (4, 4)
    assert (huge_run.passed, huge_run.failed, huge_run.errored) == (2, 1, 1)
    assert huge_run.average_score == pytest.approx(6)  # (8 + 8 + 2) / 3: the error has no score
    assert huge_run.error == ""
    assert huge_run.summary  # the summary quotes questions cut short, so it fits the window


def test_the_run_page_shows_the_message_on_the_error_card(huge_run, client_alice):
    position = _result(huge_run, HUGE_QUESTION).case.position
    response = client_alice.get(reverse("runs:detail", args=[huge_run.agent_id, huge_run.pk]))

    assert response.status_code == 200
    body = response.content.decode()
    start = body.index(f'<li id="case-{position}"')
    card = body[start : body.index("</li>", body.index("</article>", start))]
    assert '<span class="badge badge-error">Error</span>' in card
    assert "The conversation is longer than the model&#x27;s context window." in card
    for leak in LEAKS:
        assert leak not in body, leak
