"""A real browser for the HTML report's tests: Chromium from the system's packages (Debian's
`chromium`, which .ci/run installs when missing), driven by Playwright for Python.

Where Chromium is absent the browser tests skip, naming what to install, except in CI (CI=true,
or ORBENCH_REQUIRE_BROWSER=1 as .ci/run sets), where they fail: the report's safety is tested
in a real browser or not at all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.timeouts import THREAD_TIMEOUT_S

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


def chromium_path() -> str | None:
    """Chromium's executable: $ORBENCH_CHROMIUM, else the system's."""
    given = os.environ.get("ORBENCH_CHROMIUM")
    if given:
        return given
    found = next((path for path in CANDIDATES if Path(path).exists()), None)
    return found or shutil.which("chromium")


@contextmanager
def launched() -> Iterator[Any]:
    """A headless Chromium (Playwright's Browser), or a skip (a failure in CI)."""
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        message = ("needs Chromium and Playwright for Python: apt-get install chromium; "
                   "pip install -e '.[test]'")
        if os.environ.get("CI", "").lower() == "true" or os.environ.get(
                "ORBENCH_REQUIRE_BROWSER"):
            pytest.fail(f"CI: {message}", pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import expect

    # Playwright's own waits (5 s for an expect, 30 s for an action) sized for a busy machine.
    expect.set_options(timeout=THREAD_TIMEOUT_S * 1000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable,
                                             args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


class Page:
    """One page of a report, opened from file://, with what it logged and every CSP report."""

    def __init__(self, browser: Any, path: Path, fragment: str = "",
                 width: int = 1300, height: int = 900) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height},
                                           accept_downloads=True)
        self.context.set_default_timeout(THREAD_TIMEOUT_S * 1000)
        self.page = self.context.new_page()
        self.messages: list[str] = []
        self.errors: list[str] = []
        self.page.on("console", lambda message: self.messages.append(message.text))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        # Every CSP violation is counted by the page itself (securitypolicyviolation events).
        self.page.add_init_script(
            "window.__csp = []; document.addEventListener('securitypolicyviolation',"
            " (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
        self.page.goto(path.resolve().as_uri() + fragment)
        self.page.wait_for_selector("body[data-ready='1']", state="attached")

    def close(self) -> None:
        self.context.close()


def screenshot(page_path: Path, png: Path, browser: Any) -> None:
    """The report's prompts, mismatches only, the first one opened: the picture in the README
    and docs/html-report.md (scripts/readme_main_job.py makes it; a test checks it)."""
    view = Page(browser, page_path, width=1280, height=1000)
    try:
        page = view.page
        page.wait_for_selector("body[data-texts='1']", state="attached")
        page.check("#f-mismatch")
        page.focus("#list")
        page.keyboard.press("j")
        page.keyboard.press("Enter")
        page.locator("#prompts").screenshot(path=str(png))
    finally:
        view.close()
