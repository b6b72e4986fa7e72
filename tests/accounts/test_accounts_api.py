"""The accounts API (accounts/api.py): what the settings page does, for a team named in the path,
with the page's forms, messages and owner-only rules; tokens; the model connection test."""

import pytest
from django.contrib.auth.models import User

from accounts.models import ApiToken, Membership, Team
from accounts.services import api_token_create
from tests.accounts.test_model_test import answers_as_asked
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
JSON = "application/json"


def _auth(user):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=user, name='ci')[1]}"}


@pytest.fixture
def auth(alice):
    return _auth(alice)


@pytest.fixture
def bob_auth(bob):
    return _auth(bob)


def _msgs(response):
    return {".".join(str(p) for p in e["loc"][2:]): e["msg"] for e in response.json()["detail"]}


# ---- teams -----------------------------------------------------------------------------


def test_create_a_team_once_per_key_and_own_it(client, auth, alice):
    first = client.post("/api/teams", {"name": " Ops "}, content_type=JSON, HTTP_IDEMPOTENCY_KEY="t1", **auth)
    again = client.post("/api/teams", {"name": " Ops "}, content_type=JSON, HTTP_IDEMPOTENCY_KEY="t1", **auth)

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert (first.json()["name"], first.json()["role"]) == ("Ops", "owner")
    assert Team.objects.filter(name="Ops").count() == 1


def test_a_blank_team_name_is_refused_with_the_pages_message(client, auth):
    response = client.post("/api/teams", {"name": "   "}, content_type=JSON, **auth)

    assert response.status_code == 422
    assert _msgs(response) == {"name": "This field is required."}


def test_an_owner_renames_the_team_and_sets_budgets(client, auth, team):
    renamed = client.patch(f"/api/teams/{team.pk}", {"name": "Acme"}, content_type=JSON, **auth)
    budgets = client.put(
        f"/api/teams/{team.pk}/budgets", {"run_budget": "2.50", "monthly_budget": None}, content_type=JSON, **auth
    )

    assert renamed.status_code == 200 and budgets.status_code == 200
    team.refresh_from_db()
    assert (team.name, str(team.run_budget), team.monthly_budget) == ("Acme", "2.50", None)


def test_budgets_are_validated_by_the_pages_form(client, auth, team):
    response = client.put(
        f"/api/teams/{team.pk}/budgets", {"run_budget": "0", "monthly_budget": "1.234"}, content_type=JSON, **auth
    )

    assert response.status_code == 422
    assert _msgs(response) == {
        "run_budget": "Ensure this value is greater than or equal to 0.01.",
        "monthly_budget": "Ensure that there are no more than 2 decimal places.",
    }


def test_a_member_cannot_do_an_owners_action(client, bob_auth, team):
    response = client.patch(f"/api/teams/{team.pk}", {"name": "Mine"}, content_type=JSON, **bob_auth)

    assert response.status_code == 403
    assert response.json() == {"detail": "Only team owners can manage the team."}
    assert client.get(f"/api/teams/{team.pk}", **bob_auth).json()["role"] == "member"


def test_another_team_is_a_404(client, auth, other_team, charlie):
    assert client.get(f"/api/teams/{other_team.pk}", **auth).status_code == 404
    assert client.patch(f"/api/teams/{other_team.pk}", {"name": "x"}, content_type=JSON, **auth).status_code == 404
    membership = Membership.objects.get(user=charlie)
    url = f"/api/teams/{other_team.pk}/members/{membership.pk}"
    assert client.delete(url, **auth).status_code == 404


def test_no_token_is_a_401(client, team):
    assert client.get(f"/api/teams/{team.pk}").status_code == 401
    assert client.post("/api/tokens", {"name": "x"}, content_type=JSON).status_code == 401


# ---- members ---------------------------------------------------------------------------


def test_an_owner_adds_an_existing_user_once_per_key(client, auth, team):
    dave = UserFactory(username="Dave")
    url = f"/api/teams/{team.pk}/members"
    body = {"username": "dave", "role": "member"}

    first = client.post(url, body, content_type=JSON, HTTP_IDEMPOTENCY_KEY="m1", **auth)
    again = client.post(url, body, content_type=JSON, HTTP_IDEMPOTENCY_KEY="m1", **auth)
    twice = client.post(url, body, content_type=JSON, **auth)

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["username"] == "Dave" and first.json()["id"] == again.json()["id"]
    assert Membership.objects.get(team=team, user=dave).role == "member"
    assert _msgs(twice) == {"username": "Dave is already in this team."}


def test_an_owner_creates_a_user_and_the_password_rules_apply(client, auth, team):
    url = f"/api/teams/{team.pk}/members"
    weak = client.post(url, {"mode": "new", "username": "erin", "password": "erin"}, content_type=JSON, **auth)
    made = client.post(
        url, {"mode": "new", "username": "erin", "password": "a long passphrase 42"}, content_type=JSON, **auth
    )

    assert weak.status_code == 422 and "password" in _msgs(weak)
    assert made.status_code == 201
    assert User.objects.get(username="erin").check_password("a long passphrase 42")


def test_roles_and_removal_follow_the_pages_rules(client, auth, bob_auth, team, alice, bob):
    mine = Membership.objects.get(user=alice)
    bobs = Membership.objects.get(user=bob)

    last_owner = client.patch(f"/api/teams/{team.pk}/members/{mine.pk}", {"role": "member"}, content_type=JSON, **auth)
    promoted = client.patch(f"/api/teams/{team.pk}/members/{bobs.pk}", {"role": "owner"}, content_type=JSON, **auth)

    assert last_owner.status_code == 409
    assert last_owner.json() == {"detail": "A team needs at least one owner. Make someone else an owner first."}
    assert promoted.status_code == 200 and promoted.json()["role"] == "owner"
    assert client.delete(f"/api/teams/{team.pk}/members/{mine.pk}", **bob_auth).status_code == 204
    assert not Membership.objects.filter(pk=mine.pk).exists()


def test_a_member_may_leave_but_not_remove_others(client, bob_auth, team, alice, bob):
    alices = Membership.objects.get(user=alice)
    bobs = Membership.objects.get(user=bob)

    assert client.delete(f"/api/teams/{team.pk}/members/{alices.pk}", **bob_auth).status_code == 403
    assert client.delete(f"/api/teams/{team.pk}/members/{bobs.pk}", **bob_auth).status_code == 204


# ---- tokens ----------------------------------------------------------------------------


def test_a_token_is_created_once_per_key_and_its_secret_shown_once(client, auth, alice):
    first = client.post("/api/tokens", {"name": "CI"}, content_type=JSON, HTTP_IDEMPOTENCY_KEY="k", **auth)
    again = client.post("/api/tokens", {"name": "CI"}, content_type=JSON, HTTP_IDEMPOTENCY_KEY="k", **auth)

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["token"].startswith("evs_") and again.json()["token"] is None
    assert first.json()["id"] == again.json()["id"]
    assert ApiToken.objects.filter(user=alice, name="CI").count() == 1
    made = {"HTTP_AUTHORIZATION": f"Bearer {first.json()['token']}"}
    assert client.get("/api/me", **made).json()["token_name"] == "CI"


def test_a_blank_token_name_is_refused_with_the_pages_message(client, auth):
    response = client.post("/api/tokens", {"name": " "}, content_type=JSON, **auth)

    assert response.status_code == 422
    assert _msgs(response) == {"name": "This field is required."}


def test_a_revoked_token_stops_working_and_anothers_token_is_a_404(client, auth, alice, charlie):
    token, raw = api_token_create(user=alice, name="laptop")
    foreign, _ = api_token_create(user=charlie, name="theirs")

    revoked = client.post(f"/api/tokens/{token.pk}/revoke", **auth)

    assert revoked.status_code == 200 and revoked.json()["active"] is False
    assert client.get("/api/me", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    assert client.post(f"/api/tokens/{foreign.pk}/revoke", **auth).status_code == 404
    assert [t["name"] for t in client.get("/api/tokens", **auth).json()] == ["ci", "laptop"]


# ---- model test ------------------------------------------------------------------------


def test_the_model_test_is_a_job_and_its_findings_are_polled(
    client, auth, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    answers_as_asked(fake_llm)
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post("/api/model-test", **auth)

    assert started.status_code == 202
    assert tasks_run_here == [("evalsite.tasks.model_test", (), {})]
    status = client.get("/api/model-test", **auth).json()
    assert status["running"] is False
    llm_row = next(row for row in status["models"] if row["purpose"] == "llm")
    assert llm_row["test"]["ok"] is True


def test_without_a_model_the_test_is_a_409(client, auth, no_llm):
    response = client.post("/api/model-test", **auth)

    assert response.status_code == 409
