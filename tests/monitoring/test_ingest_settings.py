"""Settings → Monitoring and its API: ingestion keys, service mappings, retention, masking."""

import pytest
from django.test import Client

from accounts.services import api_token_create
from monitoring.models import AgentMonitoring, IngestionKey, ServiceMapping, TeamMonitoring
from tests.factories import AgentFactory, TeamFactory

pytestmark = pytest.mark.django_db
PAGE = "/accounts/settings/monitoring/"


@pytest.fixture
def client_bob(bob) -> Client:
    client = Client()
    client.force_login(bob)
    return client


def test_the_page_lists_keys_mappings_and_agents(client_alice, team, agent, alice):
    from monitoring.services import ingestion_key_create, service_mapping_create

    ingestion_key_create(team=team, user=alice, name="prod app")
    service_mapping_create(team=team, service_name="support-bot", agent=agent)

    page = client_alice.get(PAGE).content.decode()

    assert "prod app" in page and "evi_" in page and "support-bot" in page and "Support bot" in page
    assert "Turn masking off" in page and 'action="/accounts/settings/monitoring/keys/"' in page


def test_the_settings_page_links_to_it(client_alice):
    assert f'href="{PAGE}"' in client_alice.get("/accounts/settings/").content.decode()


def test_a_new_key_is_shown_once_and_stored_hashed(client_alice, team):
    response = client_alice.post(PAGE + "keys/", {"name": "support bot, production"})

    key = IngestionKey.objects.get(team=team)
    raw = response.context["new_key"]
    assert response.status_code == 200 and raw.startswith("evi_") and raw in response.content.decode()
    assert key.key_hash == IngestionKey.hash(raw) and raw not in (key.hint, key.name)
    assert raw not in client_alice.get(PAGE).content.decode()


def test_a_revoked_key_stops_working(client_alice, client, team, ingestion_key):
    key = IngestionKey.objects.get(team=team)

    response = client_alice.post(f"{PAGE}keys/{key.pk}/revoke/")

    assert response.status_code == 302
    assert (
        client.post(
            "/v1/traces", b"", content_type="application/x-protobuf", headers={"x-evalsite-key": ingestion_key}
        ).status_code
        == 401
    )


def test_mappings_are_added_refused_twice_and_removed(client_alice, team, agent):
    assert client_alice.post(PAGE + "services/", {"service_name": "support-bot", "agent": agent.pk}).status_code == 302
    again = client_alice.post(PAGE + "services/", {"service_name": "support-bot", "agent": agent.pk})
    mapping = ServiceMapping.objects.get(team=team)
    removed = client_alice.post(f"{PAGE}services/{mapping.pk}/delete/")

    assert again.status_code == 422 and "already maps" in again.content.decode()
    assert removed.status_code == 302 and not ServiceMapping.objects.exists()


def test_another_teams_agent_cannot_be_mapped(client_alice):
    stranger = AgentFactory(team=TeamFactory())

    response = client_alice.post(PAGE + "services/", {"service_name": "x", "agent": stranger.pk})

    assert response.status_code == 422 and not ServiceMapping.objects.exists()


def test_retention_and_masking(client_alice, team, agent):
    assert client_alice.post(PAGE + "retention/", {"retention_days": "7"}).status_code == 302
    assert client_alice.post(PAGE + "retention/", {"retention_days": "0"}).status_code == 422
    client_alice.post(f"{PAGE}agents/{agent.pk}/masking/", {})

    assert TeamMonitoring.objects.get(team=team).retention_days == 7
    assert AgentMonitoring.objects.get(agent=agent).mask_personal_data is False
    client_alice.post(f"{PAGE}agents/{agent.pk}/masking/", {"mask_personal_data": "on"})
    assert AgentMonitoring.objects.get(agent=agent).mask_personal_data is True


def test_a_member_sees_the_page_but_changes_nothing(client_bob, team, agent):
    page = client_bob.get(PAGE)

    assert page.status_code == 200 and "only owners can change these" in page.content.decode()
    assert client_bob.post(PAGE + "keys/", {"name": "x"}).status_code == 403
    assert client_bob.post(f"{PAGE}agents/{agent.pk}/masking/", {}).status_code == 403
    assert not IngestionKey.objects.exists() and not AgentMonitoring.objects.exists()


# ---- the API -------------------------------------------------------------------------------


def api(client, method, path, token, body=None):
    return getattr(client, method)(
        "/api" + path, body, content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )


def test_the_api_does_what_the_page_does(client, alice, team, agent):
    token = api_token_create(user=alice, name="ci")[1]
    base = f"/teams/{team.pk}/monitoring"

    created = api(client, "post", base + "/keys", token, {"name": "prod"})
    key_id = created.json()["id"]
    listed = api(client, "get", base + "/keys", token)
    revoked = api(client, "post", f"{base}/keys/{key_id}/revoke", token)
    mapping = api(client, "post", base + "/services", token, {"service_name": "bot", "agent_id": agent.pk})
    bad = api(client, "post", base + "/services", token, {"service_name": "bot2", "agent_id": 999999})
    deleted = api(client, "delete", f"{base}/services/{mapping.json()['id']}", token)
    retention = api(client, "put", base + "/retention", token, {"retention_days": 90})
    masking = api(client, "put", f"/agents/{agent.pk}/monitoring/masking", token, {"mask_personal_data": False})

    assert created.status_code == 201 and created.json()["key"].startswith("evi_")
    assert "key" not in listed.json()[0] and listed.json()[0]["hint"] == created.json()["hint"]
    assert revoked.json()["active"] is False
    assert mapping.status_code == 201 and bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "agent_id"
    assert deleted.status_code == 204 and retention.json() == {"retention_days": 90}
    assert masking.json() == {"agent_id": agent.pk, "mask_personal_data": False}


def test_the_api_refuses_members_and_other_teams(client, bob, team, agent):
    token = api_token_create(user=bob, name="ci")[1]

    assert api(client, "post", f"/teams/{team.pk}/monitoring/keys", token, {"name": "x"}).status_code == 403
    assert api(client, "get", f"/teams/{team.pk}/monitoring/keys", token).status_code == 200
    assert api(client, "get", f"/teams/{TeamFactory().pk}/monitoring/keys", token).status_code == 404
    assert (
        api(client, "put", f"/agents/{agent.pk}/monitoring/masking", token, {"mask_personal_data": False}).status_code
        == 403
    )


def test_the_api_refuses_an_id_past_the_columns_range_and_unknown_fields(client, alice, team):
    token = api_token_create(user=alice, name="ci")[1]
    base = f"/teams/{team.pk}/monitoring"

    huge = api(client, "post", base + "/services", token, {"service_name": "bot", "agent_id": 2**70})
    unknown = api(client, "post", base + "/keys", token, {"name": "prod", "scope": "all"})

    assert (huge.status_code, unknown.status_code) == (422, 422) and not IngestionKey.objects.exists()
