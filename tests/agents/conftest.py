import pytest

from agents import services
from agents.models import Agent

SECRET = "sk-live-TOPSECRET-0123456789"
SECRET_2 = "tok-NEXT-SECRET-9876543210"


@pytest.fixture
def llm_agent(team, alice) -> Agent:
    return services.agent_create(
        team=team,
        user=alice,
        name="Refund helper",
        kind=Agent.Kind.LLM,
        description="Answers refund questions",
        instructions="You are the refund helper.\nBe brief.",
        knowledge="Refunds within 30 days.",
        guardrails="Never promise refunds after 30 days.",
        temperature=0.2,
        tools=[
            {
                "name": "lookup_order",
                "description": "Find an order",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                "result": '{"status": "shipped"}',
            }
        ],
    )


@pytest.fixture
def http_agent(team, alice) -> Agent:
    """An HTTP agent whose header values are secrets that must never reach a page."""
    return services.agent_create(
        team=team,
        user=alice,
        name="Deployed bot",
        kind=Agent.Kind.HTTP,
        http_url="https://agent.example.com/answer",
        http_headers={"Authorization": f"Bearer {SECRET}", "X-Env": "staging"},
        http_timeout=20,
    )
