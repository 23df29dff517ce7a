"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned in
`.ci/lib.sh`), run by its own CLI on Node 22 against real servers:

- our fixture server alone (`tools.harness.conformance_server`): every scenario passes, so a
  scenario that fails through Conclave names a gap in Conclave, not in the fixture;
- the token-adding proxy in front of the fixture changes nothing the suite sees, and the
  server behind it gets the token;
- through Conclave with the fixture as an `mcp_http` and as an `mcp_stdio` source is issue
  24's goal (every scenario that passes alone passes): `conclave bench conformance` measures
  it, a goal row per source kind, in the bench job. Each gap it finds gets a test of its own
  where it is fixed; no list of expected failures is kept here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conclave.bench.core.child_server import running_child_server
from conclave.bench.mcp.conformance_cli import run_conformance
from conclave.bench.mcp.conformance_suite import ConformanceRun, run_direct
from conclave.bench.mcp.mcp_upstream import running_upstream
from conclave.stack.ports import free_port

# The scenarios of the pinned version's active suite (0.1.16: 30).
ACTIVE_SCENARIOS = 30


@pytest.fixture(scope="module")
def direct(conformance_installed: None) -> ConformanceRun:
    return run_direct()


@pytest.fixture
def proxy_in_front(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The upstream test server behind the token proxy: (the proxy's URL, the token)."""
    token = "proxy-test-token"
    (tmp_path / "token").write_text(token)
    with running_upstream() as upstream:
        port = free_port()
        target = upstream.removesuffix("/mcp")
        argv = ["conclave.bench.mcp.token_proxy", "--port", str(port), "--target", target]
        with running_child_server([*argv, "--token-file", str(tmp_path / "token")], port):
            yield f"http://127.0.0.1:{port}/mcp", token


def test_the_fixture_passes_every_scenario_of_the_suite(direct: ConformanceRun) -> None:
    failing = {name: o.failures for name, o in direct.outcomes.items() if not o.ok}
    assert len(direct.outcomes) == ACTIVE_SCENARIOS, sorted(direct.outcomes)
    assert not failing


def test_the_token_proxy_adds_the_token(
    proxy_in_front: tuple[str, str],
) -> None:
    url, token = proxy_in_front
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "headers_seen", "arguments": {}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    answer = httpx.post(url, json=message, headers=accept, timeout=30)
    assert answer.status_code == 200, answer.text
    seen = answer.json()["result"]["structuredContent"]
    assert seen["authorization"] == f"Bearer {token}"


def test_the_suite_through_the_token_proxy_sees_what_it_sees_directly(
    direct: ConformanceRun, tmp_path: Path
) -> None:
    """Streaming answers, server-to-client requests on them, sessions, DELETE and the
    client's own Host and Origin (the DNS-rebinding scenario) all pass the proxy unchanged:
    the fixture behind it passes what it passes alone."""
    (tmp_path / "token").write_text("unused-by-the-fixture")
    fixture_port, proxy_port = free_port(), free_port()
    fixture = ["tools.harness.conformance_server", "--port", str(fixture_port)]
    proxy = ["conclave.bench.mcp.token_proxy", "--port", str(proxy_port)]
    proxy += ["--target", f"http://127.0.0.1:{fixture_port}"]
    proxy += ["--token-file", str(tmp_path / "token")]
    with running_child_server(fixture, fixture_port), running_child_server(proxy, proxy_port):
        through = run_conformance(f"http://127.0.0.1:{proxy_port}/mcp")
    assert {n for n, o in through.items() if o.ok} == direct.passing
