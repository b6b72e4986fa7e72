import pytest
from django.core.exceptions import ValidationError

from accounts import services
from accounts.models import Membership, Team


def test_team_create_makes_the_creator_owner(alice):
    team = services.team_create(user=alice, name="New team")

    assert Membership.objects.get(team=team, user=alice).role == Membership.Role.OWNER


def test_the_last_owner_cannot_be_demoted_or_removed(team, alice):
    membership = alice.memberships.get(team=team)

    with pytest.raises(ValidationError):
        services.membership_set_role(membership=membership, role=Membership.Role.MEMBER)
    with pytest.raises(ValidationError):
        services.membership_remove(membership=membership)
    membership.refresh_from_db()
    assert membership.role == Membership.Role.OWNER


def test_with_two_owners_one_may_go(team, alice, bob):
    services.membership_set_role(membership=bob.memberships.get(team=team), role=Membership.Role.OWNER)

    services.membership_remove(membership=alice.memberships.get(team=team))

    assert list(Team.objects.get(pk=team.pk).memberships.values_list("role", flat=True)) == ["owner"]


def test_an_unknown_role_is_refused(team, bob):
    with pytest.raises(ValidationError):
        services.membership_set_role(membership=bob.memberships.get(team=team), role="admin")


def test_membership_add_is_case_insensitive_and_skips_inactive_users(team, django_user_model):
    active = django_user_model.objects.create_user("Dave", password="x" * 12)
    django_user_model.objects.create_user("ghost", password="x" * 12, is_active=False)

    assert services.membership_add(team=team, username="dave").user == active
    with pytest.raises(ValidationError):
        services.membership_add(team=team, username="ghost")
