import pytest
from django.core.exceptions import ValidationError

from datasets.models import Dataset, Document
from runs import services
from runs.models import Result, Run, RunCase
from tests.factories import TestCaseFactory
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def test_it_snapshots_cases_documents_and_scoring(make_dataset, alice, no_llm):
    dataset = make_dataset(
        1,
        dataset={"acceptance_criteria": "Must name 30 days", "pass_threshold": 8, "judge_prompt": "Be harsh."},
        case_id="refund-1",
        document_context="Refund policy excerpt",
        turns=[{"user": "Hi", "expected": "Hello"}],
        expected_tools=[{"name": "lookup_order", "args": {"order_id": "A-1"}}],
        trajectory_mode="unordered",
        check_tool_args=True,
        expected_context=["Refunds are available within 30 days."],
        judge_guideline="Numbers must be exact.",
        tags=["billing"],
        smoke_guidance="Use slang",
        tests_rule="Refund rule 1",
        source_file="policy.pdf",
        source_location="page 2",
        source_span="within 30 days",
    )
    document = Document.objects.create(
        team=dataset.agent.team,
        dataset=dataset,
        original_name="policy.pdf",
        file_type="pdf",
        text="Refunds within 30 days.",
    )
    dataset.cases.get().documents.add(document)

    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)

    case = RunCase.objects.get(run=run)
    assert case.case_id == "refund-1"
    assert case.question.startswith("Question 01")
    assert case.expected_answer == "Refunds are available within 30 days of purchase."
    assert case.data["documents"] == [{"id": document.pk, "name": "policy.pdf", "file_type": "pdf"}]
    assert case.data["turns"] == [{"user": "Hi", "expected": "Hello"}]
    assert case.data["expected_tools"] == [{"name": "lookup_order", "args": {"order_id": "A-1"}}]
    assert case.data["trajectory_mode"] == "unordered"
    assert case.data["check_tool_args"] is True
    for name in (
        "document_context",
        "expected_context",
        "judge_guideline",
        "tags",
        "smoke_guidance",
        "tests_rule",
        "source_file",
        "source_location",
        "source_span",
        "extra",
    ):
        assert name in case.data
    assert run.scoring["acceptance_criteria"] == "Must name 30 days"
    assert run.scoring["pass_threshold"] == 8
    assert run.scoring["judge_prompt"] == "Be harsh."
    assert run.agent_version == dataset.agent.current_version
    assert run.dataset_name == dataset.name
    assert run.created_by == alice
    assert run.status == Run.Status.PENDING


def test_it_pre_creates_a_result_per_repeat_and_queues_the_first_window(make_dataset, alice, no_llm, settings):
    settings.EVALSITE_RUN_CONCURRENCY = 3
    dataset = make_dataset(4, dataset={"number_of_requests": 2})

    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)

    assert run.total == 8
    assert run.concurrency == 3
    assert Result.objects.filter(run=run).count() == 8
    assert sorted(Result.objects.filter(run=run).values_list("repeat", flat=True)) == [0] * 4 + [1] * 4
    queued = Result.objects.filter(run=run, status=Result.Status.QUEUED)
    assert queued.count() == 3
    assert all(result.token and result.queued_at for result in queued)


def test_it_enqueues_the_first_window_after_commit(make_dataset, alice, no_llm, django_capture_on_commit_callbacks):
    dataset = make_dataset(5)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    assert len(callbacks) == 1  # one callback sends the window's three task messages


def test_the_same_request_key_never_makes_a_second_run(make_dataset, alice, no_llm):
    dataset = make_dataset(2)
    first = services.run_start(agent=dataset.agent, dataset=dataset, user=alice, request_key="k-123")
    second = services.run_start(agent=dataset.agent, dataset=dataset, user=alice, request_key="k-123")
    assert first.pk == second.pk
    assert Run.objects.count() == 1
    third = services.run_start(agent=dataset.agent, dataset=dataset, user=alice, request_key="k-456")
    assert third.pk != first.pk


@pytest.mark.parametrize(
    ("status", "message"),
    [(Dataset.Status.EXTRACTING, "still being prepared"), (Dataset.Status.FAILED, "failed to import")],
)
def test_it_refuses_a_dataset_that_is_not_ready(make_dataset, alice, status, message):
    dataset = make_dataset(2, dataset={"status": status})
    with pytest.raises(ValidationError, match=message):
        services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    assert not Run.objects.exists()


def test_it_refuses_an_empty_dataset(make_dataset, alice):
    dataset = make_dataset(0)
    with pytest.raises(ValidationError, match="no test cases"):
        services.run_start(agent=dataset.agent, dataset=dataset, user=alice)


def test_it_refuses_another_agents_dataset(make_dataset, alice):
    dataset = make_dataset(1)
    other = make_dataset(1)
    with pytest.raises(ValidationError, match="another agent"):
        services.run_start(agent=other.agent, dataset=dataset, user=alice)


def test_smoke_variants_are_skipped_with_a_reason_without_a_model(make_dataset, alice, no_llm):
    dataset = make_dataset(1, smoke_count=2)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    variants = Result.objects.filter(run=run, variant__gt=0)
    assert variants.count() == 2
    assert {v.status for v in variants} == {Result.Status.SKIPPED}
    assert "need a model" in variants[0].error
    assert run.total == 1


def test_without_a_judge_model_the_run_uses_the_offline_scorer(make_dataset, alice, no_llm):
    dataset = make_dataset(1)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    assert run.scorer == Run.Scorer.OFFLINE
    assert run.judge_model == ""


def test_the_dataset_judge_model_override_is_recorded(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, dataset={"judge_model": "openai/strict-judge"})
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    assert run.scorer == Run.Scorer.LLM
    assert run.judge_model == "openai/strict-judge"


def test_editing_the_dataset_after_start_does_not_change_the_run(make_dataset, alice, no_llm):
    dataset = make_dataset(2, dataset={"pass_threshold": 7})
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)

    first = dataset.cases.order_by("position").first()
    first.question = "Edited question about support hours?"
    first.expected_answer = "Edited expected answer."
    first.save()
    dataset.cases.order_by("position").last().delete()
    TestCaseFactory(dataset=dataset, position=9, question="A case added later")
    dataset.pass_threshold = 2
    dataset.acceptance_criteria = "Changed"
    dataset.save()

    run = drive(run)
    assert run.total == 2
    assert run.scoring["pass_threshold"] == 7
    assert run.scoring["acceptance_criteria"] == ""
    questions = list(Result.objects.filter(run=run).order_by("case__position").values_list("question", flat=True))
    assert all("refund window" in question for question in questions)
    assert RunCase.objects.filter(run=run, expected_answer="Edited expected answer.").count() == 0


def test_it_refuses_an_llm_agent_without_a_model_with_the_reason(make_dataset, alice, no_llm):
    from agents.models import Agent

    dataset = make_dataset(2, kind=Agent.Kind.LLM)
    with pytest.raises(ValidationError, match="no model") as error:
        services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    assert error.value.code == "agent_not_runnable"
    assert not Run.objects.exists()


def test_a_rerun_with_a_version_that_cannot_answer_is_refused(make_dataset, alice, no_llm):
    from agents.models import Agent, AgentVersion
    from tests.runs.conftest import drive

    dataset = make_dataset(2, kind=Agent.Kind.HTTP, version={"http_url": "http://127.0.0.1:9/agent"})
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    broken = AgentVersion.objects.create(agent=dataset.agent, number=2, http_url="")
    with pytest.raises(ValidationError, match="no endpoint URL"):
        services.run_rerun(run=run, user=alice, version=broken)
