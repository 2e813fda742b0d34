"""A real headless Chromium for browser tests: Debian's ``/usr/bin/chromium`` (installed by
``make setup``), driven by Playwright's Python API. Never ``playwright install``: Playwright
is only the driver here.

Use it from a test module::

    from tests.support.browser import browser, page  # noqa: F401  (pytest fixtures)

    def test_x(page): page.goto(url) …

Without Chromium or Playwright the tests are skipped with the reason printed (``-rs``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def skip_reason() -> str | None:
    """Why no browser test can run here, or ``None``."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (make setup installs Debian's chromium when run as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # module scope, not session: Playwright's sync API keeps an asyncio loop running in the
    # main thread while it is open, and every later test that calls asyncio.run() (the
    # eval runner) would fail with "cannot be called from a running event loop"
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        try:
            launched = pw.chromium.launch(
                executable_path=str(CHROMIUM), args=ARGS, headless=True, timeout=60_000
            )
        except Exception as exc:  # a Chromium that cannot start here is a skip, with the reason
            pytest.skip(f"{CHROMIUM} did not start: {str(exc).splitlines()[0][:300]}")
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(locale="zh-CN")
    context.set_default_timeout(15_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
    finally:
        context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
