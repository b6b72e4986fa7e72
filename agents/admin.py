from django.contrib import admin
from django.http import HttpRequest

from agents.models import Agent, AgentVersion


class AgentVersionInline(admin.TabularInline):
    """Versions are immutable snapshots: listed read-only, never edited or added here."""

    model = AgentVersion
    fk_name = "agent"
    extra = 0
    fields = readonly_fields = ("number", "note", "model", "created_by", "created_at")
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "kind", "current_version", "updated_at"]
    list_filter = ["kind", "team"]
    search_fields = ["name", "description", "team__name"]
    readonly_fields = ["current_version", "created_at", "updated_at"]
    inlines = [AgentVersionInline]


@admin.register(AgentVersion)
class AgentVersionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "agent", "number", "note", "created_by", "created_at"]
    list_filter = ["agent__kind"]
    search_fields = ["agent__name", "note"]
    # CONFIG_FIELDS has http_header_names, not http_headers: header values are secrets, even for staff.
    fields = readonly_fields = (
        "agent",
        "number",
        "note",
        *AgentVersion.CONFIG_FIELDS,
        "rolled_back_from",
        "created_by",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AgentVersion | None = None) -> bool:
        return False
