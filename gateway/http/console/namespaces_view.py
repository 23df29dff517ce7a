"""The console's namespaces: every tenant's state namespaces, and one namespace's keys,
values (JSON, cut at `VALUE_CHARS`), versions, leases and newest history, with a "check"
action running the history checker. Reading here logs nothing: an admin's look is not an
agent's read, so no session's read log (nor any later commit's validation) sees it.

Everything is read in bounded windows (`MAX_NAMESPACES`, `MAX_KEYS`, `HISTORY_ROWS`): a
SCAN that stops early (by count and by time), never a KEYS.
"""

from __future__ import annotations

import time
from typing import cast

import anyio
from fastapi import Request
from fastapi.responses import HTMLResponse
from redis.asyncio import Redis

from gateway.http.console.page_layout import esc, page, post_button, table
from gateway.http.gateway_parts import gateway_parts
from gateway.state import CheckReport, NamespaceKeys, check_namespace, check_namespace_history

MAX_NAMESPACES = 200
MAX_KEYS = 200
HISTORY_ROWS = 50
SCAN_BATCH = 1000
SCAN_SECONDS = 0.15  # a page renders within the console's 300 ms either way
VALUE_CHARS = 200


async def _scan(redis: Redis, match: str, limit: int) -> list[str]:
    """Up to `limit` keys matching `match`, found within `SCAN_SECONDS` of SCAN steps (on a
    cluster, `scan_iter` walks every master)."""
    found: list[str] = []
    with anyio.move_on_after(SCAN_SECONDS):
        async for key in redis.scan_iter(match=match, count=SCAN_BATCH):
            found.append(str(key))
            if len(found) >= limit:
                break
    return sorted(found)[:limit]


def _namespace_of(config_key: str) -> tuple[str, str]:
    """(tenant, namespace) from `cc:{t:<tenant>}:ns:<ns>:cfg`."""
    tagged, _, rest = config_key.partition("}:ns:")
    return tagged.removeprefix("cc:{t:"), rest.removesuffix(":cfg")


def _detail_url(tenant: str, namespace: str) -> str:
    return f"/console/namespaces/{tenant}/{namespace}"


async def namespaces_page(request: Request) -> HTMLResponse:
    redis: Redis = gateway_parts(request.app).redis
    found = [_namespace_of(k) for k in await _scan(redis, "cc:{t:*}:ns:*:cfg", MAX_NAMESPACES)]
    rows = [
        [tenant, f'<a href="{esc(_detail_url(tenant, ns))}">{esc(ns)}</a>'] for tenant, ns in found
    ]
    body = table(["tenant", "namespace"], rows, raw=1)
    if len(found) == MAX_NAMESPACES:
        body += f'<p class="note">The first {MAX_NAMESPACES} namespaces found.</p>'
    return page("namespaces", "Namespaces", body)


async def namespace_page(
    request: Request, tenant: str, namespace: str, form_token: str, report: CheckReport | None
) -> HTMLResponse:
    redis: Redis = gateway_parts(request.app).redis
    keys = NamespaceKeys(tenant, check_namespace(namespace))
    config = await redis.hgetall(keys.config)
    if not config:
        return page("namespaces", "No such namespace", "<p>No such namespace.</p>", status_code=404)
    data_keys = await _scan(redis, keys.data("*"), MAX_KEYS)
    async with redis.pipeline(transaction=False) as pipe:
        for data_key in data_keys:
            pipe.hmget(data_key, "ver", "owner", "lexp", "fence", "val")
        fields = cast(list[list[str | None]], await pipe.execute())
    now_ms = int(time.time() * 1000)
    key_rows = []
    for data_key, (version, owner, lease_expiry, fence, value) in zip(
        data_keys, fields, strict=True
    ):
        leased = bool(owner) and int(lease_expiry or 0) > now_ms
        key_rows.append(
            [
                data_key.removeprefix(keys.data("")),
                version,
                owner if leased else "",
                f"{(int(lease_expiry or 0) - now_ms) / 1000:.1f}" if leased else "",
                fence,
                _cut(value or ""),
            ]
        )
    history = cast(
        list[tuple[str, dict[str, str]]],
        await redis.xrevrange(keys.history, count=HISTORY_ROWS),
    )
    history_rows = [
        [commit_id, f.get("agent"), f.get("session"), f.get("keys"), _clock(f.get("time", "0"))]
        for commit_id, f in history
    ]
    action = _detail_url(tenant, namespace) + "/check"
    body = (
        table(["setting", "value"], sorted(config.items()))
        + post_button(action, "Check the history", form_token)
        + (_report(report) if report is not None else "")
        + f"<h2>Keys ({len(data_keys)} shown, at most {MAX_KEYS})</h2>"
        + table(["key", "version", "lease holder", "lease left (s)", "fence", "value"], key_rows)
        + f"<h2>History (newest {HISTORY_ROWS} commits)</h2>"
        + table(["commit", "agent", "session", "keys (previous, new version)", "time"],
                history_rows)
    )  # fmt: skip
    return page("namespaces", f"Namespace {tenant}/{namespace}", body)


def _cut(value: str) -> str:
    """A value's JSON text, its first `VALUE_CHARS` characters and how long it is when cut."""
    if len(value) <= VALUE_CHARS:
        return value
    return f"{value[:VALUE_CHARS]}... ({len(value)} characters)"


def _clock(time_ms: str) -> str:
    stamp = int(time_ms) / 1000 if time_ms.isdigit() else 0.0
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamp))


def _report(report: CheckReport) -> str:
    verdict = "serializable" if report.serializable else f"{len(report.anomalies)} anomalies"
    anomalies = table(
        ["kind", "key", "commits", "message"],
        [[a.kind, a.key, ", ".join(a.commits), a.message] for a in report.anomalies],
    )
    return (
        f'<h2 id="check">History check: {esc(verdict)}</h2>'
        f"<p>{report.commits} commits over {report.keys} keys checked.</p>"
        + (anomalies if report.anomalies else "")
    )


async def check_namespace_of(request: Request, tenant: str, namespace: str) -> CheckReport:
    keys = NamespaceKeys(tenant, check_namespace(namespace))
    return await check_namespace_history(gateway_parts(request.app).redis, keys)
