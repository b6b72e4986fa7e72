"""Plain JSON ingestion, POST /api/traces (for teams without OpenTelemetry), and end-user feedback,
authenticated by a team's ingestion key."""

from ninja import Router

router = Router(tags=["monitoring"])
