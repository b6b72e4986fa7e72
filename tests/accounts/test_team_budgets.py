from decimal import Decimal

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

URL = reverse("accounts:team_budgets")


def test_an_owner_sets_the_teams_budgets(client_alice, team):
    response = client_alice.post(URL, {"run_budget": "2.50", "monthly_budget": "100"})

    team.refresh_from_db()
    assert (team.run_budget, team.monthly_budget) == (Decimal("2.5"), Decimal("100"))
    assert response["Location"] == reverse("accounts:settings") + "#budgets"


def test_empty_fields_clear_them(client_alice, team):
    team.run_budget = Decimal("1")
    team.save()
    client_alice.post(URL, {"run_budget": "", "monthly_budget": ""})
    team.refresh_from_db()
    assert team.run_budget is None and team.monthly_budget is None


def test_a_negative_budget_is_refused_in_the_section(client_alice, team):
    response = client_alice.post(URL, {"run_budget": "-1", "monthly_budget": "5"}, headers={"HX-Request": "true"})
    team.refresh_from_db()
    assert response.text.lstrip().startswith('<section id="budgets"')
    assert 'aria-invalid="true"' in response.text and 'value="-1"' in response.text
    assert team.run_budget is None and team.monthly_budget is None


def test_the_settings_page_shows_the_section(client_alice):
    html = client_alice.get(reverse("accounts:settings")).text
    assert 'id="budgets"' in html and 'name="monthly_budget"' in html


def test_a_member_cannot_set_budgets(client_bob, team):
    assert client_bob.post(URL, {"run_budget": "1"}).status_code == 403
