"""Suggestion services: every write of the suggestions feature.

- generation.py: the suggestion job of a completed run (queued by the run-finished hook
  that SuggestionsConfig.ready() registers, or by "Suggest changes"), with the model or offline.
- field_rewrite.py: one field rewritten to take the suggestions in (the model's call, or the
  offline text); the Apply dialog's step 1 runs it per field in a job (suggestions/rewrite.py).
- apply.py: the dialog's edits, the new agent version (refused for agents configured
  elsewhere, by the rule in selectors.suggestion_apply_blocker), and the change request.

Verify creates a run, so it lives with the run services (`runs.services.run_verify_start`).
"""

from suggestions.services.apply import (
    EDITABLE_FIELDS,
    SuggestionEdit,
    suggestion_apply,
    suggestion_change_request,
    suggestion_edits_validate,
)
from suggestions.services.field_rewrite import suggestion_field_rewrite, suggestion_rewrite_preview
from suggestions.services.generation import (
    suggestion_generate,
    suggestion_generation_on_run_finished,
    suggestion_generation_start,
)

__all__ = [
    "EDITABLE_FIELDS",
    "SuggestionEdit",
    "suggestion_apply",
    "suggestion_change_request",
    "suggestion_edits_validate",
    "suggestion_generate",
    "suggestion_generation_on_run_finished",
    "suggestion_generation_start",
    "suggestion_field_rewrite",
    "suggestion_rewrite_preview",
]
