from django.urls import reverse

URL = reverse("accounts:logout")


def test_post_signs_out(client_alice):
    response = client_alice.post(URL)

    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:login")
    assert "_auth_user_id" not in client_alice.session


def test_get_is_not_allowed(client_alice):
    # Signing out is a state change: a link or an <img> must not trigger it.
    assert client_alice.get(URL).status_code == 405
    assert "_auth_user_id" in client_alice.session


def test_anonymous_post_goes_to_login(client, db):
    assert client.post(URL)["Location"] == reverse("accounts:login")
