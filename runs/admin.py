from django.contrib import admin

from runs.models import Result, Run, RunCase


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "agent",
        "dataset_name",
        "status",
        "scorer",
        "completed",
        "total",
        "passed",
        "failed",
        "errored",
        "created_at",
    )
    list_filter = ("status", "scorer", "purpose")
    search_fields = ("dataset_name", "agent__name")
    raw_id_fields = ("agent", "agent_version", "dataset", "parent", "created_by")
    readonly_fields = ("created_at", "started_at", "finished_at", "stop_requested_at")


@admin.register(RunCase)
class RunCaseAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "position", "case_id", "question")
    raw_id_fields = ("run", "source_case")
    search_fields = ("question", "case_id")


@admin.register(Result)
class ResultAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "case", "repeat", "variant", "status", "score", "attempts", "finished_at")
    list_filter = ("status",)
    raw_id_fields = ("run", "case")
    readonly_fields = ("token", "queued_at", "claimed_at", "attempts", "finished_at")
