from django.contrib import admin

from monitoring.models import (
    Alert,
    Conversation,
    Feedback,
    IngestionKey,
    LearningCase,
    OnlineEvaluator,
    OnlineScore,
    ServiceMapping,
    Trace,
)


@admin.register(IngestionKey)
class IngestionKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "hint", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("key_hash", "hint")


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = ("otel_trace_id", "team", "agent", "service_name", "started_at", "status", "span_count")
    list_filter = ("status",)
    search_fields = ("otel_trace_id", "service_name", "question")


admin.site.register([Alert, Conversation, Feedback, LearningCase, OnlineEvaluator, OnlineScore, ServiceMapping])
