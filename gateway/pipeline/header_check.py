"""What a request's headers alone decide, before its body is read (issue 26).

A route reads its body before the pipeline runs (the pipeline needs the arguments, the
budget and the plan), so a stranger with no token, a revoked agent or a caller over its rate
had the gateway read up to `max_body_bytes` before being refused. For a body that may be
large (declared over `SMALL_BODY_BYTES`, or not declared: chunked), `HeaderCheck` first runs
the authenticate stage and asks the budget stage what admission would refuse (`peek`: the
token's generation and the rate buckets, nothing taken). A refusal is handed to the pipeline
as the request's input error without reading the body, so it is answered and audited as any
refusal is; the pipeline's own stages decide it again (authenticate, or scope raising it).
A small body costs less to read than a Redis round trip, so it takes the ordinary path.
A large body an admitted caller sends takes its bytes from its tenant's `BodyRate` too: what
parsing it will cost this process.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.gateway_error import GatewayError
from gateway.pipeline.authenticate import AuthenticateStage
from gateway.pipeline.body_rate import BodyRate
from gateway.pipeline.budget import BudgetStage
from gateway.pipeline.context import RequestContext

SMALL_BODY_BYTES = 65_536


class HeaderCheck:
    def __init__(
        self, authenticate: AuthenticateStage, budget: BudgetStage, body_rate: BodyRate
    ) -> None:
        self.authenticate = authenticate
        self.budget = budget
        self.body_rate = body_rate

    @staticmethod
    def wanted(headers: Mapping[str, str]) -> bool:
        """The body may be large: declared over SMALL_BODY_BYTES, or not declared."""
        declared = headers.get("content-length")
        return declared is None or not declared.isdigit() or int(declared) > SMALL_BODY_BYTES

    async def refusal(
        self, headers: Mapping[str, str], target: str, body_bytes: int
    ) -> GatewayError | None:
        """Why a request with `headers` is refused whatever its body says, or None. `target`
        is the rate bucket it will take from (a tool's name as called, `state:*`);
        `body_bytes` what its body may hold (its declared length, or the route's limit)."""
        ctx = RequestContext("http", "(headers)", headers)
        try:
            await self.authenticate(ctx)
        except GatewayError as refused:
            return refused
        principal = ctx.require_principal()
        if over_rate := await self.budget.peek(principal, target):
            return over_rate
        return self.body_rate.take(principal.tenant, body_bytes)
