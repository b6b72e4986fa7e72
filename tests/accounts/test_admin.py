from django.urls import reverse

from accounts import services


def test_staff_can_open_every_accounts_and_agents_admin_page(client, django_user_model, alice, agent, team):
    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123456")
    token, raw = services.api_token_create(user=alice, name="CI")
    client.force_login(staff)

    pages = [
        reverse("admin:accounts_team_changelist"),
        reverse("admin:accounts_team_change", args=[team.pk]),
        reverse("admin:accounts_membership_changelist"),
        reverse("admin:accounts_apitoken_changelist"),
        reverse("admin:accounts_apitoken_change", args=[token.pk]),
        reverse("admin:agents_agent_changelist"),
        reverse("admin:agents_agent_change", args=[agent.pk]),
        reverse("admin:agents_agentversion_changelist"),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert raw not in response.text


def test_tokens_cannot_be_minted_in_the_admin(client, django_user_model):
    # A token made there would have no raw value to hand to anyone.
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123456"))
    assert client.get(reverse("admin:accounts_apitoken_add")).status_code == 403


def test_non_staff_users_are_kept_out(client_alice):
    response = client_alice.get(reverse("admin:accounts_team_changelist"))
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
