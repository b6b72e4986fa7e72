import pytest

from monitoring.services import ingestion_key_create


@pytest.fixture
def ingestion_key(team, alice) -> str:
    """The raw value of an active ingestion key of alice's team."""
    return ingestion_key_create(team=team, user=alice, name="prod app")[1]
