"""Shared API schema bases."""

from ninja import Schema
from pydantic import ConfigDict


class StrictSchema(Schema):
    """A request body that refuses fields it does not know (a 422 naming them).

    Ignoring them silently is worse: `{"version": 1}` on a run start used to run the
    current version without a word.
    """

    model_config = ConfigDict(extra="forbid")
