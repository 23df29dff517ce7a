"""The conformance suite's scenarios where the server asks the client (sampling, elicitation)
pass through Conclave as they pass against the fixture alone, with the fixture federated as
an `mcp_http` source and as an `mcp_stdio` one (in a bwrap sandbox): the suite's client
answers what the fixture's tools ask it mid-call, and the tools finish with its answers.
Failing on a gateway that had no server-to-client channel, they are issue 24's gap closed.
So do `resources/subscribe` and `resources/unsubscribe`, which through `mcp_stdio` subscribe
the fixture running in the caller's own sandbox (refused there before: 28 of the suite's 30
scenarios passed through `mcp_stdio`, now 30)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conclave.bench.mcp.conformance_cli import ConformanceSuite, run_conformance
from conclave.bench.mcp.conformance_suite import through_gateway
from gateway.config import Settings

SCENARIOS = (
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "resources-subscribe",
    "resources-unsubscribe",
)


@pytest.fixture(scope="module", params=["mcp_http", "mcp_stdio"])
def conclave_url(
    request: pytest.FixtureRequest,
    conformance_installed: None,
    redis_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The proxied `/mcp` of a gateway with the fixture as the source kind asked."""
    if request.param == "mcp_stdio":
        request.getfixturevalue("bwrap_available")
    scratch = Path(tmp_path_factory.mktemp(f"conformance-{request.param}"))
    base = Settings(redis_url=redis_url, port=0, sandbox_backend="process")
    with through_gateway(request.param, base, scratch) as url:
        yield url


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scenario_passes_through_conclave(conclave_url: str, scenario: str) -> None:
    outcomes = run_conformance(conclave_url, ConformanceSuite(selection=("--scenario", scenario)))
    assert set(outcomes) == {scenario}
    assert outcomes[scenario].ok, outcomes[scenario].failures
