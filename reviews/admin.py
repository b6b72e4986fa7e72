from django.contrib import admin

from reviews.models import CaseEdit, Review


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ("result", "reviewer", "agrees", "passed", "score", "updated_at")
    raw_id_fields = ("result",)


@admin.register(CaseEdit)
class CaseEditAdmin(admin.ModelAdmin):
    list_display = ("case", "field", "revision", "edited_by", "created_at")
    raw_id_fields = ("case", "result")
