from django.urls import reverse

from agents.models import Agent
from tests.agents.conftest import SECRET

URL = reverse("agents:create")


def _management(prefix: str, total: int = 0, initial: int = 0) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


def _post_data(**fields) -> dict[str, str]:
    return {**_management("tools"), **_management("headers"), "http_timeout": "30", **fields}


def test_the_form_offers_the_three_kinds(client_alice):
    response = client_alice.get(URL)

    assert response.status_code == 200
    for kind in ("llm", "http", "knowledge"):
        assert f'value="{kind}"' in response.text


def test_the_kind_can_be_preselected(client_alice):
    response = client_alice.get(URL, {"kind": "http"})
    assert 'value="http" checked' in response.text


def test_it_creates_a_knowledge_agent_with_version_one(client_alice, team, alice):
    response = client_alice.post(
        URL, _post_data(name="FAQ", kind="knowledge", instructions="Answer.", knowledge="Refunds: 30 days.")
    )

    agent = Agent.objects.get(team=team, name="FAQ")
    assert response.status_code == 302
    assert response["Location"] == reverse("agents:detail", args=[agent.pk])
    assert agent.current_version.number == 1
    assert agent.current_version.created_by == alice
    assert agent.current_version.knowledge == "Refunds: 30 days."


def test_it_creates_an_llm_agent_with_tools(client_alice, team):
    data = _post_data(
        name="Helper",
        kind="llm",
        instructions="Be helpful.",
        model="openai/gpt-4o-mini",
        temperature="0.3",
        **_management("tools", total=1),
        **{
            "tools-0-name": "lookup_order",
            "tools-0-description": "Find an order",
            "tools-0-parameters": '{"type": "object", "properties": {"id": {"type": "string"}}}',
            "tools-0-result": "shipped",
        },
    )

    client_alice.post(URL, data)

    version = Agent.objects.get(team=team, name="Helper").current_version
    assert version.model == "openai/gpt-4o-mini"
    assert version.temperature == 0.3
    assert version.tools == [
        {
            "name": "lookup_order",
            "description": "Find an order",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
            "result": "shipped",
        }
    ]


def test_invalid_tool_json_gets_a_clear_error(client_alice, team):
    data = _post_data(
        name="Helper",
        kind="llm",
        instructions="x",
        **_management("tools", total=1),
        **{"tools-0-name": "t", "tools-0-parameters": '{"type": "object",'},
    )

    response = client_alice.post(URL, data)

    assert response.status_code == 200
    assert "Not valid JSON" in response.text
    assert not Agent.objects.filter(team=team, name="Helper").exists()


def test_it_creates_an_http_agent_and_never_echoes_header_values(client_alice, team):
    data = _post_data(
        name="Bot",
        kind="http",
        http_url="https://bot.example.com/answer",
        http_timeout="15",
        **_management("headers", total=1),
        **{"headers-0-name": "Authorization", "headers-0-value": f"Bearer {SECRET}"},
    )

    response = client_alice.post(URL, data, follow=True)

    version = Agent.objects.get(team=team, name="Bot").current_version
    assert version.http_headers == {"Authorization": f"Bearer {SECRET}"}
    assert version.http_timeout == 15
    assert SECRET not in response.text


def test_each_kind_requires_its_essentials(client_alice):
    llm = client_alice.post(URL, _post_data(name="A", kind="llm"))
    http = client_alice.post(URL, _post_data(name="B", kind="http"))
    knowledge = client_alice.post(URL, _post_data(name="C", kind="knowledge"))

    assert "needs instructions" in llm.text
    assert "needs the URL" in http.text
    assert "add at least one passage" in knowledge.text
    assert not Agent.objects.exists()


def test_fields_of_other_kinds_are_ignored(client_alice, team):
    # The page hides the other kinds' sections; whatever they hold is neither validated nor saved.
    client_alice.post(
        URL, _post_data(name="K", kind="knowledge", knowledge="Facts.", http_url="not a url", guardrails="g")
    )

    version = Agent.objects.get(team=team, name="K").current_version
    assert (version.http_url, version.guardrails) == ("", "")


def test_a_duplicate_name_is_shown_as_a_field_error(client_alice, agent):
    response = client_alice.post(URL, _post_data(name="Support bot", kind="knowledge", knowledge="x"))

    assert response.status_code == 200
    assert "already exists" in response.text


def test_htmx_errors_swap_the_form_only(client_alice):
    response = client_alice.post(URL, _post_data(name="", kind="llm"), headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert 'id="agent-form"' in response.text
    assert "<html" not in response.text


def test_htmx_success_redirects_the_client(client_alice, team):
    response = client_alice.post(
        URL, _post_data(name="FAQ", kind="knowledge", knowledge="x"), headers={"HX-Request": "true"}
    )

    agent = Agent.objects.get(team=team, name="FAQ")
    assert response["HX-Redirect"] == reverse("agents:detail", args=[agent.pk])


def test_put_is_not_allowed(client_alice):
    assert client_alice.put(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, db):
    response = client.post(URL, _post_data(name="X", kind="knowledge", knowledge="x"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))
    assert not Agent.objects.exists()
