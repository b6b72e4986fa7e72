"""Every write in the accounts area: teams, memberships and API tokens."""

from decimal import Decimal

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, BannerDismissal, Membership, Team


@transaction.atomic
def team_create(*, user: User, name: str) -> Team:
    """A new team with its creator as the owner."""
    team = Team.objects.create(name=name.strip())
    Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    return team


def team_update(*, team: Team, name: str) -> Team:
    team.name = name.strip()
    team.save(update_fields=["name"])
    return team


def team_budgets_update(*, team: Team, run_budget: Decimal | None, monthly_budget: Decimal | None) -> Team:
    """The default cost cap of the team's new runs and its monthly budget (None: none)."""
    team.run_budget, team.monthly_budget = run_budget, monthly_budget
    team.save(update_fields=["run_budget", "monthly_budget"])
    return team


def membership_add(*, team: Team, username: str, role: str = Membership.Role.MEMBER) -> Membership:
    """Add an existing user (found by username, case-insensitively) to the team."""
    user = User.objects.filter(username__iexact=username.strip(), is_active=True).first()
    if user is None:
        raise ValidationError({"username": f"No user is called “{username.strip()}”."})
    if Membership.objects.filter(team=team, user=user).exists():
        raise ValidationError({"username": f"{user.username} is already in this team."})
    return Membership.objects.create(team=team, user=user, role=role)


@transaction.atomic
def membership_create_user(
    *, team: Team, username: str, password: str, email: str = "", role: str = Membership.Role.MEMBER
) -> Membership:
    """Create a user account and add it to the team."""
    username = username.strip()
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": f"The username “{username}” is taken. Add the existing user instead."})
    user = User.objects.create_user(username=username, password=password, email=email.strip())
    return Membership.objects.create(team=team, user=user, role=role)


def _lock_owners(team: Team) -> list[Membership]:
    # Locking the owner rows serialises concurrent demotions/removals, so two owners
    # demoting each other at the same moment cannot leave the team with none.
    return list(Membership.objects.select_for_update().filter(team=team, role=Membership.Role.OWNER))


@transaction.atomic
def membership_set_role(*, membership: Membership, role: str) -> Membership:
    if role not in Membership.Role.values:
        raise ValidationError({"role": "Choose owner or member."})
    owners = _lock_owners(membership.team)
    if role != Membership.Role.OWNER and [m.pk for m in owners] == [membership.pk]:
        raise ValidationError("A team needs at least one owner. Make someone else an owner first.")
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    owners = _lock_owners(membership.team)
    if [m.pk for m in owners] == [membership.pk]:
        raise ValidationError("The last owner cannot leave the team. Make someone else an owner first.")
    membership.delete()


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """A new token and its raw value. The raw value is returned once and never stored."""
    raw = ApiToken.generate_raw()
    token = ApiToken.objects.create(
        user=user, name=name.strip(), hint=raw[: len(ApiToken.PREFIX) + 4], token_hash=ApiToken.hash(raw)
    )
    return token, raw


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    # Conditional update: revoking twice keeps the first revocation time.
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db(fields=["revoked_at"])
    return token


def banner_dismiss(*, user: User, banner: str) -> BannerDismissal:
    """Hide a site-wide notice for this user (idempotent: a second click changes nothing)."""
    if banner not in BannerDismissal.Banner.values:
        raise ValidationError("There is no such notice to hide.")
    dismissal, _ = BannerDismissal.objects.get_or_create(user=user, banner=banner)
    return dismissal
