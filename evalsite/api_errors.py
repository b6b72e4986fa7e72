"""The API's 422 from the pages' own validation: a Django form's errors, or a service's
ValidationError, as django-ninja's `{"detail": [{loc, msg, type}]}`, so the API and the page
refuse the same input with the same message, and clients handle one error format."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from ninja import Schema
from ninja.errors import ValidationError as NinjaValidationError

BODY = ("body", "payload")


class DetailOut(Schema):
    """A refusal with one message (404, 403, 409): what the page would have said."""

    detail: str


class FieldError(Schema):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorOut(Schema):
    """422: one entry per message, located at the field it is about."""

    detail: list[FieldError]


def _entries(loc: tuple[str | int, ...], messages: Any) -> list[dict[str, Any]]:
    return [{"type": "value_error", "loc": list(loc), "msg": str(message)} for message in messages]


def form_error_entries(
    form: forms.BaseForm, *, loc: tuple[str | int, ...] = BODY, names: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """One entry per message of a bound, invalid form; `names` maps a form field to the API's field."""
    entries: list[dict[str, Any]] = []
    for name, messages in form.errors.items():
        where = loc if name == NON_FIELD_ERRORS else (*loc, (names or {}).get(name, name))
        entries += _entries(where, messages)
    return entries


def form_invalid(form: forms.BaseForm, *, names: dict[str, str] | None = None) -> NinjaValidationError:
    return NinjaValidationError(form_error_entries(form, names=names))


def service_invalid(error: DjangoValidationError, *, names: dict[str, str] | None = None) -> NinjaValidationError:
    """A service's ValidationError as a 422: per field when it names fields, else on the body."""
    if hasattr(error, "error_dict"):
        entries: list[dict[str, Any]] = []
        for name, messages in error.message_dict.items():
            where = BODY if name == NON_FIELD_ERRORS else (*BODY, (names or {}).get(name, name))
            entries += _entries(where, messages)
        return NinjaValidationError(entries)
    return NinjaValidationError(_entries(BODY, error.messages))
