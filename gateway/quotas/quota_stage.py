"""The quota stages, composed into the pipeline only when conclave.toml sets quotas (no
quota: not a stage, nothing per call).

`QuotaStage` runs after budget (the token is current, the caller within its rate) and before
dispatch: a tool call past one of its quotas is refused there, before any sandbox is touched.
`QuotaCharge` (closing, after account) charges what a call that ran used to its day budgets.
"""

from __future__ import annotations

from gateway.pipeline import RequestContext
from gateway.quotas.quota_book import QuotaBook


class QuotaStage:
    name = "quota"

    def __init__(self, book: QuotaBook) -> None:
        self.book = book

    async def __call__(self, ctx: RequestContext) -> None:
        if ctx.tool is None:
            return
        p = ctx.require_principal()
        limits = self.book.quotas.limits(p.tenant, p.agent, ctx.tool.name)
        if limits:
            refused = await self.book.take(limits)
            if refused is not None:
                raise refused


class QuotaCharge:
    name = "quota_charge"

    def __init__(self, book: QuotaBook) -> None:
        self.book = book

    async def __call__(self, ctx: RequestContext) -> None:
        if ctx.tool is None or ctx.usage is None or not ctx.executed:
            return
        p = ctx.require_principal()
        limits = self.book.quotas.limits(p.tenant, p.agent, ctx.tool.name)
        if limits:
            await self.book.charge(limits, ctx.usage.cpu_ms)
