"""Routes of datasets/upload_views.py (upload, extraction status, documents), included by
datasets/urls.py under /agents/<agent_id>/datasets/ in the "datasets" namespace.

Names the dataset pages link to:
  "new"                kwargs agent_id                           the two-step Generate Dataset page
  "status"             kwargs agent_id, dataset_id               extraction status polling partial
  "document_preview"   kwargs agent_id, dataset_id, document_id  preview dialog (htmx into #dialog-slot)
  "document_download"  kwargs agent_id, dataset_id, document_id
Also: "mapping" / "mapping_cancel" (the mapping step, datasets/mapping_views.py),
"upload" (POST of the new page), "document_view" (a PDF inline for the preview's
<iframe>), "case_document_attach" / "case_document_detach" (documents on manual cases,
the form in partials/case_documents.html).
"""

from django.urls import URLPattern, path

from datasets import mapping_views, upload_views

urlpatterns: list[URLPattern] = [
    path("new/", upload_views.dataset_new, name="new"),
    path("new/upload/", upload_views.dataset_upload, name="upload"),
    path("<int:dataset_id>/status/", upload_views.dataset_status, name="status"),
    path("<int:dataset_id>/mapping/", mapping_views.dataset_mapping, name="mapping"),
    path("<int:dataset_id>/mapping/cancel/", mapping_views.dataset_mapping_cancel, name="mapping_cancel"),
    path("<int:dataset_id>/warnings/dismiss/", mapping_views.dataset_warnings_dismiss, name="warnings_dismiss"),
    path("<int:dataset_id>/documents/<int:document_id>/", upload_views.document_preview, name="document_preview"),
    path(
        "<int:dataset_id>/documents/<int:document_id>/download/",
        upload_views.document_download,
        name="document_download",
    ),
    path("<int:dataset_id>/documents/<int:document_id>/view/", upload_views.document_view, name="document_view"),
    path(
        "<int:dataset_id>/cases/<int:case_pk>/documents/",
        upload_views.case_document_attach,
        name="case_document_attach",
    ),
    path(
        "<int:dataset_id>/cases/<int:case_pk>/documents/<int:document_id>/remove/",
        upload_views.case_document_detach,
        name="case_document_detach",
    ),
]
