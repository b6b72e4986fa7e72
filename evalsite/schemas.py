"""Shared API schema bases."""

from typing import Annotated

from ninja import Schema
from pydantic import ConfigDict, Field


class StrictSchema(Schema):
    """A request body that refuses fields it does not know (a 422 naming them).

    Ignoring them silently is worse: `{"version": 1}` on a run start used to run the
    current version without a word.
    """

    model_config = ConfigDict(extra="forbid")


# A database id in a request body or query: past 2**63 - 1 the database refuses the number (a
# 500 on `pk__in`); bounded, such a value is a 422 like any other bad input.
MAX_ID = 2**63 - 1
Id = Annotated[int, Field(ge=1, le=MAX_ID)]
