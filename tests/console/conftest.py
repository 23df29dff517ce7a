"""Fixtures for the console's browser tests: the system Chromium driven by Playwright, a real
stack in its own process, and where screenshots go (kept by CI as artifacts)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from conclave.stack import EmbeddedStack
from gateway.config import Settings

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def chromium() -> str:
    """The system Chromium (Debian's `chromium`; Playwright's own download is not used).
    Missing: a failure in CI, where .ci installs it; a skip elsewhere, saying so."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        missing = "no chromium on PATH: apt-get install chromium (.ci/lib.sh installs it)"
        if IN_CI:
            pytest.fail(f"the console's browser tests need Chromium in CI: {missing}")
        pytest.skip(missing)
    return found


@pytest.fixture
def page(chromium: str) -> Iterator[Page]:
    """A page of a fresh headless Chromium."""
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium's own sandbox cannot start as root in a container.
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: $CONCLAVE_ARTIFACTS/console, else tests/artifacts/console."""
    base = os.environ.get("CONCLAVE_ARTIFACTS") or str(ROOT / "tests" / "artifacts")
    path = Path(base) / "console"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def console_stack() -> Iterator[EmbeddedStack]:
    """A whole stack: its own Redis, the gateway under uvicorn in its own process."""
    with EmbeddedStack(Settings(port=0, sandbox_backend="process")) as stack:
        yield stack
