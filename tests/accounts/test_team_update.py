from django.urls import reverse

URL = reverse("accounts:team_update")


def test_an_owner_renames_the_team(client_alice, team):
    response = client_alice.post(URL, {"name": " Acme Quality "})

    team.refresh_from_db()
    assert team.name == "Acme Quality"
    assert response["Location"] == reverse("accounts:settings") + "#team"


def test_a_blank_name_is_refused(client_alice, team):
    response = client_alice.post(URL, {"name": "  "})

    team.refresh_from_db()
    assert response.status_code == 200
    assert team.name == "Acme QA"


def test_htmx_returns_the_team_section_with_a_toast(client_alice, team):
    response = client_alice.post(URL, {"name": "Renamed"}, headers={"HX-Request": "true"})

    assert response.text.lstrip().startswith('<section id="team"')
    assert "Team renamed." in response["HX-Trigger"]


def test_a_member_cannot_rename(client_bob, team):
    assert client_bob.post(URL, {"name": "Bob's team"}).status_code == 403
    team.refresh_from_db()
    assert team.name == "Acme QA"


def test_an_outsider_renames_only_their_own_team(client_charlie, team, other_team):
    client_charlie.post(URL, {"name": "Charlie's"})

    team.refresh_from_db()
    other_team.refresh_from_db()
    assert team.name == "Acme QA"
    assert other_team.name == "Charlie's"


def test_get_is_not_allowed(client_alice):
    assert client_alice.get(URL).status_code == 405


def test_anonymous_users_are_sent_to_login(client, team):
    assert client.post(URL, {"name": "X"})["Location"].startswith(reverse("accounts:login"))
