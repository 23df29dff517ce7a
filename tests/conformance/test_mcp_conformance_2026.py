"""The conformance suite's 0.2 line, `--requirements 2026-07-28`, against Conclave itself.

Run as `conclave bench conformance --requirements 2026-07-28` runs it. The scenarios that
test an MCP server's HTTP front rather than its tools (the stateless lifecycle, header
validation, caching hints, DNS rebinding) test the gateway: through the token proxy to a real
gateway with the fixture as a source, each of their checks passes, `subscriptions/listen`'s
and -32021's too (`test_missing_capability` asks the client to sample: Conclave refuses the
request that did not declare `sampling`), through an `mcp_http` source and through an
`mcp_stdio` one alike (its server runs in the caller's sandbox, whose runner passes the
server's request to the gateway, which stops the call).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.progress import Progress

from conclave.bench.core.suite import BenchContext, SuiteResult
from conclave.bench.mcp import conformance_suite
from conclave.stack import EmbeddedStack
from gateway.config import Settings

GATEWAY_SCENARIOS = ("server-stateless", "http-header-validation", "caching")
GATEWAY_SCENARIOS += ("dns-rebinding-protection",)


@pytest.fixture(scope="module")
def bench(
    conformance_installed: None, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> SuiteResult:
    """`conclave bench conformance --requirements 2026-07-28`: the fixture alone, then
    through a gateway with it as an `mcp_http` source (and as an `mcp_stdio` one where
    bubblewrap runs)."""
    out = Path(tmp_path_factory.mktemp("conformance-2026"))
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="process")
    with EmbeddedStack(settings) as stack:
        ctx = BenchContext(stack, quick=True, seed=7, out_dir=out, progress=Progress())
        ctx.conformance_requirements = "2026-07-28"
        return conformance_suite.run(ctx)


def test_the_bench_runs_the_0_2_line_for_the_revision_asked(bench: SuiteResult) -> None:
    assert (
        bench.tables[0].title == "conformance: conformance 0.2.0-alpha.12 --requirements 2026-07-28"
    )
    assert set(bench.series) >= {"direct", "via mcp_http"}


@pytest.mark.parametrize("scenario", GATEWAY_SCENARIOS)
def test_the_gateways_own_2026_scenarios_pass_through_conclave(
    bench: SuiteResult, scenario: str
) -> None:
    for path, outcomes in bench.series.items():
        if path != "direct":
            assert not outcomes[scenario], path
