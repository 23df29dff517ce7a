"""Whether a quota grants exactly what was set, under concurrency, across replicas.

The two gateways of the approvals rows have a `[[quota]]` of `LIMIT` calls a day for each
agent of the bench's tenant. Each run, a new agent (a new day's count) calls `echo` from
`CALLERS` concurrent callers, half on each gateway, each calling until it is refused; the run
counts the calls granted. Over-grant is what it granted past `LIMIT` (the goal: none, ever);
a run that grants fewer is counted too (the quota is exact when neither happens).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import anyio

from conclave.bench.core import Http1Connection, encode_request
from conclave.stack import EmbeddedStack

TENANT = "bench-quotas"
LIMIT = 200
CALLERS = 64
RULE = f"""
[[quota]]
name = "bench-daily"
tenants = ["{TENANT}"]
tools = ["echo"]
per = ["agent"]
calls_per_day = {LIMIT}
"""


@dataclass
class QuotaRun:
    granted: int
    refused: int  # 429 RATE_LIMITED naming the quota: one a caller, each its last call


def quota_runs(first: EmbeddedStack, second: EmbeddedStack, runs: int) -> list[QuotaRun]:
    async def measure() -> list[QuotaRun]:
        urls = [(first, second)[i % 2].url for i in range(CALLERS)]
        connections = [(url, Http1Connection(url)) for url in urls]
        try:
            return [await _one_run(connections) for _ in range(runs)]
        finally:
            for _, connection in connections:
                await connection.aclose()

    async def _one_run(connections: list[tuple[str, Http1Connection]]) -> QuotaRun:
        agent = f"q-{uuid.uuid4().hex[:12]}"
        token = first.token(TENANT, agent, ["tool:echo"])
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        body = json.dumps({"arguments": {"message": "ping"}}).encode()
        run = QuotaRun(0, 0)

        async def caller(url: str, connection: Http1Connection) -> None:
            call = encode_request("POST", url, "/v1/tools/echo/call", headers, body)
            while True:
                status, answer = await connection.request(call)
                if status == 200:
                    run.granted += 1
                    continue
                refused = json.loads(answer)
                if status != 429 or refused.get("details", {}).get("quota") != "bench-daily":
                    raise RuntimeError(f"a quota bench call failed otherwise: {answer[:300]!r}")
                run.refused += 1
                return

        async with anyio.create_task_group() as group:
            for url, connection in connections:
                group.start_soon(caller, url, connection)
        return run

    return anyio.run(measure, backend_options={"use_uvloop": True})
