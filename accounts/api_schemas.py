"""The accounts API's schemas (accounts/api.py)."""

from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from ninja import Field, Schema

from accounts.models import ApiToken, Membership
from evalsite.schemas import StrictSchema

Role = Literal["owner", "member"]


class MemberOut(Schema):
    id: int = Field(description="The membership's id")
    user_id: int
    username: str
    email: str
    role: Role
    created_at: datetime

    @staticmethod
    def resolve_username(membership: Membership) -> str:
        return membership.user.username

    @staticmethod
    def resolve_email(membership: Membership) -> str:
        return membership.user.email


class TeamDetailOut(Schema):
    id: int
    name: str
    role: Role = Field(description="Your role in the team")
    run_budget: Decimal | None = Field(description="USD: the default cost cap of each new run; null: none")
    monthly_budget: Decimal | None = Field(description="USD: warns at 80% of the month's spend; null: none")
    created_at: datetime
    members: list[MemberOut]


class TeamIn(StrictSchema):
    name: str = Field(description="At most 100 characters")


class BudgetsIn(StrictSchema):
    run_budget: Decimal | None = Field(description="USD, at least 0.01; null: no default cap")
    monthly_budget: Decimal | None = Field(description="USD, at least 0.01; null: no monthly budget")


class MemberAddIn(StrictSchema):
    mode: Literal["existing", "new"] = Field(
        "existing", description="existing: add a user by username; new: create the user account too"
    )
    username: str
    role: Role = "member"
    email: str = Field("", description="new only")
    password: str = Field("", description="new only: at least 8 characters, checked like any password")


class MemberRoleIn(StrictSchema):
    role: Role


class TokenOut(Schema):
    id: int
    name: str
    hint: str = Field(description="The token's first characters, to tell tokens apart")
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    active: bool

    @staticmethod
    def resolve_active(token: ApiToken) -> bool:
        return token.is_active


class TokenCreatedOut(TokenOut):
    token: str | None = Field(
        description="The secret, shown in this answer only; null on a replay of the same Idempotency-Key "
        "(it is never stored: revoke that token and create another if it was lost)"
    )


class TokenIn(StrictSchema):
    name: str = Field(description="Where it will be used, e.g. “CI pipeline”")


class ModelTestOut(Schema):
    running: bool = Field(description="A test is under way: poll until false")
    status: Literal["ok", "partial", "failed", "untested"] = Field(description="The settings page's badge")
    models: list[dict[str, Any]] = Field(
        description="Per configured purpose (llm, judge, embedding): its model and last test, if any"
    )
