"""Idempotency keys for the API's creations (an `Idempotency-Key` header).

A client that sends a creation again with the same key (a retry after a timeout, a replayed
CI job) gets the object the first request made, with 200 instead of 201, and nothing new is
made. The same key with a different body is refused (422, naming the header), as the IETF
draft on the header says: a key names one request. Keys are the token owner's, per
operation (the URL name and the ids in its path), so two users or two agents never share one.

Runs keep their keys on the run itself (Run.request_key, runs/services/start.py); every other
creation keeps them here (evalsite.models.IdempotencyKey).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, models, transaction
from django.http import HttpRequest
from ninja import Header
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError

from evalsite.models import IdempotencyKey

KEY_MAX = 255
T = TypeVar("T", bound=models.Model)


def idempotency_header() -> Any:
    """The `Idempotency-Key` header parameter of a creation."""
    return Header(
        "",
        alias="Idempotency-Key",
        description="Optional. The same key again answers 200 with what the first request created; "
        "the same key with another body is a 422.",
    )


def _key_error(message: str) -> NinjaValidationError:
    return NinjaValidationError([{"type": "value_error", "loc": ["header", "Idempotency-Key"], "msg": message}])


def _fingerprint(body: Any) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _replay(*, user: User, operation: str, key: str, fingerprint: str, load: Callable[[int], T | None]) -> T | None:
    stored = IdempotencyKey.objects.filter(user=user, operation=operation, key=key).first()
    if stored is None:
        return None
    if stored.fingerprint != fingerprint:
        raise _key_error("This Idempotency-Key was used for a different request. Use a new key for a new request.")
    found = load(stored.object_id)
    if found is None:
        raise HttpError(409, "What this Idempotency-Key created has been deleted since. Use a new key.")
    return found


def idempotent_create(
    *,
    user: User,
    operation: str,
    key: str,
    body: Any,
    create: Callable[[], T],
    load: Callable[[int], T | None],
) -> tuple[T, bool]:
    """(the object, whether it is a replay): `create()` once per (user, operation, key).

    `body` is what identifies the request (its JSON payload); `load(pk)` reads the object
    a first request made, through the user's teams, or None when it is gone. Without a key
    it is simply `create()`.
    """
    key = key.strip()
    if not key:
        return create(), False
    if len(key) > KEY_MAX or not (key.isascii() and key.isprintable()):
        raise _key_error(f"An Idempotency-Key is printable ASCII text of at most {KEY_MAX} characters.")
    fingerprint = _fingerprint(body)
    found = _replay(user=user, operation=operation, key=key, fingerprint=fingerprint, load=load)
    if found is not None:
        return found, True
    try:
        with transaction.atomic():
            made = create()
            IdempotencyKey.objects.create(
                user=user, operation=operation, key=key, fingerprint=fingerprint, object_id=made.pk
            )
    except (IntegrityError, DjangoValidationError):
        # A concurrent request with this key committed first: its object (a unique name, say)
        # may be what failed here. Answer with it; anything else is this request's own error.
        found = _replay(user=user, operation=operation, key=key, fingerprint=fingerprint, load=load)
        if found is not None:
            return found, True
        raise
    return made, False


def loader(model: type[T]) -> Callable[[int], T | None]:
    """`load` for an object found by its pk alone: for operations whose path ids were already
    looked up through the user's teams (the key is the user's and names those ids)."""
    return lambda pk: model._default_manager.filter(pk=pk).first()


def upload_body(request: HttpRequest) -> dict[str, Any]:
    """What identifies a multipart upload for its key: the form fields and each file's name
    and size (the size guard is in place before this reads the body)."""
    files: dict[str, list[Any]] = {}
    for name in request.FILES:
        upload = request.FILES.get(name)
        files[name] = [getattr(upload, "name", ""), getattr(upload, "size", 0)]
    return {"fields": {name: request.POST.getlist(name) for name in request.POST}, "files": files}
