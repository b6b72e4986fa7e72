import json

from django.urls import reverse

from agents.models import Agent
from tests.agents.conftest import SECRET, SECRET_2


def _url(agent: Agent) -> str:
    return reverse("agents:edit", args=[agent.pk])


def _management(prefix: str, total: int, initial: int) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


def _llm_data(agent: Agent, **changes) -> dict[str, str]:
    """The edit form as the browser would submit it, unchanged unless told otherwise."""
    version = agent.current_version
    tool = version.tools[0]
    data = {
        "name": agent.name,
        "description": agent.description,
        "instructions": version.instructions,
        "skills": version.skills,
        "knowledge": version.knowledge,
        "guardrails": version.guardrails,
        "model": version.model,
        "temperature": "" if version.temperature is None else str(version.temperature),
        "http_timeout": "30",
        "note": "",
        **_management("tools", 1, 1),
        "tools-0-name": tool["name"],
        "tools-0-description": tool["description"],
        "tools-0-parameters": json.dumps(tool["parameters"], indent=2),
        "tools-0-result": tool["result"],
        **_management("headers", 1, 0),
    }
    return {**data, **changes}


def _http_data(agent: Agent, rows: list[dict[str, str]], **changes) -> dict[str, str]:
    existing = sum(1 for row in rows if row.get("existing"))
    data = {
        "name": agent.name,
        "description": agent.description,
        "http_url": agent.current_version.http_url,
        "http_timeout": str(agent.current_version.http_timeout),
        "note": "",
        **_management("tools", 0, 0),
        **_management("headers", len(rows), existing),
    }
    for index, row in enumerate(rows):
        for key, value in row.items():
            data[f"headers-{index}-{key}"] = value
    return {**data, **changes}


def test_the_form_is_prefilled_with_the_current_version(client_alice, llm_agent):
    response = client_alice.get(_url(llm_agent))

    assert response.status_code == 200
    assert "You are the refund helper." in response.text
    assert 'value="lookup_order"' in response.text
    assert "What changed?" in response.text


def test_a_changed_save_makes_a_version_with_the_note(client_alice, llm_agent, alice):
    response = client_alice.post(
        _url(llm_agent), _llm_data(llm_agent, guardrails="Be strict.", note="Stricter guardrails")
    )

    llm_agent.refresh_from_db()
    assert response.status_code == 302
    assert llm_agent.current_version.number == 2
    assert llm_agent.current_version.note == "Stricter guardrails"
    assert llm_agent.current_version.guardrails == "Be strict."


def test_an_unchanged_save_makes_no_version(client_alice, llm_agent):
    response = client_alice.post(_url(llm_agent), _llm_data(llm_agent, note="just looking"), follow=True)

    llm_agent.refresh_from_db()
    assert llm_agent.versions.count() == 1
    assert "no new version" in response.text


def test_removing_a_tool_is_a_change(client_alice, llm_agent):
    client_alice.post(_url(llm_agent), _llm_data(llm_agent, **{"tools-0-DELETE": "on"}))

    llm_agent.refresh_from_db()
    assert llm_agent.current_version.tools == []
    assert llm_agent.current_version.number == 2


def test_the_edit_form_never_renders_header_values(client_alice, http_agent):
    response = client_alice.get(_url(http_agent))

    assert SECRET not in response.text
    assert "staging" not in response.text
    assert "Authorization" in response.text
    assert "(unchanged)" in response.text


def test_a_blank_header_value_keeps_the_stored_one(client_alice, http_agent):
    rows = [
        {"existing": "True", "name": "Authorization", "value": ""},
        {"existing": "True", "name": "X-Env", "value": ""},
        {"name": "", "value": ""},
    ]
    client_alice.post(_url(http_agent), _http_data(http_agent, rows))

    http_agent.refresh_from_db()
    assert http_agent.versions.count() == 1  # nothing changed
    assert http_agent.current_version.http_headers == {"Authorization": f"Bearer {SECRET}", "X-Env": "staging"}


def test_header_values_can_be_replaced_removed_and_added(client_alice, http_agent):
    rows = [
        {"existing": "True", "name": "Authorization", "value": f"Bearer {SECRET_2}"},
        {"existing": "True", "name": "X-Env", "value": "", "remove": "on"},
        {"name": "X-Trace", "value": "on"},
    ]
    response = client_alice.post(_url(http_agent), _http_data(http_agent, rows), follow=True)

    http_agent.refresh_from_db()
    assert http_agent.current_version.http_headers == {"Authorization": f"Bearer {SECRET_2}", "X-Trace": "on"}
    assert SECRET_2 not in response.text


def test_a_forged_existing_flag_cannot_conjure_a_value(client_alice, http_agent):
    rows = [{"existing": "True", "name": "X-Unknown", "value": ""}]

    response = client_alice.post(_url(http_agent), _http_data(http_agent, rows))

    assert response.status_code == 200
    assert "Enter a value for the header X-Unknown" in response.text
    assert http_agent.versions.count() == 1


def test_a_new_header_needs_a_value(client_alice, http_agent):
    rows = [{"name": "X-New", "value": ""}]

    response = client_alice.post(_url(http_agent), _http_data(http_agent, rows))

    assert "Enter a value for the header X-New" in response.text


def test_the_kind_cannot_be_changed(client_alice, http_agent):
    rows = [{"existing": "True", "name": "Authorization", "value": ""}]
    client_alice.post(_url(http_agent), _http_data(http_agent, rows, kind="llm", model="gpt-4o", skills="hi"))

    http_agent.refresh_from_db()
    assert http_agent.kind == Agent.Kind.HTTP
    # An LLM's settings are not an HTTP agent's (its description for generation is: see below).
    assert (http_agent.current_version.model, http_agent.current_version.skills) == ("", "")


def test_htmx_success_redirects_the_client(client_alice, llm_agent):
    response = client_alice.post(
        _url(llm_agent), _llm_data(llm_agent, skills="New skill"), headers={"HX-Request": "true"}
    )

    assert response["HX-Redirect"] == reverse("agents:detail", args=[llm_agent.pk])


def test_htmx_errors_swap_the_form_only(client_alice, llm_agent):
    response = client_alice.post(_url(llm_agent), _llm_data(llm_agent, name=""), headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert response.text.lstrip().startswith("<form")
    assert "Please fix the highlighted fields" in response.text


def test_outsiders_get_404(client_charlie, llm_agent):
    assert client_charlie.get(_url(llm_agent)).status_code == 404
    assert client_charlie.post(_url(llm_agent), _llm_data(llm_agent, skills="x")).status_code == 404
    assert llm_agent.versions.count() == 1


def test_teammates_can_edit(client_bob, llm_agent, bob):
    client_bob.post(_url(llm_agent), _llm_data(llm_agent, skills="Bob's skill"))

    llm_agent.refresh_from_db()
    assert llm_agent.current_version.created_by == bob


def test_put_is_not_allowed(client_alice, llm_agent):
    assert client_alice.put(_url(llm_agent)).status_code == 405


def test_anonymous_users_are_sent_to_login(client, llm_agent):
    response = client.get(_url(llm_agent))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))


def test_an_http_agent_keeps_a_description_used_only_for_generation(client_alice, http_agent):
    from datasets.generation.generator import agent_rules

    rows = [
        {"existing": "True", "name": "Authorization", "value": ""},
        {"existing": "True", "name": "X-Env", "value": ""},
    ]
    data = _http_data(http_agent, rows, instructions="Answers billing questions.", knowledge="Refunds take 5 days.")
    client_alice.post(_url(http_agent), data)

    http_agent.refresh_from_db()
    version = http_agent.current_version
    assert (version.number, version.instructions, version.knowledge) == (
        2,
        "Answers billing questions.",
        "Refunds take 5 days.",
    )
    assert version.http_headers == {"Authorization": f"Bearer {SECRET}", "X-Env": "staging"}
    assert [rule.text for rule in agent_rules(version)] == ["Answers billing questions.", "Refunds take 5 days."]
    page = client_alice.get(_url(http_agent)).text
    assert "Description for test generation" in page and "never receives this text" in page


def test_the_llm_section_offers_a_timeout_that_defaults_to_the_console(client_alice, llm_agent, settings):
    settings.EVALSITE_LLM_TIMEOUT = 60.0
    settings.EVALSITE_LLM_TIMEOUTS = {"agent": 90.0}
    text = client_alice.get(_url(llm_agent)).text

    assert 'name="llm_timeout"' in text and 'placeholder="90"' in text
    assert "Blank uses the console&#x27;s default for agent answers (90 s)" in text
    assert "EVALSITE_LLM_RETRY_TIMEOUTS" in text


def test_an_llm_agent_saves_its_own_timeout_as_a_new_version(client_alice, llm_agent):
    response = client_alice.post(_url(llm_agent), _llm_data(llm_agent, llm_timeout="45"))

    llm_agent.refresh_from_db()
    assert response.status_code == 302
    assert (llm_agent.current_version.number, llm_agent.current_version.llm_timeout) == (2, 45)

    client_alice.post(_url(llm_agent), _llm_data(llm_agent, llm_timeout=""))
    llm_agent.refresh_from_db()
    assert (llm_agent.current_version.number, llm_agent.current_version.llm_timeout) == (3, None)


def test_an_llm_timeout_out_of_range_is_a_field_error(client_alice, llm_agent):
    response = client_alice.post(_url(llm_agent), _llm_data(llm_agent, llm_timeout="0"))

    assert response.status_code == 200
    assert "Ensure this value is greater than or equal to 1." in response.text
    llm_agent.refresh_from_db()
    assert llm_agent.versions.count() == 1


def test_an_http_agent_neither_shows_nor_saves_an_llm_timeout(client_alice, http_agent):
    rows = [{"existing": "True", "name": "Authorization"}, {"existing": "True", "name": "X-Env"}]
    client_alice.post(_url(http_agent), _http_data(http_agent, rows, llm_timeout="45", http_timeout="25"))

    http_agent.refresh_from_db()
    assert http_agent.current_version.http_timeout == 25
    assert http_agent.current_version.llm_timeout is None
    # A stray value of a hidden section does not block the save either.
    client_alice.post(_url(http_agent), _http_data(http_agent, rows, llm_timeout="0", http_timeout="26"))
    http_agent.refresh_from_db()
    assert http_agent.current_version.http_timeout == 26
