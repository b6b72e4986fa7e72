"""HTTP header values are write-only: no page, fragment or admin screen may contain them."""

from django.urls import reverse

from agents import services
from tests.agents.conftest import SECRET, SECRET_2


def test_no_agent_page_or_fragment_ever_contains_a_header_value(client_alice, http_agent, alice):
    v1 = http_agent.current_version
    agent = services.agent_update(
        agent=http_agent, user=alice, http_headers={"Authorization": f"Bearer {SECRET_2}", "X-Env": "prod"}
    )
    v2 = agent.current_version
    htmx = {"HX-Request": "true"}
    pages = [
        (reverse("agents:list"), {}),
        (reverse("agents:list"), htmx),
        (reverse("agents:detail", args=[agent.pk]), {}),
        (reverse("agents:edit", args=[agent.pk]), {}),
        (reverse("agents:delete", args=[agent.pk]), {}),
        (reverse("agents:delete", args=[agent.pk]), htmx),
        (reverse("agents:versions", args=[agent.pk]), {}),
        (reverse("agents:versions", args=[agent.pk]) + f"?a={v1.pk}&b={v2.pk}", htmx),
        (reverse("agents:version_detail", args=[agent.pk, v1.pk]), {}),
        (reverse("agents:version_detail", args=[agent.pk, v2.pk]), {}),
    ]
    for url, headers in pages:
        response = client_alice.get(url, headers=headers)
        assert response.status_code == 200, url
        for secret in (SECRET, SECRET_2, "staging"):
            assert secret not in response.text, (url, secret)


def test_the_admin_never_shows_header_values(client, http_agent, django_user_model):
    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123456")
    client.force_login(staff)
    version = http_agent.current_version

    pages = [
        reverse("admin:agents_agentversion_changelist"),
        reverse("admin:agents_agentversion_change", args=[version.pk]),
        reverse("admin:agents_agent_change", args=[http_agent.pk]),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert SECRET not in response.text, url
