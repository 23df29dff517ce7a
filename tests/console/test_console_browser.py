"""The console in headless Chromium against a real stack: log in, watch a tool call arrive in
the live feed, revoke its agent and see the next call refused, over HTTP and on the page,
then log out. Its Content-Security-Policy blocks nothing the console itself does.
Screenshots of each step are kept (see conftest's `artifacts`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from conclave.stack import EmbeddedStack

LIVE_WITHIN_MS = 5000


def _echo(http: httpx.Client, token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return http.post("/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers)


def _open_live_feed(page: Page, stack: EmbeddedStack) -> None:
    page.goto(f"{stack.url}/console/feed")
    expect(page.locator("#live")).to_have_text("live")  # the event stream is open


def test_log_in_watch_a_call_arrive_revoke_its_agent(
    page: Page, console_stack: EmbeddedStack, artifacts: Path
) -> None:
    stack = console_stack
    agent = f"scout-{uuid.uuid4().hex[:6]}"
    blocked: list[str] = []  # what the page's Content-Security-Policy refused
    page.on("console", lambda m: blocked.append(m.text) if "Security Policy" in m.text else None)
    page.goto(f"{stack.url}/console")
    assert page.url.endswith("/console/login")
    page.fill("input[name=admin_key]", stack.settings.admin_key.get_secret_value())
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/console/feed")
    (cookie,) = page.context.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
    _open_live_feed(page, stack)

    with httpx.Client(base_url=stack.url, timeout=30) as http:
        body = {"tenant": "acme", "agent": agent, "tools": ["echo"]}
        registered = http.post("/v1/agents", json=body, headers=stack.admin_headers)
        token = registered.json()["token"]
        assert _echo(http, token).status_code == 200
        call = page.locator("#feed tr", has_text=agent)
        expect(call).to_contain_text("ok", timeout=LIVE_WITHIN_MS)  # arrived without a reload
        page.screenshot(path=artifacts / "1-feed-live-call.png", full_page=True)

        page.goto(f"{stack.url}/console/agents")
        row = page.locator("tr", has_text=agent)
        row.get_by_role("button", name="Revoke").click()
        expect(page.locator(".notice")).to_have_text(
            f"Revoked acme/{agent}: its next call is refused."
        )
        expect(page.locator("tr", has_text=agent)).to_contain_text("revoked")
        page.screenshot(path=artifacts / "2-agents-revoked.png", full_page=True)

        _open_live_feed(page, stack)
        refused = _echo(http, token)
        assert (refused.status_code, refused.json()["code"]) == (401, "AUTH_REVOKED")
        refusal = page.locator("#feed tr", has_text="AUTH_REVOKED")
        expect(refusal).to_contain_text(agent, timeout=LIVE_WITHIN_MS)
        expect(refusal).to_contain_text("refused")
        page.screenshot(path=artifacts / "3-feed-refusal.png", full_page=True)

    for name in ("tools", "namespaces", "chains", "sandboxes"):
        page.goto(f"{stack.url}/console/{name}")
        expect(page.locator("h1")).to_be_visible()
        page.screenshot(path=artifacts / f"4-{name}.png", full_page=True)
    expect(page.locator("body")).not_to_contain_text("Internal Server Error")
    assert blocked == []

    page.get_by_role("button", name="Log out").click()  # a POST: it ends the session
    page.wait_for_url("**/console/login")
    page.goto(f"{stack.url}/console/agents")
    assert page.url.endswith("/console/login")
