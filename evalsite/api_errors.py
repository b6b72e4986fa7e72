"""The API's refusals in the pages' own words. A 422 from the pages' validation: a Django form's
errors, or a service's ValidationError, as django-ninja's `{"detail": [{loc, msg, type}]}`, so
the API and the page refuse the same input with the same message, and clients handle one error
format. Any other refusal (400, 409) is `{"detail": "<message>"}`: `refusal`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from ninja import Schema, Status
from ninja.errors import ValidationError as NinjaValidationError

from evalsite.forms import form_messages

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


def refusal(status: int, error: DjangoValidationError | str) -> Status[Any]:
    """A refusal with one message (DetailOut): a service's ValidationError, its messages in one
    line as the page shows them, or the message itself."""
    return Status(status, {"detail": error if isinstance(error, str) else " ".join(error.messages)})


def form_refusal(status: int, form: forms.BaseForm) -> Status[Any]:
    """A bound, invalid form refused as `refusal` does: its messages in one line."""
    return refusal(status, " ".join(form_messages(form)))


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


def field_invalid(name: str, message: str) -> NinjaValidationError:
    """A 422 about one field of the body, located as django-ninja locates its own."""
    return NinjaValidationError(_entries((*BODY, name), [message]))


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
