"""The agents API's schemas (agents/api.py). Header values are secrets: they can be written,
never read back (a version shows the header names only), as on the agent page."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

from agents.models import Agent, AgentVersion
from evalsite.schemas import StrictSchema

Kind = Literal["llm", "http", "knowledge"]


class ToolOut(Schema):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict, description="A JSON schema object")
    result: str = Field("", description="The canned result returned when the agent calls the tool in a run")


class AgentToolIn(StrictSchema):
    name: str = Field(description="1-64 letters, digits, _ or -; unique in the agent")
    description: str = ""
    parameters: dict[str, Any] | None = Field(
        None, description='A JSON schema object, {"type": "object", ...}; empty: no parameters'
    )
    result: str = ""


class ConfigOut(Schema):
    """A version's configuration (what each kind uses: llm, http or knowledge)."""

    instructions: str
    skills: str
    knowledge: str
    guardrails: str
    model: str = Field(description="litellm model string; empty: the console's default model")
    temperature: float | None
    tools: list[ToolOut]
    llm_timeout: int | None = Field(description="Seconds per answer of an llm agent; null: the console's default")
    http_url: str
    http_header_names: list[str] = Field(description="The headers sent to an http agent; values are never shown")
    http_timeout: int


class VersionOut(Schema):
    id: int
    number: int
    note: str = Field(description="What changed, as the version history shows it")
    created_by: str | None = Field(description="Username")
    created_at: datetime
    rolled_back_from: int | None = Field(description="The number of the version a rollback copied")
    is_current: bool
    config: ConfigOut

    @staticmethod
    def resolve_created_by(version: AgentVersion) -> str | None:
        return version.created_by.username if version.created_by else None

    @staticmethod
    def resolve_rolled_back_from(version: AgentVersion) -> int | None:
        return version.rolled_back_from.number if version.rolled_back_from else None

    @staticmethod
    def resolve_is_current(version: AgentVersion) -> bool:
        return version.pk == version.agent.current_version_id

    @staticmethod
    def resolve_config(version: AgentVersion) -> dict[str, Any]:
        return version.config()


class AgentOut(Schema):
    id: int
    team_id: int
    name: str
    description: str
    kind: Kind
    current_version: VersionOut | None
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_current_version(agent: Agent) -> AgentVersion | None:
        version = agent.current_version
        if version is not None:
            version.agent = agent
        return version


class _Settings(StrictSchema):
    """The settings a kind uses; the page's agent form validates them (agents/forms.py)."""

    instructions: str | None = Field(None, description="llm, knowledge (and http, for Generate with AI)")
    skills: str | None = Field(None, description="llm")
    knowledge: str | None = Field(None, description="llm, knowledge (and http, for Generate with AI)")
    guardrails: str | None = Field(None, description="llm")
    model: str | None = Field(None, description="llm: a litellm model string; empty uses the default model")
    temperature: float | None = Field(None, description="llm: 0-2; null: the model's default")
    llm_timeout: int | None = Field(None, description="llm: seconds per answer; null: the console's default")
    tools: list[AgentToolIn] | None = Field(None, description="llm: the tool definitions (all of them)")
    http_url: str | None = Field(None, description="http: the endpoint Evalsite POSTs each question to")
    http_headers: dict[str, str] | None = Field(
        None,
        description="http: every header sent, name to value. On an update, an empty value keeps a stored "
        "header's value (values are never read back); a stored header left out is removed.",
    )
    http_timeout: int | None = Field(None, description="http: seconds to wait for an answer (1-300); null: 30")


class AgentIn(_Settings):
    team: int | None = Field(None, description="The team's id; may be left out when you are in one team only")
    name: str = Field(description="Required, at most 120 characters, unique in the team")
    description: str = ""
    kind: Kind = "llm"


class AgentPatch(_Settings):
    """Only the fields sent change; a changed configuration becomes a new version."""

    name: str | None = None
    description: str | None = None
    note: str | None = Field(None, description="What changed, for the version history")


class VersionDiffLineOut(Schema):
    kind: Literal["add", "del", "ctx", "hunk"] = Field(description="hunk: a gap between far-apart changes")
    text: str


class FieldDiffOut(Schema):
    field: str
    label: str
    added: int
    removed: int
    lines: list[VersionDiffLineOut]


class VersionRefOut(Schema):
    id: int
    number: int
    note: str


class VersionDiffOut(Schema):
    a: VersionRefOut | None = Field(description="From (by default the previous version); null when there is one")
    b: VersionRefOut = Field(description="To (by default the current version)")
    fields: list[FieldDiffOut] = Field(description="The fields that differ, in the page's order; header values masked")
