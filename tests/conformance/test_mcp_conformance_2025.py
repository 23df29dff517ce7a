"""The conformance suite's 0.2 line, `--requirements 2025-11-25` (the handshake era), against
the fixture alone and through Conclave.

Run as `conclave bench conformance --requirements 2025-11-25` runs it, on two of its paths:
the fixture alone, and through the token proxy to a real gateway with the fixture as an
`mcp_http` source (the `mcp_stdio` path's sandbox adds nothing the 2026-07-28 module does
not already run; one gateway stack for the module keeps CI's cost down). The scenarios that
test the gateway itself rather than the fixture's tools (the handshake, ping, the caller's
log level, the server's event streams, resource subscriptions, DNS rebinding) pass through
Conclave whatever the fixture does. (Sampling and elicitation, which pass alone, do not yet:
Conclave relays no upstream's request to the client; `conclave bench conformance` says so
in its goal row.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conclave.bench.core.suite import SuiteResult
from conclave.bench.mcp import conformance_suite
from gateway.config import Settings

REVISION = "2025-11-25"
GATEWAY_SCENARIOS = (
    "server-initialize",
    "ping",
    "logging-set-level",
    "server-sse-multiple-streams",
    "resources-subscribe",
    "resources-unsubscribe",
    "dns-rebinding-protection",
)


@pytest.fixture(scope="module")
def bench(
    conformance_installed: None, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> SuiteResult:
    """The suite's 2025-11-25 scenarios on the fixture alone, then through one gateway."""
    suite = conformance_suite.suite_for(REVISION)
    scratch = Path(tmp_path_factory.mktemp("conformance-2025"))
    base = Settings(redis_url=redis_url, port=0, sandbox_backend="process")
    direct = conformance_suite.run_direct(suite)
    through = conformance_suite.run_via_gateway("mcp_http", base, scratch, suite)
    return conformance_suite.report([direct, through], suite)


def test_the_bench_runs_the_0_2_line_for_2025_11_25(bench: SuiteResult) -> None:
    assert (
        bench.tables[0].title
        == f"conformance: conformance 0.2.0-alpha.12 --requirements {REVISION}"
    )
    assert set(bench.series) == {conformance_suite.DIRECT, conformance_suite.VIA_HTTP}
    assert set(bench.series[conformance_suite.DIRECT]) >= set(GATEWAY_SCENARIOS)


@pytest.mark.parametrize("scenario", GATEWAY_SCENARIOS)
def test_the_gateways_own_2025_scenarios_pass_through_conclave(
    bench: SuiteResult, scenario: str
) -> None:
    assert bench.series[conformance_suite.VIA_HTTP][scenario] == []
