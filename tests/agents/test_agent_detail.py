from django.urls import reverse

from agents import services
from runs.models import Run
from tests.agents.conftest import SECRET
from tests.factories import DatasetFactory, TestCaseFactory


def _url(agent) -> str:
    return reverse("agents:detail", args=[agent.pk])


def test_it_shows_the_current_llm_configuration(client_alice, llm_agent):
    response = client_alice.get(_url(llm_agent))

    assert response.status_code == 200
    text = response.text
    assert "You are the refund helper." in text
    assert "Never promise refunds after 30 days." in text
    assert "lookup_order" in text and "&quot;shipped&quot;" in text
    assert "Version 1" in text
    # The Evals call to action links to the Datasets and Runs tabs.
    assert reverse("datasets:list", args=[llm_agent.pk]) in text
    assert reverse("runs:list", args=[llm_agent.pk]) in text


def test_a_blank_model_says_which_default_is_used(client_alice, llm_agent, settings):
    settings.EVALSITE_LLM_MODEL = "openai/gpt-4o-mini"
    assert "Server default · <code>openai/gpt-4o-mini</code>" in client_alice.get(_url(llm_agent)).text

    settings.EVALSITE_LLM_MODEL = ""
    assert "no model configured" in client_alice.get(_url(llm_agent)).text


def test_an_http_agent_shows_header_names_and_the_contract_but_no_values(client_alice, http_agent):
    response = client_alice.get(_url(http_agent))

    assert "https://agent.example.com/answer" in response.text
    assert "Authorization: ••••••••" in response.text
    assert SECRET not in response.text and "staging" not in response.text
    assert "retrieval_context" in response.text and "case_id" in response.text


def test_a_knowledge_agent_counts_its_passages(client_alice, agent):
    response = client_alice.get(_url(agent))

    assert "2 passages" in response.text
    assert "Refunds are available within 30 days of purchase." in response.text


def test_the_evals_summary_counts_datasets_cases_and_runs(client_alice, agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory.create_batch(3, dataset=dataset)
    Run.objects.create(
        agent=agent,
        agent_version=agent.current_version,
        dataset_name="d",
        status=Run.Status.COMPLETED,
        average_score=7.5,
    )

    response = client_alice.get(_url(agent))

    assert response.context["evals"]["dataset_count"] == 1
    assert response.context["evals"]["case_count"] == 3
    assert response.context["evals"]["run_count"] == 1
    assert "avg 7.5/10" in response.text


def test_untrusted_text_is_escaped(client_alice, team, alice):
    from agents import services

    agent = services.agent_create(
        team=team,
        user=alice,
        name="X",
        kind="knowledge",
        knowledge='<script>alert(1)</script><a hx-get="/admin/">x</a>',
    )

    response = client_alice.get(_url(agent))

    assert "<script>alert(1)</script>" not in response.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text


def test_it_uses_a_bounded_number_of_queries(client_alice, llm_agent, django_assert_max_num_queries):
    with django_assert_max_num_queries(20):
        client_alice.get(_url(llm_agent))


def test_teammates_see_it_and_outsiders_get_404(client_bob, client_charlie, llm_agent):
    assert client_bob.get(_url(llm_agent)).status_code == 200
    assert client_charlie.get(_url(llm_agent)).status_code == 404


def test_htmx_requests_get_the_page(client_alice, llm_agent):
    # No fragment here: an htmx navigation (e.g. hx-boost) gets the same page.
    response = client_alice.get(_url(llm_agent), headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "Evaluate this agent" in response.text


def test_post_is_not_allowed(client_alice, llm_agent):
    assert client_alice.post(_url(llm_agent)).status_code == 405


def test_anonymous_users_are_sent_to_login(client, llm_agent):
    response = client.get(_url(llm_agent))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))


def test_the_llm_configuration_shows_the_agents_timeout_or_the_default(client_alice, llm_agent, alice, settings):
    settings.EVALSITE_LLM_TIMEOUT = 60.0
    settings.EVALSITE_LLM_TIMEOUTS = {}
    assert "Console default · 60 seconds" in client_alice.get(_url(llm_agent)).text

    services.agent_update(agent=llm_agent, user=alice, llm_timeout=45)
    assert "45 seconds" in client_alice.get(_url(llm_agent)).text
