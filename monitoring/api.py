"""Production traces, their online scores and learning cases in the JSON API."""

from ninja import Router

router = Router(tags=["monitoring"])
