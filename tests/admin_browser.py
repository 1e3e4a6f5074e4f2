"""Headless Chromium driven by Selenium, for the admin page's tests: Debian's ``chromium`` and
its ``chromedriver`` (package ``chromium-driver``; ``scripts/test.sh`` installs both as root
when they are missing). Nothing is downloaded: Selenium is given both paths, so its driver
manager never runs. The ``chrome`` fixture skips when either is missing, except under
``CI=true``, where that fails.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.flower import find_chromium

__all__ = ["DRIVER_INSTALL_HINT", "chrome_session", "find_chromedriver", "require_browser", "wait_for"]

DRIVER_INSTALL_HINT = (
    "chromium or chromium-driver is not installed (Debian/Ubuntu: apt-get install chromium "
    "chromium-driver; scripts/test.sh installs them as root), or selenium is not (pip install noti[test])"
)


def find_chromedriver() -> str | None:
    """Debian's ``chromedriver`` (``/usr/bin/chromedriver``, from ``chromium-driver``)."""
    for candidate in (shutil.which("chromedriver"), "/usr/lib/chromium/chromedriver"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_browser() -> tuple[str, str]:
    """Chromium's and chromedriver's paths; skips the test when one is missing (or Selenium
    is), fails it under ``CI=true``."""
    chromium, driver = find_chromium(), find_chromedriver()
    try:
        import selenium  # noqa: F401
    except ImportError:
        chromium = None
    if chromium is None or driver is None:
        if os.environ.get("CI") == "true":
            pytest.fail(DRIVER_INSTALL_HINT)
        pytest.skip(DRIVER_INSTALL_HINT)
    return chromium, driver


@contextmanager
def chrome_session(*, javascript: bool = True, width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium (a throw-away profile), driven by Selenium; quit when the block ends.
    ``javascript=False``: with JavaScript switched off, as a reader without it browses."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = require_browser()
    profile = tempfile.mkdtemp(prefix="chromium-admin-")
    options = Options()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(check: Callable[[], Any], *, timeout: float = 30.0, every: float = 0.2, what: str = "") -> Any:
    """Poll ``check`` (which may reload a page) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what or check}")
        time.sleep(every)
