import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile

from agents import services
from agents.models import Agent, AgentVersion
from datasets.models import Dataset, Document
from runs.models import Run
from tests.agents.conftest import SECRET
from tests.factories import AgentFactory, DatasetFactory, TeamFactory, TestCaseFactory


def test_create_makes_version_one_and_points_at_it(team, alice):
    agent = services.agent_create(
        team=team, user=alice, name="  Helper ", kind=Agent.Kind.KNOWLEDGE, knowledge="Refunds within 30 days."
    )

    version = agent.current_version
    assert agent.name == "Helper"
    assert version.number == 1
    assert version.created_by == alice
    assert version.note == "Created"
    assert version.knowledge == "Refunds within 30 days."
    assert list(agent.versions.all()) == [version]


def test_create_refuses_a_duplicate_name_in_the_same_team(team, alice, agent):
    with pytest.raises(ValidationError) as error:
        services.agent_create(team=team, user=alice, name="support BOT", kind=Agent.Kind.KNOWLEDGE)
    assert "already exists" in str(error.value)


def test_the_same_name_is_fine_in_another_team(alice, agent):
    other = services.agent_create(team=TeamFactory(), user=alice, name=agent.name, kind=Agent.Kind.KNOWLEDGE)
    assert other.pk != agent.pk


def test_create_refuses_an_http_agent_without_url(team, alice):
    with pytest.raises(ValidationError) as error:
        services.agent_create(team=team, user=alice, name="Bot", kind=Agent.Kind.HTTP)
    assert "http_url" in error.value.message_dict
    assert not Agent.objects.filter(name="Bot").exists()


@pytest.mark.parametrize(
    "tools, message",
    [
        ([{"name": "bad name"}], "name must be"),
        ([{"name": "a"}, {"name": "a"}], "unique"),
        ([{"name": "a", "parameters": {"type": "array"}}], "type"),
        ("not a list", "list"),
    ],
)
def test_create_validates_tools(team, alice, tools, message):
    with pytest.raises(ValidationError) as error:
        services.agent_create(team=team, user=alice, name="Bot", kind=Agent.Kind.LLM, instructions="x", tools=tools)
    assert message in str(error.value)


def test_header_values_with_line_breaks_are_refused(team, alice):
    # A CR/LF in a value would smuggle extra headers into the request to the agent.
    with pytest.raises(ValidationError):
        services.agent_create(
            team=team,
            user=alice,
            name="Bot",
            kind=Agent.Kind.HTTP,
            http_url="https://x.example.com",
            http_headers={"X-A": "v\r\nX-Injected: 1"},
        )


def test_an_edit_creates_a_new_version_and_keeps_the_old_one(llm_agent, bob):
    first = llm_agent.current_version

    agent = services.agent_update(agent=llm_agent, user=bob, note="Stricter", guardrails="Never promise anything.")

    second = agent.current_version
    assert second.number == 2
    assert second.note == "Stricter"
    assert second.created_by == bob
    assert second.guardrails == "Never promise anything."
    # Everything else is carried over from version 1.
    assert second.instructions == first.instructions
    assert second.tools == first.tools
    first.refresh_from_db()
    assert first.guardrails == "Never promise refunds after 30 days."


def test_an_unchanged_save_creates_no_version(llm_agent, alice):
    version = llm_agent.current_version

    agent = services.agent_update(
        agent=llm_agent, user=alice, note="nothing", instructions=version.instructions, tools=version.tools
    )

    assert agent.current_version_id == version.pk
    assert agent.versions.count() == 1


def test_renaming_alone_creates_no_version(llm_agent, alice):
    agent = services.agent_update(agent=llm_agent, user=alice, name="Renamed", description="New text")

    assert (agent.name, agent.description) == ("Renamed", "New text")
    assert agent.versions.count() == 1


def test_a_changed_header_value_is_a_new_version(http_agent, alice):
    headers = {**http_agent.current_version.http_headers, "Authorization": "Bearer rotated"}

    agent = services.agent_update(agent=http_agent, user=alice, http_headers=headers)

    assert agent.current_version.number == 2
    assert agent.current_version.http_headers["Authorization"] == "Bearer rotated"


def test_versions_run_and_agent_pin_survive_edits(llm_agent, alice):
    """A run pins the version it used; later edits never change that version."""
    pinned = llm_agent.current_version
    run = Run.objects.create(agent=llm_agent, agent_version=pinned, dataset_name="d", status=Run.Status.COMPLETED)

    services.agent_update(agent=llm_agent, user=alice, instructions="Completely different.")

    run.refresh_from_db()
    assert run.agent_version == pinned
    assert run.agent_version.instructions == "You are the refund helper.\nBe brief."


def test_rollback_makes_a_new_version_equal_to_the_old_config(llm_agent, alice, bob):
    v1 = llm_agent.current_version
    services.agent_update(agent=llm_agent, user=alice, instructions="v2 text", temperature=1.0, tools=[])

    agent = services.agent_rollback(agent=llm_agent, version=v1, user=bob)

    v3 = agent.current_version
    assert v3.number == 3
    assert v3.note == "Rolled back to v1"
    assert v3.rolled_back_from == v1
    assert v3.created_by == bob
    assert services.version_config(v3) == services.version_config(v1)
    assert agent.versions.count() == 3  # history is never rewritten


def test_rollback_restores_header_values_too(http_agent, alice):
    v1 = http_agent.current_version
    services.agent_update(agent=http_agent, user=alice, http_headers={"Authorization": "Bearer other"})

    agent = services.agent_rollback(agent=http_agent, version=v1, user=alice)

    assert agent.current_version.http_headers == {"Authorization": f"Bearer {SECRET}", "X-Env": "staging"}


def test_rollback_to_the_current_version_is_refused(llm_agent, alice):
    with pytest.raises(ValidationError, match="already the current version"):
        services.agent_rollback(agent=llm_agent, version=llm_agent.current_version, user=alice)


def test_rollback_to_an_identical_config_is_refused(llm_agent, alice):
    v1 = llm_agent.current_version
    services.agent_update(agent=llm_agent, user=alice, instructions="changed")
    agent = services.agent_rollback(agent=llm_agent, version=v1, user=alice)  # v3 == v1

    with pytest.raises(ValidationError, match="nothing to roll back"):
        services.agent_rollback(agent=agent, version=v1, user=alice)


def test_rollback_refuses_another_agents_version(llm_agent, agent, alice):
    with pytest.raises(ValidationError):
        services.agent_rollback(agent=llm_agent, version=agent.current_version, user=alice)


def test_delete_removes_the_agent_with_versions_datasets_and_runs(team):
    agent = AgentFactory(team=team)
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset)
    Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset=dataset, dataset_name="d", status=Run.Status.COMPLETED
    )

    services.agent_delete(agent=agent)

    assert not Agent.objects.filter(pk=agent.pk).exists()
    assert not AgentVersion.objects.filter(agent_id=agent.pk).exists()
    assert not Dataset.objects.filter(pk=dataset.pk).exists()
    assert not Run.objects.filter(agent_id=agent.pk).exists()


def test_delete_is_refused_while_a_run_is_active(team):
    agent = AgentFactory(team=team)
    Run.objects.create(agent=agent, agent_version=agent.current_version, dataset_name="d", status=Run.Status.RUNNING)

    with pytest.raises(ValidationError, match="running"):
        services.agent_delete(agent=agent)
    assert Agent.objects.filter(pk=agent.pk).exists()


def test_delete_is_refused_while_a_dataset_is_extracting(team):
    agent = AgentFactory(team=team)
    DatasetFactory(agent=agent, status=Dataset.Status.EXTRACTING)

    with pytest.raises(ValidationError, match="extracted"):
        services.agent_delete(agent=agent)


def _document(dataset) -> Document:
    document = Document(team=dataset.agent.team, dataset=dataset, original_name="policy.md", file_type="md")
    document.file.save("policy.md", ContentFile(b"# Refunds"), save=True)
    return document


def test_delete_removes_the_documents_files_once_committed(
    team, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.MEDIA_ROOT = tmp_path
    agent = AgentFactory(team=team)
    document = _document(DatasetFactory(agent=agent))
    storage, name = document.file.storage, document.file.name

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.agent_delete(agent=agent)
    assert storage.exists(name)  # not before the rows are gone for good
    for callback in callbacks:
        callback()

    assert not storage.exists(name)


def test_a_refused_delete_keeps_the_documents_files(team, settings, tmp_path, django_capture_on_commit_callbacks):
    settings.MEDIA_ROOT = tmp_path
    agent = AgentFactory(team=team)
    document = _document(DatasetFactory(agent=agent))
    Run.objects.create(agent=agent, agent_version=agent.current_version, dataset_name="d", status=Run.Status.RUNNING)

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ValidationError, match="running"):
        services.agent_delete(agent=agent)

    assert document.file.storage.exists(document.file.name)
    assert Document.objects.filter(pk=document.pk).exists()
