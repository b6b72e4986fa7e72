"""The whole product through one provider's wire format: each step a function the provider test
modules call with their server, so every provider is walked the same way.

    PROVIDER = Provider(name="Anthropic", chat_model="anthropic/claude-sonnet-4-5", ...)

    @pytest.fixture
    def server(anthropic_server, settings, monkeypatch):
        return aim(settings, monkeypatch, anthropic_server, PROVIDER)

    def test_test_connection(server):
        walk_test_connection(server, PROVIDER)

Each step scripts the provider server's brain (tests/fakellm.py rules) in the product's own
terms, drives the product's services as its worker would, and checks what a team would see:
the cards, the JSON mode the gateway settled on at the first call, and tokens and costs as
litellm reported them for that provider's prices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agents.models import Agent
from evalsite import llm
from evalsite.llm import probe, structured
from runs import services
from runs.judging import configs as judging
from runs.models import Result, Run
from runs.services.preflight import judge_config_preflight
from tests.providers.base import ProviderServer
from tests.runs.conftest import drive
from tests.runs.preflight_helpers import fit_judge

TOOL = {
    "name": "lookup_order",
    "description": "Look an order up by its number.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "result": "Order A-1001 was delivered on 3 March.",
}
SCENARIO = {
    "goal": "Get a refund for order A-1001",
    "plan": "Ask for a refund; when asked, give the order number; then confirm.",
    "persona": "An impatient customer.",
    "max_turns": 4,
    "success_criteria": "The agent asks for the order number before promising a refund.",
}


@dataclass(frozen=True)
class Provider:
    """How a team points Evalsite at one provider: the README recipe these tests prove."""

    name: str  # as the cards name it
    chat_model: str  # EVALSITE_LLM_MODEL
    judge_model: str  # EVALSITE_JUDGE_MODEL
    api_key: str  # EVALSITE_LLM_API_KEY
    embedding_model: str = ""  # EVALSITE_EMBEDDING_MODEL ("" : the provider has none)
    env: dict[str, str] = field(default_factory=dict)  # the provider's own variables (AZURE_API_VERSION...)
    json_mode: str = "json_schema"  # the rung of the ladder the first JSON call must settle on
    api_base_path: str = ""  # appended to the server's root for EVALSITE_LLM_API_BASE
    priced: bool = True  # litellm has a price for its models (a local server's cost nothing)


def aim(settings: Any, monkeypatch: Any, server: ProviderServer, provider: Provider) -> ProviderServer:
    """Reset the server and point the product at it with the provider's recipe."""
    server.reset()
    settings.EVALSITE_LLM_MODEL = provider.chat_model
    settings.EVALSITE_JUDGE_MODEL = provider.judge_model
    settings.EVALSITE_EMBEDDING_MODEL = provider.embedding_model
    settings.EVALSITE_LLM_API_BASE = server.root + provider.api_base_path
    settings.EVALSITE_LLM_API_KEY = provider.api_key
    settings.EVALSITE_LLM_BACKOFF = 0.01
    settings.EVALSITE_LLM_TIMEOUT = 5.0
    settings.EVALSITE_LLM_TIMEOUTS = {}
    for name, value in provider.env.items():
        monkeypatch.setenv(name, value)
    llm.forget_model_state()
    return server


def assert_clean(server: ProviderServer) -> None:
    """Every request the server got fitted the provider SDK's request types."""
    assert server.invalid == [], server.invalid


# ---- Test connection -------------------------------------------------------------------------


def probe_answers(server: ProviderServer) -> None:
    """A model that does what Test connection asks: "OK", the JSON, the tool call."""

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request.get("tools"):
            return {"tool_calls": [{"name": "get_time", "arguments": {"city": "Paris"}}]}
        if request.get("response_format") or "JSON" in str(request.get("messages")):
            return {"json": {"answer": "OK"}}
        return {"reply": "OK"}

    server.add_rule(task="probe", handler=answer)


def walk_test_connection(server: ProviderServer, provider: Provider) -> list[probe.ModelTest]:
    probe_answers(server)

    reports = probe.model_test_all()

    chat = [r for r in reports if r.purpose != "embedding"]
    assert [r.model for r in chat] == [provider.chat_model, provider.judge_model]
    for report in chat:
        assert report.ok and report.error == "" and report.warnings == [], report
        assert report.answer == "OK" and report.tools is True
        assert report.json_schema is (provider.json_mode in structured.SCHEMA_MODES)
        assert report.json_detail == probe.SCHEMA_MODES[provider.json_mode]
        # The ladder's first rung for the provider answered the very first JSON call.
        assert structured.remembered(report.model) == provider.json_mode
    # Per chat model: the plain call, one JSON call (no rung refused), the tool call.
    # Embedding calls by path: /embeddings (OpenAI, Azure), :embedContent (Gemini), /api/embed (Ollama).
    chat_calls = [r for r in server.requests if r.task == "probe" and "embed" not in r.path.lower()]
    assert len(chat_calls) == 3 * len(chat)
    if provider.embedding_model:
        embedding = next(r for r in reports if r.purpose == "embedding")
        assert embedding.ok and embedding.embeddings and embedding.dimensions, embedding
    assert_clean(server)
    return reports


# ---- the judge's preflight, a run with a tool-using llm agent, its summary ---------------------


def tool_using_agent(server: ProviderServer) -> None:
    """The agent calls lookup_order first, then answers with what the tool said."""

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request["messages"][-1]["role"] == "tool":
            return {"reply": f"Your order: {request['messages'][-1]['content']}"}
        return {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1001"}}]}

    server.add_rule(task="agent", handler=answer)


def walk_preflight_and_run(server: ProviderServer, provider: Provider, make_dataset: Any, user: Any) -> Run:
    dataset = make_dataset(2, kind=Agent.Kind.LLM, version={"tools": [TOOL]})
    fit_judge(server)
    tool_using_agent(server)
    server.add_rule(task="summary", reply="Both cases passed with an average score of 8.")

    config = judge_config_preflight(config=judging.dataset_judge_config(dataset=dataset))
    assert config.preflight_status == "passed", config.preflight["reasons"]
    assert config.preflight["model"] == provider.judge_model and config.preflight["tokens"] > 0

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=user))

    assert run.status == Run.Status.COMPLETED and run.passed == 2, run.error
    for result in Result.objects.filter(run=run):
        assert result.status == Result.Status.PASS and result.score == 8, result.error
        assert result.tool_calls == [{"name": "lookup_order", "args": {"order_id": "A-1001"}}]
        assert result.actual_answer == f"Your order: {TOOL['result']}"
        # Tokens and costs as litellm reported them, at the provider's prices.
        assert result.agent_tokens > 0 and result.judge_tokens > 0
        if provider.priced:
            assert result.agent_cost > 0 and result.judge_cost > 0
        else:
            assert result.agent_cost == 0 and result.judge_cost == 0
    assert run.summary == "Both cases passed with an average score of 8."
    assert (run.agent_cost + run.judge_cost > Decimal(0)) is provider.priced
    assert structured.remembered(provider.judge_model) == provider.json_mode
    assert_clean(server)
    return run


def walk_scenario(server: ProviderServer, make_dataset: Any, user: Any, *, priced: bool = True) -> Result:
    """A scenario case: the simulated user (JSON calls) talks to the agent, the judge scores it."""
    say = {"action": "say", "message": "It is order A-1001.", "goal_reached": False, "reason": "The plan."}
    end = {"action": "end", "message": "", "goal_reached": True, "reason": "The refund was confirmed."}
    server.add_rule(task="simulator", json=say, times=1)
    server.add_rule(task="simulator", json=end)
    server.add_rule(task="judge", json={"score": 9, "failing_turn": 0, "reasoning": "Asked for the order first."})
    dataset = make_dataset(
        1, kind=Agent.Kind.LLM, questions=["I want my money back."], scenario=SCENARIO, expected_answer=""
    )

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=user))

    result = Result.objects.get(run=run)
    assert result.status == Result.Status.PASS and result.score == 9, result.error
    users = [m["content"] for m in result.conversation if m["role"] == "user"]
    assert users == ["I want my money back.", "It is order A-1001."]
    assert result.scenario["goal"] == "reached"
    assert result.simulator_tokens > 0 and (result.simulator_cost > 0) is priced
    assert_clean(server)
    return result


# ---- AI generation, suggestions and Apply's rewrite ------------------------------------------


def walk_generation(server: ProviderServer, agent: Agent) -> Any:
    from datasets.generation.services import dataset_generate
    from datasets.models import Dataset
    from tests.factories import DatasetFactory

    cases = [
        {
            "question": f"Question {n}: how long is the refund window for plan {n}?",
            "expected_answer": "Refunds are available within 30 days of purchase.",
            "tests_rule": "R1",
        }
        for n in range(1, 4)
    ]
    server.add_rule(task="generate", json={"cases": cases})
    dataset = DatasetFactory(
        agent=agent,
        status=Dataset.Status.EXTRACTING,
        source=Dataset.Source.GENERATED,
        generation={"count": 3, "instructions": ""},
    )

    dataset_generate(dataset_id=dataset.pk)

    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY, dataset.status
    assert sorted(dataset.cases.values_list("question", flat=True)) == [c["question"] for c in cases]
    assert_clean(server)
    return dataset


def walk_suggestions_and_rewrite(server: ProviderServer, make_dataset: Any, user: Any) -> None:
    """A run whose judge fails both cases, the suggestions it gets, and Apply's rewrite of a field."""
    from suggestions.services import suggestion_generate
    from suggestions.services.field_rewrite import suggestion_field_rewrite

    server.add_rule(task="judge", json={"score": 3, "reasoning": "It missed the phone number."})
    server.add_rule(task="summary", reply="No case passed; the average score was 3.")
    dataset = make_dataset(2, kind=Agent.Kind.LLM)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=user))
    assert run.status == Run.Status.COMPLETED and run.failed == 2, run.error

    fact = "Phone support is available at +1 555 0100 for Enterprise customers."
    suggestion = {
        "title": "Add the phone line",
        "category": "knowledge",
        "description": "The agent did not know the phone number.",
        "proposed_text": fact,
        "cases": [1],
    }
    server.add_rule(task="suggest", json={"suggestions": [suggestion]})

    suggestion_generate(run_id=run.pk)

    made = list(run.suggestions.all())
    assert [s.title for s in made] == ["Add the phone line"], made
    version = run.agent.current_version
    server.add_rule(task="rewrite", handler=lambda r: {"json": {"text": f"{version.knowledge}\n{fact}"}})

    text = suggestion_field_rewrite(run=run, field="knowledge", current=version.knowledge, group=made)

    assert text == f"{version.knowledge}\n{fact}"
    assert structured.remembered(run.agent.current_version.model or llm.model_for("llm")) is not None
    assert_clean(server)
