"""The pool behind the gateway: a tool call over HTTP runs in a sandbox, its usage is audited."""

from __future__ import annotations

import httpx
import pytest

from gateway.config import Settings
from gateway.identity.tokens import issue_token
from protocol.agents import ADMIN_KEY_HEADER

pytestmark = pytest.mark.anyio


async def test_calls_run_in_the_sandbox_and_usage_lands_in_the_audit(
    settings: Settings, client: httpx.AsyncClient
) -> None:
    token = issue_token(settings, tenant="acme", agent="auditor", scopes=["tool:*"])
    bearer = {"Authorization": f"Bearer {token}"}
    ok = await client.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=bearer
    )
    assert ok.status_code == 200, ok.text
    usage = ok.json()["usage"]
    assert usage["sandbox"].startswith("process:") and usage["exit_reason"] == "ok"
    slow = await client.post(
        "/v1/tools/run_python/call",
        json={"arguments": {"code": "import time; time.sleep(30)"}, "limits": {"timeout_ms": 300}},
        headers=bearer,
    )
    assert slow.status_code == 504 and slow.json()["code"] == "TOOL_TIMEOUT"
    admin = {ADMIN_KEY_HEADER: settings.admin_key.get_secret_value()}
    audit = await client.get("/v1/audit", params={"agent": "auditor"}, headers=admin)
    records = {r["tool"]: r for r in audit.json()}
    assert records["echo"]["usage"]["sandbox"] == usage["sandbox"]
    assert records["run_python"]["usage"]["exit_reason"] == "timeout"
    assert 300 <= records["run_python"]["usage"]["wall_ms"] < 1000
