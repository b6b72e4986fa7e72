from django.urls import reverse

from tests.factories import UserFactory

URL = reverse("accounts:settings")


def test_an_owner_sees_team_members_tokens_and_model(client_alice, alice, bob):
    response = client_alice.get(URL)

    assert response.status_code == 200
    text = response.text
    assert 'id="team"' in text and 'id="tokens"' in text and 'id="model"' in text and 'id="switch"' in text
    assert "alice" in text and "bob" in text
    assert reverse("accounts:member_add") in text
    assert reverse("accounts:member_role", args=[bob.memberships.get().pk]) in text


def test_a_member_sees_the_team_without_management_controls(client_bob):
    response = client_bob.get(URL)

    assert response.status_code == 200
    assert "Only owners can add or remove members" in response.text
    assert f'action="{reverse("accounts:member_add")}"' not in response.text
    assert f'action="{reverse("accounts:team_update")}"' not in response.text
    assert "/role/" not in response.text


def test_without_a_model_it_explains_how_to_configure_one(client_alice, no_llm):
    text = client_alice.get(URL).text

    assert "No model configured" in text
    for example in (
        "openai/",
        "anthropic/",
        "gemini/",
        "ollama_chat/",
        "EVALSITE_LLM_API_BASE=http://localhost:8080/v1",
    ):
        assert example in text


def test_it_shows_the_configured_models_but_never_the_api_key(client_alice, settings):
    settings.EVALSITE_LLM_MODEL = "openai/gpt-4o-mini"
    settings.EVALSITE_JUDGE_MODEL = "anthropic/claude-3-5-haiku-latest"
    settings.EVALSITE_EMBEDDING_MODEL = ""
    settings.EVALSITE_LLM_API_BASE = "http://llm.internal:8000/v1"
    settings.EVALSITE_LLM_API_KEY = "sk-super-secret-key-123"

    text = client_alice.get(URL).text

    assert "openai/gpt-4o-mini" in text
    assert "anthropic/claude-3-5-haiku-latest" in text
    assert "http://llm.internal:8000/v1" in text
    assert "Set (hidden)" in text
    assert "sk-super-secret-key-123" not in text


def test_the_judge_falls_back_to_the_agent_model(client_alice, settings):
    settings.EVALSITE_LLM_MODEL = "openai/gpt-4o-mini"
    settings.EVALSITE_JUDGE_MODEL = ""

    assert "same as the agent model" in client_alice.get(URL).text


def test_a_user_without_a_team_is_offered_to_create_one(client, db):
    client.force_login(UserFactory(username="newcomer"))

    response = client.get(URL)

    assert response.status_code == 200
    assert "Welcome to Evalsite, newcomer" in response.text
    assert reverse("accounts:team_create") in response.text


def test_htmx_requests_get_the_page(client_alice):
    response = client_alice.get(URL, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "<html" in response.text


def test_post_is_not_allowed(client_alice):
    assert client_alice.post(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, db):
    assert client.get(URL)["Location"].startswith(reverse("accounts:login"))
