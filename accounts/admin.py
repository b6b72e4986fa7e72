from django.contrib import admin
from django.http import HttpRequest

from accounts.models import ApiToken, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "team__name"]
    autocomplete_fields = ["user", "team"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created in the app (the raw value is shown once there); staff may only revoke."""

    list_display = ["name", "user", "hint", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "hint"]
    readonly_fields = ["user", "name", "hint", "token_hash", "created_at", "last_used_at"]
    fields = ["user", "name", "hint", "token_hash", "created_at", "last_used_at", "revoked_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
