import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _clear_login_throttle():
    """Login throttling counts failures in the cache, which outlives a test."""
    cache.clear()
    yield
    cache.clear()
