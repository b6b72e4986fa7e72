from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from datasets.models import Dataset, Document, TestCase

_CASE_FIELDS = ("position", "case_id", "question", "expected_answer")


class TestCaseInline(admin.TabularInline):
    model = TestCase
    extra = 0
    fields = _CASE_FIELDS
    show_change_link = True
    # A dataset holds up to hundreds of cases; the inline lists them, editing happens per case.
    readonly_fields = _CASE_FIELDS
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Dataset | None = None) -> bool:
        return False


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "agent", "status", "source", "case_count", "created_by", "created_at"]
    list_filter = ["status", "source"]
    search_fields = ["name", "agent__name", "agent__team__name"]
    list_select_related = ["agent", "created_by"]
    readonly_fields = ["agent", "created_by", "created_at", "updated_at", "job_attempts", "job_started_at"]
    inlines = [TestCaseInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Dataset]:
        return super().get_queryset(request).annotate(case_count=Count("cases"))

    @admin.display(ordering="case_count", description="Test cases")
    def case_count(self, dataset: Dataset) -> int:
        return dataset.case_count  # type: ignore[attr-defined]


@admin.register(TestCase)
class TestCaseAdmin(admin.ModelAdmin):
    list_display = ["__str__", "dataset", "case_id", "position", "updated_at"]
    search_fields = ["question", "expected_answer", "case_id", "dataset__name"]
    list_select_related = ["dataset"]
    raw_id_fields = ["dataset"]
    filter_horizontal = ["documents"]
    readonly_fields = [
        "source_document",
        "source_file",
        "source_location",
        "source_span",
        "tests_rule",
        "created_at",
        "updated_at",
    ]


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["original_name", "file_type", "size", "dataset", "team", "generated", "created_at"]
    list_filter = ["file_type", "generated"]
    search_fields = ["original_name", "sha256", "dataset__name"]
    list_select_related = ["dataset", "team"]
    raw_id_fields = ["dataset"]
    # The file is served only through the team-checked download view, never by URL here.
    readonly_fields = ["file", "original_name", "file_type", "size", "sha256", "team", "created_at"]
    exclude = ["text"]
