from django.contrib import admin

from suggestions.models import RewriteJob, Suggestion, SuggestionGeneration


@admin.register(Suggestion)
class SuggestionAdmin(admin.ModelAdmin):
    list_display = ("title", "category", "state", "offline", "run", "applied_version", "created_at")
    list_filter = ("category", "state", "offline")
    search_fields = ("title", "description")
    raw_id_fields = ("run", "applied_version", "cases")
    list_select_related = ("run", "applied_version")


@admin.register(SuggestionGeneration)
class SuggestionGenerationAdmin(admin.ModelAdmin):
    list_display = ("run", "status", "offline", "attempts", "queued_at", "finished_at")
    list_filter = ("status", "offline")
    raw_id_fields = ("run", "requested_by")
    readonly_fields = ("queued_at", "started_at", "finished_at")


@admin.register(RewriteJob)
class RewriteJobAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "status", "queued_at", "finished_at")
    list_filter = ("status",)
    raw_id_fields = ("run", "base_version", "requested_by")
    readonly_fields = ("created_at", "queued_at", "resent_at", "claimed_by", "claimed_at", "finished_at")
