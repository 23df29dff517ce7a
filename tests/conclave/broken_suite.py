"""A suite that fails midway, as one did when the Docker engine stopped answering."""

from __future__ import annotations

from conclave.bench.core.suite import BenchContext, SuiteResult


def run(ctx: BenchContext) -> SuiteResult:
    raise RuntimeError("SANDBOX_UNAVAILABLE: the engine did not answer within 60 s")
