"""Browser tests: Playwright on Debian's Chromium against pytest-django's live_server.

Playwright's sync API runs an event loop in this thread, so Django's "async unsafe"
guard must be lifted for the test's own database calls.
"""

import os
from collections.abc import Callable

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory's password
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": ["--no-sandbox", "--disable-background-networking", "--disable-component-update"],
    }


@pytest.fixture
def login(live_server) -> Callable:
    """login(page, user, next="/") signs in through the real login form."""

    def sign_in(page, user, next_url: str = "/"):
        page.goto(f"{live_server.url}/accounts/login/?next={next_url}")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_load_state()
        return page

    return sign_in
