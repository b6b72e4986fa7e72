"""The uploaded document is a case's source (provenance), never an input of the agent under test.

An extracted dataset is run against a knowledge agent, an llm agent and an http agent:
what each receives (its input, its documents, the links it is sent) holds nothing of the
spreadsheet the cases came from, whose rows carry the expected answers.
"""

import json

import pytest

from agents.models import Agent
from runs import services
from runs.models import Result
from tests.agents.test_adapters import FakeAgentServer
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401 - fixture
from tests.datasets.files import xlsx_bytes
from tests.factories import AgentFactory
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

SECRET = "ZEBRA-4242"
PLAN = xlsx_bytes(
    {
        "Plan": [
            ["Question", "Expected answer"],
            ["What is the partner discount code?", f"The partner discount code is {SECRET}."],
            ["Which regions host the Enterprise plan?", f"Frankfurt and Dublin (internal note {SECRET})."],
        ]
    }
)


@pytest.fixture
def agent_server():
    server = FakeAgentServer()
    yield server
    server.stop()


def _extracted(agent: Agent):
    dataset = extract(agent, "Test plan.xlsx", PLAN)
    assert dataset.status == dataset.Status.READY, dataset.failure_reason
    return dataset


def test_an_extracted_case_keeps_the_upload_as_its_source_and_has_no_attachment(team, no_llm):
    dataset = _extracted(AgentFactory(team=team))
    document = dataset.documents.get()
    for case in dataset.cases.all():
        assert case.source_document == document
        assert case.source_file == "Test plan.xlsx"
        assert case.source_location.startswith("Plan row")
        assert list(case.documents.all()) == []


def test_a_knowledge_agent_never_reads_the_source_file(team, alice, no_llm):
    agent = AgentFactory(team=team, kind=Agent.Kind.KNOWLEDGE)
    dataset = _extracted(agent)
    run = drive(services.run_start(agent=agent, dataset=dataset, user=alice))
    results = list(Result.objects.filter(run=run))
    assert len(results) == 2
    for case in run.cases.all():
        assert case.data["documents"] == []
    for result in results:
        assert result.status != Result.Status.ERROR, result.error
        assert SECRET not in result.actual_answer
        assert SECRET not in json.dumps(result.retrieval_context)


def test_an_llm_agent_prompt_holds_nothing_of_the_source_file(team, alice, fake_llm):
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM)
    dataset = _extracted(agent)
    fake_llm.add_rule(task="agent", reply="I do not know.")
    drive(services.run_start(agent=agent, dataset=dataset, user=alice))
    asked = [request for request in fake_llm.requests if request.task == "agent"]
    assert len(asked) == 2
    for request in asked:
        assert SECRET not in json.dumps(request.body)
        assert "Test plan.xlsx" not in json.dumps(request.body)


def test_an_http_agent_gets_no_link_to_the_source_file(team, alice, no_llm, agent_server):
    agent = AgentFactory(team=team, kind=Agent.Kind.HTTP, version__http_url=agent_server.url)
    dataset = _extracted(agent)
    run = drive(services.run_start(agent=agent, dataset=dataset, user=alice))
    assert len(agent_server.received) == 2, [r.error for r in run.results.all()]
    for body in agent_server.received:
        assert body["documents"] == []
        assert SECRET not in json.dumps(body)
        assert "/documents/" not in json.dumps(body)


def test_the_team_may_choose_to_let_the_agent_read_the_upload(team, alice, no_llm, agent_server):
    agent = AgentFactory(team=team, kind=Agent.Kind.HTTP, version__http_url=agent_server.url)
    from datasets.extraction.services import dataset_extract
    from datasets.models import Dataset
    from tests.datasets.extraction_helpers import confirm_mapping, uploaded_dataset

    dataset = uploaded_dataset(agent, "Contract.xlsx", PLAN)
    dataset.agent_reads_source = True
    dataset.save(update_fields=["agent_reads_source"])
    dataset_extract(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.REVIEW  # a table: the team confirms its mapping first
    confirm_mapping(dataset)
    document = dataset.documents.get()
    assert all(list(case.documents.all()) == [document] for case in dataset.cases.all())
    assert all(case.source_document == document for case in dataset.cases.all())
    drive(services.run_start(agent=agent, dataset=dataset, user=alice))
    assert [d["name"] for d in agent_server.received[0]["documents"]] == ["Contract.xlsx"]
