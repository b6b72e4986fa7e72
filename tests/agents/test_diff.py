from agents import services
from agents.diff import MASK, version_diff
from tests.agents.conftest import SECRET, SECRET_2


def _by_field(diff):
    return {field.field: field for field in diff}


def test_identical_versions_have_no_diff(llm_agent):
    version = llm_agent.current_version
    assert version_diff(version, version) == []


def test_a_changed_text_field_is_a_unified_line_diff(llm_agent, alice):
    v1 = llm_agent.current_version
    v2 = services.agent_update(
        agent=llm_agent, user=alice, instructions="You are the refund helper.\nBe warm.\nCite the policy."
    ).current_version

    fields = _by_field(version_diff(v1, v2))

    assert list(fields) == ["instructions"]
    lines = [(line.kind, line.text) for line in fields["instructions"].lines]
    assert lines == [
        ("ctx", "You are the refund helper."),
        ("del", "Be brief."),
        ("add", "Be warm."),
        ("add", "Cite the policy."),
    ]
    assert (fields["instructions"].added, fields["instructions"].removed) == (2, 1)


def test_fields_appear_in_display_order_and_scalars_are_readable(llm_agent, alice):
    v1 = llm_agent.current_version
    v2 = services.agent_update(
        agent=llm_agent, user=alice, temperature=None, model="openai/gpt-4o-mini", skills="Step 1"
    ).current_version

    fields = _by_field(version_diff(v1, v2))

    assert list(fields) == ["skills", "model", "temperature"]
    assert [(line.kind, line.text) for line in fields["model"].lines] == [
        ("del", "(default model)"),
        ("add", "openai/gpt-4o-mini"),
    ]
    assert [(line.kind, line.text) for line in fields["temperature"].lines] == [
        ("del", "0.2"),
        ("add", "(model default)"),
    ]


def test_a_tool_change_shows_the_changed_line_only(llm_agent, alice):
    v1 = llm_agent.current_version
    tools = [{**v1.tools[0], "result": '{"status": "lost"}'}]
    v2 = services.agent_update(agent=llm_agent, user=alice, tools=tools).current_version

    tool_lines = _by_field(version_diff(v1, v2))["tools"].lines

    assert [line.text for line in tool_lines if line.kind == "del"] == ['    {"status": "shipped"}']
    assert [line.text for line in tool_lines if line.kind == "add"] == ['    {"status": "lost"}']


def test_header_diffs_name_headers_but_never_show_values(http_agent, alice):
    v1 = http_agent.current_version
    v2 = services.agent_update(
        agent=http_agent, user=alice, http_headers={"Authorization": f"Bearer {SECRET_2}", "X-New": "1"}
    ).current_version

    lines = _by_field(version_diff(v1, v2))["http_headers"].lines
    text = "\n".join(line.text for line in lines)

    assert SECRET not in text and SECRET_2 not in text and "staging" not in text
    assert ("del", f"Authorization: {MASK}  (previous value)") in [(line.kind, line.text) for line in lines]
    assert ("add", f"Authorization: {MASK}  (new value)") in [(line.kind, line.text) for line in lines]
    assert ("del", f"X-Env: {MASK}") in [(line.kind, line.text) for line in lines]
    assert ("add", f"X-New: {MASK}") in [(line.kind, line.text) for line in lines]


def test_far_apart_changes_are_separated_by_a_gap_marker(team, alice):
    from agents.models import Agent

    text = "\n".join(f"line {n}" for n in range(30))
    agent = services.agent_create(team=team, user=alice, name="K", kind=Agent.Kind.KNOWLEDGE, knowledge=text)
    changed = text.replace("line 1\n", "line one\n").replace("line 28", "line twenty-eight")
    v2 = services.agent_update(agent=agent, user=alice, knowledge=changed).current_version

    lines = _by_field(version_diff(agent.versions.get(number=1), v2))["knowledge"].lines

    assert [line.kind for line in lines].count("hunk") == 1
    assert lines[0].kind != "hunk"
    assert [line.text for line in lines if line.kind == "add"] == ["line one", "line twenty-eight"]


def test_an_llm_timeout_change_is_shown_with_the_other_llm_settings(llm_agent, alice):
    v1 = llm_agent.current_version
    v2 = services.agent_update(agent=llm_agent, user=alice, llm_timeout=45, temperature=0.5).current_version
    v3 = services.agent_update(agent=llm_agent, user=alice, llm_timeout=None).current_version

    fields = _by_field(version_diff(v1, v2))

    assert list(fields) == ["temperature", "llm_timeout"]
    assert fields["llm_timeout"].label == "Timeout"
    assert [(line.kind, line.text) for line in fields["llm_timeout"].lines] == [
        ("del", "(console default)"),
        ("add", "45 seconds"),
    ]
    assert [(line.kind, line.text) for line in _by_field(version_diff(v2, v3))["llm_timeout"].lines] == [
        ("del", "45 seconds"),
        ("add", "(console default)"),
    ]
