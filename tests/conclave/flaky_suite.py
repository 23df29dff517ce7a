"""A suite whose first run meets a transient refusal (the engine did not answer in time), as
one call of a benchmark did on a busy machine; its second run ends normally."""

from __future__ import annotations

from agents import GatewayCallError
from conclave.bench.core.suite import BenchContext, Goal, SuiteResult
from protocol import ErrorCode, SerfError


def run(ctx: BenchContext) -> SuiteResult:
    tries = ctx.out_dir / "flaky-tries"
    count = int(tries.read_text()) + 1 if tries.exists() else 1
    tries.write_text(str(count))
    if count == 1:
        refusal = SerfError.of(
            ErrorCode.SANDBOX_UNAVAILABLE, "the Docker engine did not answer within 60 s"
        )
        raise ExceptionGroup("a call failed", [GatewayCallError(refusal, 503)])
    return SuiteResult("flaky", goals=[Goal("ran", "2 runs", str(count), count == 2)])
