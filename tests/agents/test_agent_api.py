"""The agents API (agents/api.py): what the agent pages do, with the pages' rules and messages,
token auth, team isolation and idempotent creation."""

import pytest

from accounts.services import api_token_create
from agents import services
from agents.models import Agent, AgentVersion
from runs.models import Run
from tests.agents.conftest import SECRET
from tests.factories import AgentFactory, DatasetFactory, MembershipFactory, TeamFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db
JSON = "application/json"


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.fixture
def outsider_agent(other_team):
    return AgentFactory(team=other_team, name="Globex bot")


def _errors(response) -> dict[str, list[str]]:
    """{"field" or "tools.0.name": [messages]} of a 422."""
    found: dict[str, list[str]] = {}
    for entry in response.json()["detail"]:
        found.setdefault(".".join(str(part) for part in entry["loc"][2:]), []).append(entry["msg"])
    return found


# ---- create -------------------------------------------------------------------------------


def test_create_makes_an_llm_agent_with_its_tools_and_version_one(client, auth, team, alice):
    body = {
        "name": "Helper",
        "kind": "llm",
        "instructions": "Be helpful.",
        "temperature": 0.3,
        "tools": [{"name": "lookup_order", "parameters": {"type": "object", "properties": {}}, "result": "ok"}],
    }
    response = client.post("/api/agents", body, content_type=JSON, **auth)

    assert response.status_code == 201, response.content
    agent = Agent.objects.get(team=team, name="Helper")
    assert response.json()["id"] == agent.pk
    version = agent.current_version
    assert (version.number, version.created_by, version.temperature) == (1, alice, 0.3)
    assert version.tools[0]["name"] == "lookup_order"
    assert response.json()["current_version"]["config"]["tools"][0]["result"] == "ok"


def test_create_refuses_what_the_page_refuses_with_its_messages(client, auth):
    body = {"name": "Helper", "kind": "llm", "tools": [{"name": "bad name"}, {"name": "x", "parameters": {"a": 1}}]}
    response = client.post("/api/agents", body, content_type=JSON, **auth)

    assert response.status_code == 422
    errors = _errors(response)
    assert errors["instructions"] == ["An LLM agent needs instructions (its system prompt)."]
    assert errors["tools.0.name"] == ["Use 1-64 letters, digits, _ or - (no spaces)."]
    assert errors["tools.1.parameters"] == [
        'The parameters must be a JSON schema object: {"type": "object", "properties": {…}}.'
    ]
    assert not Agent.objects.exists()


def test_a_taken_name_is_refused_with_the_pages_message(client, auth, agent):
    body = {"name": "support BOT", "kind": "knowledge", "knowledge": "Refunds: 30 days."}
    response = client.post("/api/agents", body, content_type=JSON, **auth)

    assert response.status_code == 422
    assert _errors(response) == {"name": ["An agent called “support BOT” already exists in this team."]}


def test_a_setting_of_another_kind_is_refused_not_dropped(client, auth):
    body = {"name": "FAQ", "kind": "knowledge", "knowledge": "Refunds.", "http_url": "https://x.example"}
    response = client.post("/api/agents", body, content_type=JSON, **auth)

    assert response.status_code == 422
    assert list(_errors(response)) == ["http_url"]


def test_the_same_idempotency_key_gives_the_same_agent(client, auth, team):
    body = {"name": "FAQ", "kind": "knowledge", "knowledge": "Refunds: 30 days."}
    first = client.post("/api/agents", body, content_type=JSON, HTTP_IDEMPOTENCY_KEY="ci-1", **auth)
    again = client.post("/api/agents", body, content_type=JSON, HTTP_IDEMPOTENCY_KEY="ci-1", **auth)

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert Agent.objects.filter(team=team).count() == 1


def test_the_same_key_with_another_body_is_a_422_naming_the_header(client, auth, team):
    body = {"name": "FAQ", "kind": "knowledge", "knowledge": "Refunds: 30 days."}
    client.post("/api/agents", body, content_type=JSON, HTTP_IDEMPOTENCY_KEY="ci-1", **auth)
    other = client.post(
        "/api/agents", {**body, "name": "FAQ 2"}, content_type=JSON, HTTP_IDEMPOTENCY_KEY="ci-1", **auth
    )

    assert other.status_code == 422
    assert other.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert Agent.objects.filter(team=team).count() == 1


def test_a_user_in_two_teams_names_the_team_and_not_another_one(client, auth, alice, team, other_team):
    MembershipFactory(team=TeamFactory(name="Second"), user=alice)
    body = {"name": "FAQ", "kind": "knowledge", "knowledge": "Refunds."}

    assert _errors(client.post("/api/agents", body, content_type=JSON, **auth)) == {
        "team": ["Choose a team (its id): you are in several."]
    }
    assert client.post("/api/agents", {**body, "team": other_team.pk}, content_type=JSON, **auth).status_code == 404
    created = client.post("/api/agents", {**body, "team": team.pk}, content_type=JSON, **auth)
    assert created.status_code == 201
    assert created.json()["team_id"] == team.pk


def test_no_token_is_a_401(client):
    assert client.get("/api/agents").status_code == 401
    assert client.post("/api/agents", {"name": "x"}, content_type=JSON).status_code == 401


# ---- read, list ---------------------------------------------------------------------------


def test_list_and_detail_show_only_the_users_teams(client, auth, agent, outsider_agent):
    listed = client.get("/api/agents", **auth).json()

    assert [item["id"] for item in listed["items"]] == [agent.pk]
    assert client.get(f"/api/agents/{agent.pk}", **auth).json()["name"] == "Support bot"
    assert client.get(f"/api/agents/{outsider_agent.pk}", **auth).status_code == 404


def test_header_values_are_never_read_back(client, auth, http_agent):
    body = client.get(f"/api/agents/{http_agent.pk}", **auth)

    assert SECRET not in body.text
    assert body.json()["current_version"]["config"]["http_header_names"] == ["Authorization", "X-Env"]


# ---- update -------------------------------------------------------------------------------


def test_a_changed_configuration_becomes_a_new_version_with_the_note(client, auth, llm_agent, alice):
    response = client.patch(
        f"/api/agents/{llm_agent.pk}", {"guardrails": "Be kind.", "note": "Kinder"}, content_type=JSON, **auth
    )

    assert response.status_code == 200, response.content
    llm_agent.refresh_from_db()
    version = llm_agent.current_version
    assert (version.number, version.note, version.guardrails) == (2, "Kinder", "Be kind.")
    assert version.tools == services.version_config(llm_agent.versions.get(number=1))["tools"]  # kept
    assert response.json()["current_version"]["number"] == 2


def test_an_unchanged_configuration_makes_no_version(client, auth, llm_agent):
    response = client.patch(f"/api/agents/{llm_agent.pk}", {"name": "Renamed"}, content_type=JSON, **auth)

    assert response.status_code == 200
    llm_agent.refresh_from_db()
    assert (llm_agent.name, llm_agent.versions.count()) == ("Renamed", 1)


def test_headers_left_out_or_sent_empty_keep_their_stored_values(client, auth, http_agent):
    client.patch(f"/api/agents/{http_agent.pk}", {"http_timeout": 40}, content_type=JSON, **auth)
    http_agent.refresh_from_db()
    assert http_agent.current_version.http_headers["Authorization"] == f"Bearer {SECRET}"

    headers = {"Authorization": "", "X-New": "1"}
    response = client.patch(f"/api/agents/{http_agent.pk}", {"http_headers": headers}, content_type=JSON, **auth)

    assert response.status_code == 200
    http_agent.refresh_from_db()
    assert http_agent.current_version.http_headers == {"Authorization": f"Bearer {SECRET}", "X-New": "1"}


def test_update_refuses_with_the_pages_messages(client, auth, http_agent, llm_agent):
    bad_header = client.patch(
        f"/api/agents/{http_agent.pk}", {"http_headers": {"X-New": ""}}, content_type=JSON, **auth
    )
    taken = client.patch(f"/api/agents/{llm_agent.pk}", {"name": "Deployed bot"}, content_type=JSON, **auth)

    assert _errors(bad_header) == {"http_headers": ["Enter a value for the header X-New."]}
    assert _errors(taken) == {"name": ["An agent called “Deployed bot” already exists in this team."]}


def test_another_teams_agent_cannot_be_changed_or_deleted(client, auth, outsider_agent):
    assert client.patch(f"/api/agents/{outsider_agent.pk}", {"name": "x"}, content_type=JSON, **auth).status_code == 404
    assert client.delete(f"/api/agents/{outsider_agent.pk}", **auth).status_code == 404
    assert Agent.objects.filter(pk=outsider_agent.pk, name="Globex bot").exists()


# ---- delete -------------------------------------------------------------------------------


def test_delete_removes_the_agent(client, auth, agent):
    assert client.delete(f"/api/agents/{agent.pk}", **auth).status_code == 204
    assert not Agent.objects.filter(pk=agent.pk).exists()


def test_delete_is_refused_while_a_run_is_in_progress(client, auth, agent):
    build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec()], status=Run.Status.RUNNING)

    response = client.delete(f"/api/agents/{agent.pk}", **auth)

    assert response.status_code == 409
    assert response.json() == {
        "detail": "An evaluation of this agent is running. Stop it or let it finish, then delete the agent."
    }


# ---- versions, diff, rollback ---------------------------------------------------------------


@pytest.fixture
def two_versions(llm_agent, alice):
    services.agent_update(agent=llm_agent, user=alice, note="Stricter", guardrails="Never promise anything.")
    llm_agent.refresh_from_db()
    return llm_agent


def test_versions_list_newest_first_with_the_current_marked(client, auth, two_versions):
    items = client.get(f"/api/agents/{two_versions.pk}/versions", **auth).json()["items"]

    assert [(v["number"], v["is_current"], v["note"]) for v in items] == [(2, True, "Stricter"), (1, False, "Created")]
    first = two_versions.versions.get(number=1)
    detail = client.get(f"/api/agents/{two_versions.pk}/versions/{first.pk}", **auth).json()
    assert detail["config"]["guardrails"] == "Never promise refunds after 30 days."


def test_the_diff_is_the_one_the_versions_page_shows(client, auth, two_versions, client_alice):
    response = client.get(f"/api/agents/{two_versions.pk}/versions/diff", **auth)

    body = response.json()
    assert (body["a"]["number"], body["b"]["number"]) == (1, 2)
    assert [f["field"] for f in body["fields"]] == ["guardrails"]
    assert {"kind": "del", "text": "Never promise refunds after 30 days."} in body["fields"][0]["lines"]
    assert {"kind": "add", "text": "Never promise anything."} in body["fields"][0]["lines"]
    page = client_alice.get(f"/agents/{two_versions.pk}/versions/").text
    assert "Never promise anything." in page


def test_the_diff_of_another_agents_version_is_a_404(client, auth, two_versions, outsider_agent):
    foreign = outsider_agent.current_version.pk
    assert client.get(f"/api/agents/{two_versions.pk}/versions/diff?a={foreign}", **auth).status_code == 404
    assert client.get(f"/api/agents/{outsider_agent.pk}/versions/diff", **auth).status_code == 404


def test_rollback_saves_the_old_configuration_as_a_new_version_once_per_key(client, auth, two_versions):
    first = two_versions.versions.get(number=1)
    url = f"/api/agents/{two_versions.pk}/versions/{first.pk}/rollback"

    made = client.post(url, HTTP_IDEMPOTENCY_KEY="undo-1", **auth)
    again = client.post(url, HTTP_IDEMPOTENCY_KEY="undo-1", **auth)

    assert (made.status_code, again.status_code) == (201, 200)
    assert made.json() == again.json()
    assert made.json()["number"] == 3 and made.json()["rolled_back_from"] == 1 and made.json()["is_current"]
    assert AgentVersion.objects.filter(agent=two_versions).count() == 3


def test_a_rollback_to_the_current_configuration_is_a_409_with_the_pages_message(client, auth, two_versions):
    current = two_versions.current_version
    response = client.post(f"/api/agents/{two_versions.pk}/versions/{current.pk}/rollback", **auth)

    assert response.status_code == 409
    assert response.json() == {"detail": "Version 2 is already the current version."}


def test_rollback_of_another_teams_agent_is_a_404(client, auth, outsider_agent):
    version = outsider_agent.current_version
    assert client.post(f"/api/agents/{outsider_agent.pk}/versions/{version.pk}/rollback", **auth).status_code == 404
