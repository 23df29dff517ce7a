"""The console's charts, "try this tool" form and state values in headless Chromium against a
real stack, reached from the gateway's front page: the charts hold a point for the calls
made, the form calls a tool as an agent and shows its result, or the SERF code of a refusal,
and the audit names the agent and the admin; a namespace's page shows its values. The
Content-Security-Policy blocks nothing. Screenshots of each step are kept (`artifacts`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from playwright.sync_api import Page, Route, expect

from conclave.stack import EmbeddedStack

CALLS, REFUSALS = 3, 2


def _log_in_from_the_front_page(page: Page, stack: EmbeddedStack) -> None:
    page.goto(f"{stack.url}/")
    expect(page.locator('a[href="/docs"]')).to_be_visible()
    page.locator('a[href="/console"]').click()
    page.wait_for_url("**/console/login")
    page.fill("input[name=admin_key]", stack.settings.admin_key.get_secret_value())
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/console/feed")


def _values(page: Page, chart: str, series: str) -> list[float]:
    points = page.locator(f'svg[data-chart="{chart}"] circle[data-series="{series}"]')
    return [float(v or "nan") for v in points.evaluate_all("ps => ps.map(p => p.dataset.value)")]


def test_charts_try_a_tool_and_state_values_in_the_browser(
    page: Page, console_stack: EmbeddedStack, artifacts: Path
) -> None:
    stack = console_stack
    tenant, agent = f"t{uuid.uuid4().hex[:6]}", "tryer"
    blocked: list[str] = []  # what the pages' Content-Security-Policy refused
    page.on("console", lambda m: blocked.append(m.text) if "Security Policy" in m.text else None)
    _log_in_from_the_front_page(page, stack)

    with httpx.Client(base_url=stack.url, timeout=30) as http:
        body = {"tenant": tenant, "agent": agent, "tools": ["echo"],
                "namespaces": {"notes": "write"}}  # fmt: skip
        registered = http.post("/v1/agents", json=body, headers=stack.admin_headers)
        auth = {"Authorization": f"Bearer {registered.json()['token']}"}
        for _ in range(CALLS):
            call = {"arguments": {"message": "hi"}}
            assert http.post("/v1/tools/echo/call", json=call, headers=auth).status_code == 200
        for _ in range(REFUSALS):  # outside its allow-list
            call = {"arguments": {"command": "id"}}
            assert http.post("/v1/tools/run_shell/call", json=call, headers=auth).status_code == 403

        page.get_by_role("link", name="Charts").click()
        assert sum(_values(page, f"requests {tenant}", "requests")) == CALLS + REFUSALS
        assert sum(_values(page, f"requests {tenant}", "refused")) == REFUSALS
        p50, p95 = _values(page, "latency echo", "p50"), _values(page, "latency echo", "p95")
        assert p50 and all(0 < a <= b for a, b in zip(p50, p95, strict=True))
        page.screenshot(path=artifacts / "5-charts.png", full_page=True)

        page.get_by_role("link", name="Try a tool").click()
        page.select_option("select[name=tool]", "echo")
        page.get_by_role("button", name="Choose").click()
        page.select_option("select[name=agent]", f"{tenant}/{agent}")
        page.fill("textarea[name='arg:message']", "hello from the form")
        page.get_by_role("button", name="Call").click()
        expect(page.locator("#result")).to_contain_text('"result": "hello from the form"')
        page.screenshot(path=artifacts / "6-try-result.png", full_page=True)

        page.select_option("select[name=tool]", "run_shell")
        page.get_by_role("button", name="Choose").click()
        page.select_option("select[name=agent]", f"{tenant}/{agent}")
        page.fill("textarea[name='arg:command']", "id")
        page.get_by_role("button", name="Call").click()
        expect(page.locator("#error-code")).to_have_text("TOOL_NOT_ALLOWED")
        page.screenshot(path=artifacts / "7-try-refused.png", full_page=True)

        params = {"tenant": tenant, "agent": agent, "limit": 2}
        audit = http.get("/v1/audit", params=params, headers=stack.admin_headers).json()
        assert [(r["tool"], r["outcome"], r["acted_by"]) for r in audit] == [
            ("run_shell", "refused", "admin (console)"),
            ("echo", "ok", "admin (console)"),
        ]
        assert http.put("/v1/state/notes", json={}, headers=auth).is_success
        write = {"writes": [{"key": "plan", "value": {"step": "charted"}}]}
        assert http.post("/v1/state/notes/commit", json=write, headers=auth).is_success

    page.get_by_role("link", name="Namespaces").click()
    page.locator(f'a[href="/console/namespaces/{tenant}/notes"]').click()
    row = page.locator("tr:has(td:text-is('plan'))")  # the key's row, not the history's
    expect(row).to_contain_text('{"step":"charted"}')
    page.screenshot(path=artifacts / "8-namespace-values.png", full_page=True)
    expect(page.locator("body")).not_to_contain_text("Internal Server Error")
    assert blocked == []


def test_the_api_docs_page_works_with_no_internet(
    page: Page, console_stack: EmbeddedStack, artifacts: Path
) -> None:
    """`/docs`, linked from the front page, renders the gateway's operations with every
    request leaving the gateway's own origin refused (an offline machine: FastAPI's default
    page loads Swagger UI from a CDN and stays blank), and its CSP blocks nothing it needs."""
    stack = console_stack
    elsewhere: list[str] = []

    def only_the_gateway(route: Route) -> None:
        if route.request.url.startswith(stack.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Security Policy" in m.text else None)
    page.route("**/*", only_the_gateway)
    page.goto(f"{stack.url}/")
    page.locator('a[href="/docs"]').click()
    page.wait_for_url("**/docs")
    expect(page.get_by_text("/v1/tools/{name}/call").first).to_be_visible(timeout=15_000)
    page.screenshot(path=artifacts / "api-docs.png")
    assert elsewhere == [] and blocked == []
