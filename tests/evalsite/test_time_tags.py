import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from evalsite.templatetags.time_tags import ago


def test_under_a_minute_is_just_now():
    now = timezone.now()
    assert ago(now) == "just now"
    assert ago(now - timedelta(seconds=59)) == "just now"
    assert ago(now + timedelta(seconds=5)) == "just now"  # clock skew


def test_older_times_say_how_long_ago():
    # Django's timesince joins number and unit with a no-break space.
    assert ago(timezone.now() - timedelta(minutes=5, seconds=3)) == "5\xa0minutes ago"
    assert ago(timezone.now() - timedelta(days=2, hours=1)) == "2\xa0days, 1\xa0hour ago"
    assert ago(None) == ""


@pytest.mark.django_db
def test_pages_never_say_0_minutes_ago(client_alice, agent):
    for url in (
        reverse("agents:list"),
        reverse("agents:detail", args=[agent.pk]),
        reverse("agents:versions", args=[agent.pk]),
    ):
        html = client_alice.get(url).content.decode()
        assert not re.search(r"\b0\s+minutes", html), url
        assert "just now" in html, url
