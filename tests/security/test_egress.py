"""Egress policy (issue 13): a sandboxed tool reaches only the host:port its allow-list names,
through the gateway's egress proxy, checked after DNS resolution and audited per caller.

On bwrap and docker. The "internet" is an HTTP server this test runs on every address of this
machine (loopback and private ones, which is why the positive cases list the literal
address). Before: sandboxes had no way out at all, and tools declared no allow-list.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.http import gateway_parts
from gateway.identity.tokens import issue_token
from gateway.telemetry import AuditLog, AuditRecord
from tools.harness.egress import EGRESS_TEST_PORT

pytestmark = pytest.mark.anyio

PORT = EGRESS_TEST_PORT
GREETING = "hello from the internet"


class _Greeter(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = GREETING.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _DualStackServer(ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    # The tools' allow-lists name one fixed port: this module's tests share one worker
    # (tests/tiers.py, checked by tests/test_worker_groups.py), so one server binds it. No
    # SO_REUSEPORT: servers of two workers sharing the port reset each other's connections
    # as one closed (a 502 "Connect call failed" in CI); a second binder now fails loudly.

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


@pytest.fixture(scope="module")
def internet() -> Iterator[None]:
    """The test's "internet" host: HTTP on every address of this machine, at PORT."""
    server = _DualStackServer(("::", PORT), _Greeter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield
    server.shutdown()
    server.server_close()


class EgressGateway:
    def __init__(self, client: httpx.AsyncClient, settings: Settings, audit: Any) -> None:
        self.client = client
        self.settings = settings
        self.audit = audit

    async def call(self, tool: str, tenant: str = "evil", **arguments: object) -> Any:
        token = issue_token(self.settings, tenant=tenant, agent="mallory", scopes=["tool:*"])
        answer = await self.client.post(
            f"/v1/tools/{tool}/call",
            json={"arguments": arguments},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["result"]

    async def egress_records(self, redis: Redis, tool: str) -> list[AuditRecord]:
        await self.audit.flush()
        records = await AuditLog(redis).query(tool=tool)
        return [record for record in records if record.transport == "egress"]


@pytest.fixture(params=["bwrap", "docker"])
async def gateway(
    request: pytest.FixtureRequest, redis_url: str, redis: Redis, internet: None
) -> AsyncIterator[EgressGateway]:
    request.getfixturevalue("docker_engine" if request.param == "docker" else "bwrap_available")
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=request.param,
        tool_modules=("tools.builtin", "tools.harness.egress"),
        secret="egress-suite-secret-" + "x" * 32,
        admin_key="egress-suite-admin-key",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield EgressGateway(client, settings, gateway_parts(app).audit)


def _refused(result: dict[str, Any], because: str) -> None:
    assert result["status"] == 403, result
    assert '"code":"PERMISSION_DENIED"' in result["body"], result
    assert because in result["body"], result


@pytest.mark.parametrize("tunnel", [False, True])
async def test_a_listed_destination_is_reached_through_the_proxy(
    gateway: EgressGateway, redis: Redis, tunnel: bool
) -> None:
    result = await gateway.call("egress_fetch", url=f"http://127.0.0.1:{PORT}/", tunnel=tunnel)
    assert result == {"status": 200, "body": GREETING}
    [record] = await gateway.egress_records(redis, "egress_fetch")
    assert (record.tenant, record.agent, record.outcome) == ("evil", "mallory", "ok")
    assert record.operation == f"CONNECT 127.0.0.1:{PORT}"


@pytest.mark.parametrize("tunnel", [False, True])
async def test_a_destination_not_listed_is_refused_and_audited_with_the_caller(
    gateway: EgressGateway, redis: Redis, tunnel: bool
) -> None:
    other_port = await gateway.call(
        "egress_fetch", url=f"http://127.0.0.1:{PORT + 1}/", tunnel=tunnel
    )
    _refused(other_port, f"127.0.0.1:{PORT + 1} is not in the tool's network allow-list")
    raw_ip = await gateway.call("egress_fetch", url="http://93.184.216.34/", tunnel=tunnel)
    _refused(raw_ip, "93.184.216.34:80 is not in the tool's network allow-list")
    records = await gateway.egress_records(redis, "egress_fetch")
    assert {r.operation for r in records} == {
        f"CONNECT 127.0.0.1:{PORT + 1}",
        "CONNECT 93.184.216.34:80",
    }
    for record in records:
        assert (record.tenant, record.agent) == ("evil", "mallory")
        assert (record.outcome, record.code) == ("refused", "PERMISSION_DENIED")
        assert record.trace_id


async def test_a_name_resolving_to_loopback_is_refused_unless_the_address_is_listed(
    gateway: EgressGateway,
) -> None:
    by_name = await gateway.call("egress_fetch_by_name", url=f"http://localhost:{PORT}/")
    _refused(by_name, "localhost resolves to 127.0.0.1, a non-public address")
    tunnelled = await gateway.call(
        "egress_fetch_by_name", url=f"http://localhost:{PORT}/", tunnel=True
    )
    _refused(tunnelled, "localhost resolves to 127.0.0.1, a non-public address")
    raw_ip = await gateway.call("egress_fetch_by_name", url=f"http://127.0.0.1:{PORT}/")
    _refused(raw_ip, "is not in the tool's network allow-list")
    listed = await gateway.call("egress_fetch_listed_v6", url=f"http://localhost:{PORT}/")
    assert listed == {"status": 200, "body": GREETING}


async def test_ipv6_loopback_is_refused_unless_listed(gateway: EgressGateway) -> None:
    refused = await gateway.call("egress_fetch", url=f"http://[::1]:{PORT}/")
    _refused(refused, f"::1:{PORT} is not in the tool's network allow-list")
    mapped = await gateway.call("egress_fetch", url=f"http://[::ffff:127.0.0.1]:{PORT}/")
    _refused(mapped, "is not in the tool's network allow-list")
    for tunnel in (False, True):
        listed = await gateway.call(
            "egress_fetch_listed_v6", url=f"http://[::1]:{PORT}/", tunnel=tunnel
        )
        assert listed == {"status": 200, "body": GREETING}


def _host_address() -> str:
    """This machine's address on its default route (where the test server also listens)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("203.0.113.1", 9))  # no packet is sent: this only picks the route
        address: str = probe.getsockname()[0]
    return address


async def test_a_direct_socket_past_the_proxy_has_no_route(gateway: EgressGateway) -> None:
    address = _host_address()
    with socket.create_connection((address, PORT), timeout=5):
        pass  # reachable from the host itself
    result = await gateway.call("egress_direct_connect", host=address, port=PORT)
    assert result == "ENETUNREACH"


async def test_a_tool_without_an_allow_list_gets_no_proxy(gateway: EgressGateway) -> None:
    code = "import os\nsorted(k for k in os.environ if k.lower().endswith('_proxy'))"
    result = await gateway.call("run_python", code=code)
    assert result["return_value"] == [], result


async def test_a_sandbox_without_network_rights_has_no_egress_socket(
    gateway: EgressGateway,
) -> None:
    code = "import os\nos.path.exists('/workspace/.conclave-egress.sock')"
    without = await gateway.call("run_python", code=code)
    assert without["return_value"] is False, without
    assert await gateway.call("egress_socket_present_with_rights") is True


async def test_silent_connections_past_the_pending_cap_are_refused_at_once(
    gateway: EgressGateway,
) -> None:
    seen = await gateway.call("egress_hold_connections", count=7, send_head=False)
    refused = [line for line in seen if line.startswith("HTTP/1.1 429")]
    assert len(refused) == 7 - 4, seen  # four may wait for their head, briefly
    assert all(line in ("silent", "closed") for line in seen if line not in refused), seen


async def test_connections_past_the_cap_are_refused_while_another_sandbox_reaches_out(
    gateway: EgressGateway, redis: Redis
) -> None:
    cap = gateway.settings.egress_connections_per_sandbox
    results: list[Any] = []
    url = f"http://127.0.0.1:{PORT}/"
    # The victim's sandbox is warm, as a running agent's is: its call during the attack
    # measures the proxy, not a cold start.
    warm = await gateway.call("egress_fetch", tenant="acme", url=url, tunnel=True)
    assert warm == {"status": 200, "body": GREETING}

    async def attack() -> None:
        held = await gateway.call(
            "egress_hold_connections", count=cap + 4, send_head=True, hold_s=12
        )
        results.append(held)

    async with anyio.create_task_group() as group:
        group.start_soon(attack)
        with anyio.fail_after(30):  # the attacker's tunnels are open (each one audited)
            # The audit stream has no event to wait on: look again until the records are in.
            tool = "egress_hold_connections"
            while len(await gateway.egress_records(redis, tool)) < cap:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        victim = await gateway.call("egress_fetch", tenant="acme", url=url, tunnel=True)
        assert victim == {"status": 200, "body": GREETING}
        assert not results  # the attacker still held its connections meanwhile
    [held] = results
    assert held.count("HTTP/1.1 200 Connection established") == cap, held
    assert sum(line.startswith("HTTP/1.1 429") for line in held) == 4, held
