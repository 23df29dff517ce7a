"""The console's approvals page in headless Chromium against a real stack: a call an approve
rule holds is listed with its exact arguments; Approve (as one of the tenant's approvers)
releases it and it answers; Deny refuses the next one with the note. Screenshots are kept."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from conclave.stack import EmbeddedStack
from tests.helpers import wait_for

RULE = {
    "name": "long-echo",
    "tools": ["echo"],
    "when": "size(args.message) > 3",
    "outcome": "approve",
    "reason": "over 3 characters needs a person",
}


def _held_call(url: str, token: str, message: str) -> list[httpx.Response]:
    answers: list[httpx.Response] = []
    deadline = str(int((time.time() + 60) * 1000))

    def call() -> None:
        answers.append(
            httpx.post(
                f"{url}/v1/tools/echo/call",
                json={"arguments": {"message": message}},
                headers={"Authorization": f"Bearer {token}", "X-Conclave-Deadline": deadline},
                timeout=70,
            )
        )

    threading.Thread(target=call, daemon=True).start()
    return answers


def _row_of(page: Page, message: str) -> None:
    """Reload the approvals page until the held call of `message` is listed."""
    row = page.locator("tr", has_text=f'"message": "{message}"')
    for _ in range(100):
        if row.count():
            return
        page.wait_for_timeout(100)
        page.reload()
    raise AssertionError(f"the held call of {message!r} never showed on the approvals page")


def test_approve_and_deny_held_calls_in_the_browser(
    page: Page, console_stack: EmbeddedStack, artifacts: Path
) -> None:
    stack = console_stack
    tenant = f"t{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=stack.url, timeout=30, headers=stack.admin_headers) as admin:
        admin.put("/v1/policies", json={"rules": [RULE]}).raise_for_status()
        try:
            caller = admin.post("/v1/agents", json={"tenant": tenant, "agent": "payer",
                                                    "tools": ["echo"]}).json()["token"]  # fmt: skip
            admin.post("/v1/agents", json={"tenant": tenant, "agent": "bob",
                                           "approves": ["echo"]}).raise_for_status()  # fmt: skip
            page.goto(f"{stack.url}/console/login")
            page.fill("input[name=admin_key]", stack.settings.admin_key.get_secret_value())
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url("**/console/feed")

            approved = _held_call(stack.url, caller, "pay 5000")
            page.get_by_role("link", name="Approvals").click()
            _row_of(page, "pay 5000")
            row = page.locator("tr", has_text='"message": "pay 5000"')
            expect(row).to_contain_text(f"{tenant}")
            expect(row).to_contain_text("long-echo: over 3 characters needs a person")
            page.screenshot(path=str(artifacts / "approvals-pending.png"), full_page=True)
            row.locator("select[name=approver]").select_option(f"{tenant}/bob")
            row.locator("input[name=note]").fill("known payee")
            row.get_by_role("button", name="Approve").click()
            expect(page.locator("#notice")).to_contain_text(
                f"approved by {tenant}/bob via admin (console)"
            )
            wait_for(lambda: bool(approved), 10.0, "the approved call's answer")
            assert approved[0].status_code == 200 and approved[0].json()["result"] == "pay 5000"

            denied = _held_call(stack.url, caller, "pay everything")
            _row_of(page, "pay everything")
            row = page.locator("tr", has_text='"message": "pay everything"')
            row.locator("input[name=note]").fill("not that one")
            row.get_by_role("button", name="Deny").click()
            expect(page.locator("#notice")).to_contain_text("denied")
            page.screenshot(path=str(artifacts / "approvals-denied.png"), full_page=True)
            wait_for(lambda: bool(denied), 10.0, "the denied call's answer")
            refused = denied[0].json()
            assert denied[0].status_code == 403 and refused["code"] == "APPROVAL_DENIED"
            assert refused["details"]["note"] == "not that one"
            expect(page.locator("tr", has_text="pay everything")).to_have_count(0)
        finally:
            admin.put("/v1/policies", json={"rules": []}).raise_for_status()
