"""The "No model is configured" banner: hidden for good with ×, for that user only."""

import pytest
from django.urls import reverse

from accounts.models import BannerDismissal

pytestmark = pytest.mark.django_db

BANNER = 'id="no-model-banner"'


def test_the_banner_shows_until_the_user_hides_it(client_alice, client_bob, alice, no_llm):
    page = reverse("agents:list")
    assert BANNER in client_alice.get(page).content.decode()

    response = client_alice.post(reverse("accounts:banner_dismiss"), {"banner": "no_model"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and response.content == b""
    assert BANNER not in client_alice.get(page).content.decode()
    assert BANNER in client_bob.get(page).content.decode()  # remembered per user
    assert BannerDismissal.objects.filter(user=alice).count() == 1


def test_without_javascript_it_goes_back_to_the_page(client_alice, no_llm):
    page = reverse("agents:list")
    response = client_alice.post(reverse("accounts:banner_dismiss"), {"banner": "no_model", "next": page})
    assert response.status_code == 302 and response["Location"] == page
    client_alice.post(reverse("accounts:banner_dismiss"), {"banner": "no_model", "next": page})  # twice: no error
    assert BannerDismissal.objects.count() == 1


def test_an_unknown_banner_is_refused(client_alice, no_llm):
    response = client_alice.post(reverse("accounts:banner_dismiss"), {"banner": "everything"})
    assert response.status_code == 400
    assert not BannerDismissal.objects.exists()


def test_with_a_model_there_is_no_banner(client_alice, fake_llm):
    assert BANNER not in client_alice.get(reverse("agents:list")).content.decode()


def test_only_post_and_only_signed_in(client, client_alice):
    url = reverse("accounts:banner_dismiss")
    assert client_alice.get(url).status_code == 405
    assert client.post(url, {"banner": "no_model"}).status_code == 302
    assert not BannerDismissal.objects.exists()
