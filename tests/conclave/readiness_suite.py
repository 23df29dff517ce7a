"""A suite that ends: one goal, the bench's gateway answers /readyz."""

from __future__ import annotations

import httpx

from conclave.bench.core.suite import BenchContext, Goal, SuiteResult


def run(ctx: BenchContext) -> SuiteResult:
    ready = httpx.get(f"{ctx.stack.url}/readyz").status_code
    return SuiteResult("fine", goals=[Goal("gateway ready", "200", str(ready), ready == 200)])
