"""Paging bounds for the API and the pages: an offset, a limit or a page number is a 64-bit
integer in the database (PostgreSQL's bigint, SQLite's INTEGER), and one past it failed the
query with a 500 ("bigint out of range"). The API refuses such values (422, like any other bad
parameter, documented in the schema); the pages clamp them, as a page past the last shows the
last or an empty one.

Every integer an API operation reads from its query string is one of the bounded types here
or `evalsite.schemas.Id` (tests/evalsite/test_api_integer_bounds.py walks the schema for
any that is not).
"""

from __future__ import annotations

from typing import Annotated

from ninja import Field, Schema
from ninja.conf import settings as ninja_settings
from ninja.pagination import LimitOffsetPagination

# Far past any real table, and twice it still far from 2**63.
MAX_OFFSET = 1_000_000_000
MAX_PAGE = 1_000_000
# A 1-based number that names something within its parent (an agent version's number), in a
# query: as far as the database's integers go.
MAX_NUMBER = 2**63 - 1

Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]
Number = Annotated[int, Field(ge=1, le=MAX_NUMBER)]


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """django-ninja's limit/offset paging with upper bounds on both."""

    class Input(Schema):
        limit: int = Field(ninja_settings.PAGINATION_PER_PAGE, ge=1, le=MAX_OFFSET, description="Items per page")
        offset: Offset = Field(0, description="Items to skip")


def in_range(*ids: int) -> bool:
    """Whether every id (from a URL path or a query) is one the database can hold. A lookup
    through a foreign key (`agent_id=...`) or `pk__in` with one past 2**63 - 1 fails the query
    instead of finding nothing (Django bounds only a field's own exact and range lookups)."""
    return all(0 <= value <= MAX_NUMBER for value in ids)


def page_number(value: str | None, *, default: int = 1) -> int:
    """A page number from a query string: a positive integer, at most MAX_PAGE; else `default`."""
    if not value or not value.isdigit() or int(value) < 1:
        return default
    return min(int(value), MAX_PAGE)
