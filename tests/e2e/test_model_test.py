"""Settings → Model → Test connection in a real browser, at desktop and phone width: the button
queues the test, a real worker makes the calls, and the Model section polls until it shows them."""

import uuid

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import DESKTOP, PHONE

pytestmark = [pytest.mark.e2e, pytest.mark.worker]


@pytest.fixture
def shared_cache(settings):
    """The findings live in the cache: here Redis, shared by the live server and the worker
    (the suite's per-process memory cache would keep the worker's findings from the page)."""
    prefix = f"evalsite-e2e-{uuid.uuid4().hex[:8]}"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": settings.REDIS_CLIENT_URL,
            "KEY_PREFIX": prefix,
        }
    }
    return {"CACHE_KEY_PREFIX": prefix}


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_test_connection_shows_what_each_model_can_do(
    page, login, live_server, celery_worker, alice, fake_llm, shared_cache, viewport
):
    fake_llm.set_server("llama.cpp")
    fake_llm.add_rule(task="probe", json={"answer": "OK"})
    celery_worker(concurrency=1, env=shared_cache)
    page.set_viewport_size(viewport)
    login(page, alice, "/accounts/settings/#model")
    section = page.locator("#model")
    expect(section.get_by_text("Not tested", exact=True)).to_be_visible()

    section.get_by_role("button", name="Test connection").click()

    # The answer to the click is the section in its testing state (the calls are the worker's).
    expect(section.get_by_text("Testing each model in the background")).to_be_visible()
    section.screenshot(path=f"/work/shots/c17-apply-task/model-testing-{viewport['width']}.png")
    expect(section.get_by_text("Needs attention", exact=True)).to_be_visible(timeout=60_000)
    expect(section.get_by_text("JSON: yes, JSON schema (llama.cpp json_object + schema)").first).to_be_visible()
    expect(section.get_by_text("must be created with embedding=True")).to_be_visible()
    expect(section).not_to_have_attribute("hx-trigger", "every 3s")  # the poll stopped
    section.screenshot(path=f"/work/shots/c17-apply-task/model-test-{viewport['width']}.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
