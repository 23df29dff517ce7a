"""The console's charts, its "try this tool" form and its state values over HTTP, in-process;
the admin key's read of any tenant's state; the gateway's front page at `/`."""

from __future__ import annotations

import re

import httpx
import pytest

from gateway.config import Settings
from tests.helpers import admin_headers, registered_token

pytestmark = pytest.mark.anyio


async def _log_in(client: httpx.AsyncClient, settings: Settings) -> None:
    key = settings.admin_key.get_secret_value()
    assert (await client.post("/console/login", data={"admin_key": key})).status_code == 303


def _form_token(page: str) -> str:
    found = re.search(r'name="form_token" value="([0-9a-f]+)"', page)
    assert found, page
    return found.group(1)


def _points(page: str, chart: str, series: str) -> list[float]:
    """The values of one series' points in the chart labelled `chart`."""
    svg = re.search(rf'<svg [^>]*data-chart="{re.escape(chart)}".*?</svg>', page, re.S)
    assert svg, page
    found = re.findall(
        rf'data-series="{series}" data-minute="\d+" data-value="([0-9.e+-]+)"', svg[0]
    )
    return [float(v) for v in found]


async def _call(client: httpx.AsyncClient, token: str, tool: str, **arguments: object) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    answer = await client.post(
        f"/v1/tools/{tool}/call", json={"arguments": arguments}, headers=headers
    )
    return answer.status_code


async def test_charts_plot_each_tenants_requests_refusals_and_each_tools_latency(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    admin = admin_headers(settings)
    token = await registered_token(client, admin, "acme", "charter", tools=["echo"])
    other = await registered_token(client, admin, "globex", "quiet", tools=["echo"])
    for _ in range(4):
        assert await _call(client, token, "echo", message="hi") == 200
    for _ in range(3):  # outside the agent's allow-list: refused
        assert await _call(client, token, "run_shell", command="true") == 403
    assert await _call(client, other, "echo", message="hi") == 200
    assert await _call(client, "", "echo", message="hi") == 401
    assert await _call(client, "not-a-token", "echo", message="hi") == 401
    await _log_in(client, settings)
    page = (await client.get("/console/charts")).text

    assert sum(_points(page, "requests acme", "requests")) == 7
    assert sum(_points(page, "requests acme", "refused")) == 3
    assert sum(_points(page, "requests globex", "requests")) == 1
    assert sum(_points(page, "requests globex", "refused")) == 0
    assert sum(_points(page, "requests (no tenant)", "refused")) == 2  # no token, a bad one
    p50, p95 = _points(page, "latency echo", "p50"), _points(page, "latency echo", "p95")
    assert p50 and len(p50) == len(p95)
    assert all(0 < a <= b for a, b in zip(p50, p95, strict=True))
    assert "5 calls" in page  # echo's calls in the window, acme's and globex's
    assert 'data-chart="latency run_shell"' not in page  # refused calls ran nothing
    assert "<meta http-equiv='refresh' content='30'>" in page  # new minutes without a script


async def test_charts_and_the_try_form_need_a_login(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    admin = admin_headers(settings)
    await registered_token(client, admin, "acme", "tester", tools=["echo"])
    for path in ("/console/charts", "/console/try?tool=echo"):
        answer = await client.get(path)
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/login")
    fields = {"tool": "echo", "agent": "acme/tester", "arg:message": "hi", "form_token": "0"}
    assert (await client.post("/console/try", data=fields)).status_code == 303
    calls = await client.get("/v1/audit", params={"tenant": "acme"}, headers=admin)
    assert calls.json() == []  # nothing was called


async def test_try_form_calls_as_the_agent_and_the_audit_says_an_admin_did(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    admin = admin_headers(settings)
    await registered_token(client, admin, "acme", "tester", tools=["echo"])
    await _log_in(client, settings)
    form = (await client.get("/console/try?tool=echo")).text
    assert '<option value="acme/tester">' in form and 'name="arg:message"' in form
    fields = {"tool": "echo", "agent": "acme/tester", "arg:message": "from the console"}

    forged = await client.post("/console/try", data={**fields, "form_token": "0" * 64})
    assert forged.status_code == 403
    answer = await client.post("/console/try", data={**fields, "form_token": _form_token(form)})
    assert answer.status_code == 200
    assert re.search(
        r'<pre id="result">[^<]*&quot;result&quot;: &quot;from the console', answer.text
    )

    refused = await client.post(
        "/console/try",
        data={"tool": "run_shell", "agent": "acme/tester", "arg:command": "id",
              "form_token": _form_token(form)},
    )  # fmt: skip
    assert '<code id="error-code">TOOL_NOT_ALLOWED</code>' in refused.text

    records = (
        await client.get("/v1/audit", params={"tenant": "acme", "agent": "tester"}, headers=admin)
    ).json()
    assert [(r["tool"], r["outcome"], r["transport"], r["acted_by"]) for r in records] == [
        ("run_shell", "refused", "console", "admin (console)"),
        ("echo", "ok", "console", "admin (console)"),
    ]
    feed = (await client.get("/console/feed")).text
    assert "<td>tester (by admin (console))</td>" in feed


async def test_namespace_page_shows_values_and_the_admin_key_reads_any_tenants_key(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    admin = admin_headers(settings)
    token = await registered_token(client, admin, "acme", "ledger", namespaces={"books": "write"})
    headers = {"Authorization": f"Bearer {token}"}
    assert (await client.put("/v1/state/books", json={}, headers=headers)).is_success
    write = {
        "writes": [{"key": "balance", "value": {"eur": 10}}, {"key": "log", "value": "x" * 500}]
    }
    assert (await client.post("/v1/state/books/commit", json=write, headers=headers)).is_success

    await _log_in(client, settings)
    page = (await client.get("/console/namespaces/acme/books")).text
    assert re.search(r"<td>balance</td><td>1</td>.*?<td>\{&quot;eur&quot;: ?10\}</td>", page)
    assert "... (502 characters)" in page  # a long value is cut, saying how long it is

    read = await client.get("/v1/tenants/acme/state/books/balance", headers=admin)
    assert read.status_code == 200
    assert read.json() == {"namespace": "books", "key": "balance", "value": {"eur": 10},
                           "version": 1, "owner": None, "lease_expires_at_ms": None}  # fmt: skip
    agent_read = await client.get("/v1/tenants/acme/state/books/balance", headers=headers)
    assert (agent_read.status_code, agent_read.json()["code"]) == (403, "ADMIN_REQUIRED")
    missing = await client.get("/v1/tenants/acme/state/nope/balance", headers=admin)
    assert (missing.status_code, missing.json()["code"]) == (404, "NAMESPACE_NOT_FOUND")


async def test_the_front_page_links_to_the_console_and_the_api_docs(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<a href="/console">' in page.text and '<a href="/docs">' in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    links = (await client.get("/", headers={"Accept": "application/json"})).json()["links"]
    assert (links["console"], links["docs"]) == ("/console", "/docs")
    assert (await client.get("/docs")).status_code == 200
