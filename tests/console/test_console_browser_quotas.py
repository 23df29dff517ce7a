"""The console's quotas page in headless Chromium against a real stack whose conclave.toml
sets a quota: after an agent's calls, the page shows the quota's use for that agent and what
remains. A screenshot is kept."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from conclave.stack import EmbeddedStack
from gateway.config import Settings

QUOTA = """
[[quota]]
name = "echo-per-agent"
tools = ["echo"]
per = ["agent"]
calls_per_day = 5
"""


@pytest.fixture(scope="module")
def quota_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    config = tmp_path_factory.mktemp("quotas") / "conclave.toml"
    config.write_text(QUOTA)
    with EmbeddedStack(Settings(port=0, sandbox_backend="process", config=config)) as stack:
        yield stack


def test_the_quotas_page_shows_use_and_what_remains(
    page: Page, quota_stack: EmbeddedStack, artifacts: Path
) -> None:
    stack = quota_stack
    tenant = f"t{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        body = {"tenant": tenant, "agent": "bot", "tools": ["echo"]}
        token = http.post("/v1/agents", json=body, headers=stack.admin_headers).json()["token"]
        for _ in range(2):
            call = {"arguments": {"message": "hi"}}
            answer = http.post("/v1/tools/echo/call", json=call,
                               headers={"Authorization": f"Bearer {token}"})  # fmt: skip
            assert answer.status_code == 200, answer.text
    page.goto(f"{stack.url}/console/login")
    page.fill("input[name=admin_key]", stack.settings.admin_key.get_secret_value())
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/console/feed")
    page.get_by_role("link", name="Quotas").click()
    row = page.locator("tr", has_text=f"{tenant}/bot")
    expect(row).to_have_count(1)
    cells = row.locator("td").all_inner_texts()
    assert cells[:6] == ["echo-per-agent", f"{tenant}/bot", "calls_per_day", "2", "5", "3"]
    page.screenshot(path=str(artifacts / "quotas.png"), full_page=True)
