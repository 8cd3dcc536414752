"""A real headless browser for tests: Debian's ``chromium`` driven through Playwright's Python
API (the system browser, never Playwright's own download).

``launch_chromium(playwright)`` starts it headless. Test modules call
``skip_or_fail_without_browser()`` in the fixture that starts the browser: without Playwright or
chromium the test is skipped, except under CI where that is an error (as tests/_zookeeper.py
does for ZooKeeper), so CI cannot pass without having run the browser tests.
"""
from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")
INSTALL_HINT = "ci/compat_deps.sh installs Debian's chromium; playwright is in the test extra"


def chromium_path() -> str | None:
    found = shutil.which("chromium")
    if found:
        return found
    return next((p for p in CHROMIUM_PATHS if os.access(p, os.X_OK)), None)


def missing_reason() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return f"playwright is not installed ({INSTALL_HINT})"
    if chromium_path() is None:
        return f"chromium is not installed ({INSTALL_HINT})"
    return None


def skip_or_fail_without_browser() -> None:
    """In a fixture: skip the test without Playwright or chromium; under CI, fail it."""
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def launch_chromium(playwright):
    """Headless chromium from the system (Playwright adds --no-sandbox, which root needs)."""
    return playwright.chromium.launch(executable_path=chromium_path(), headless=True)
