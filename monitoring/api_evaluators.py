"""Online evaluators in the JSON API."""

from ninja import Router

router = Router(tags=["monitoring"])
