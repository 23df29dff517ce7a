"""The conformance suite's 0.2 line, `--requirements 2026-07-28`, against Conclave itself.

The scenarios that test an MCP server's HTTP front rather than its tools (the stateless
lifecycle, header validation, caching hints, DNS rebinding) test the gateway: run through
the token proxy to a real gateway with the fixture as an `mcp_http` source, each of their
checks passes unless it needs a diagnostic tool of the fixture's that a gateway cannot judge
(`test_missing_capability`: whether a proxied tool needs the client's sampling capability).
The whole comparison with the fixture alone is `conclave bench conformance --line 0.2`.
"""

from __future__ import annotations

import pytest

from conclave.bench.conformance_cli import STATELESS_SUITE
from conclave.bench.conformance_suite import ConformanceRun, run_via_gateway
from gateway.settings import Settings

GATEWAY_SCENARIOS = ("server-stateless", "http-header-validation", "caching")
GATEWAY_SCENARIOS += ("dns-rebinding-protection",)
# What the proxied tool needs of the client is the upstream's to say, not the gateway's.
FIXTURE_JUDGED = (
    "sep-2575-server-rejects-undeclared-capability",
    "sep-2575-missing-capability-http-400",
)


@pytest.fixture(scope="module")
def through_conclave(
    conformance_installed: None, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> ConformanceRun:
    scratch = tmp_path_factory.mktemp("conformance-2026")
    return run_via_gateway("mcp_http", Settings(redis_url=redis_url), scratch, STATELESS_SUITE)


@pytest.mark.parametrize("scenario", GATEWAY_SCENARIOS)
def test_the_gateways_own_2026_scenarios_pass_through_conclave(
    through_conclave: ConformanceRun, scenario: str
) -> None:
    outcome = through_conclave.outcomes[scenario]
    failures = [f for f in outcome.failures if f.split(":")[0] not in FIXTURE_JUDGED]
    assert not failures
    assert outcome.passed > 0
