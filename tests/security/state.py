"""A fingerprint of everything a request could change: every row of the console's models
and every stored file. Equal before and after means the request changed nothing."""

from __future__ import annotations

from pathlib import Path

from django.apps import apps
from django.conf import settings

CONSOLE_APPS = {"auth", "accounts", "agents", "datasets", "runs", "suggestions"}
# Bookkeeping of authentication itself, not state a request acts on.
VOLATILE_FIELDS = {"last_login", "last_used_at"}


def snapshot() -> dict[str, list[str]]:
    state: dict[str, list[str]] = {}
    for model in apps.get_models():
        if model._meta.app_label in CONSOLE_APPS:
            fields = [field.attname for field in model._meta.concrete_fields if field.name not in VOLATILE_FIELDS]
            state[model._meta.label] = sorted(repr(row) for row in model.objects.values_list(*fields))
    root = Path(settings.MEDIA_ROOT)
    state["files"] = sorted(str(path.relative_to(root)) for path in root.rglob("*")) if root.exists() else []
    return state
