"""Reads shared by the accounts views and the accounts API."""

from typing import Any

from django.contrib.auth.models import User
from django.db.models import F, QuerySet
from django.shortcuts import get_object_or_404

from accounts.models import ApiToken, Membership, Team


def membership_list(*, team: Team) -> QuerySet[Membership]:
    """The team's members, owners first."""
    return (
        Membership.objects.filter(team=team)
        .select_related("user")
        .order_by("-role", "user__username")  # "owner" sorts after "member": reversed puts owners first
    )


def membership_get(*, team: Team, membership_id: int) -> Membership:
    return get_object_or_404(Membership.objects.select_related("user", "team").filter(team=team), pk=membership_id)


def user_membership(*, user: User, team: Team) -> Membership | None:
    return Membership.objects.filter(team=team, user=user).first()


def api_token_list(*, user: User) -> QuerySet[ApiToken]:
    """Active tokens first (newest first), then revoked ones (latest revocation first)."""
    return ApiToken.objects.filter(user=user).order_by(F("revoked_at").desc(nulls_first=True), "-created_at")


def api_token_get_for_user(*, user: User, token_id: int) -> ApiToken:
    return get_object_or_404(ApiToken.objects.filter(user=user), pk=token_id)


def model_test_summary() -> dict[str, Any]:
    """The last connection test of each configured model, and the badge they add up to."""
    from evalsite.llm.probe import model_test_context, model_test_running

    rows = model_test_context()
    tests = [row["test"] for row in rows if not row["same_as_agent"]]
    agent_model = next((row["test"] for row in rows if row["purpose"] == "llm"), None)
    if agent_model is not None and not agent_model.ok:
        status = "failed"
    elif any(test is not None and (not test.ok or test.warnings) for test in tests):
        # Agents answer, but the judge or the embedding model does not, or a model answered not as asked.
        status = "partial"
    elif tests and all(test is not None for test in tests):
        status = "ok"
    else:
        status = "untested"
    return {"model_tests": rows, "model_status": status, "model_testing": model_test_running()}
