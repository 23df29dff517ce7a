"""What 100 policy rules cost a call: in the authorize stage's decision, and end to end.

`RULES` is 100 `[[policy]]` rules that all match the bench's `echo` calls, half `deny` and half
`approve`, none holding for them: conditions over `args` (60: 40 of the plain forms found
false in Python, 20 with arithmetic, which only CEL decides: each call crosses into the
bindings once), the delegation `chain` (20) and the `principal` (20), as an
operator's would read. `decision_samples` times `Policies.decide` in this process with the
rules and with none, in turns; `gateway_samples` calls one gateway with the rules put in
force through the admin API and taken away again, in alternated rounds (so a change in the
machine's load falls on both alike): sequential calls, calls/s at concurrency 16, the
gateway process's CPU time a call over those rounds, and the authorize stage's time as the
gateway's own /metrics count it (wall time: on a loaded machine it counts the waits for a
core too, which the CPU time a call does not).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from conclave.bench.core import (
    Call,
    Http1Connection,
    cpu_seconds,
    encode_request,
    latencies,
    throughput,
)
from conclave.stack import EmbeddedStack
from gateway.policy import Policies, compile_rules
from protocol import PolicyRule, Principal

WORKERS = 16
TENANT = "bench-policy"
ARGUMENTS = {"message": "ping"}


def _condition(i: int) -> str:
    kinds = (
        f"size(args.message) > {1000 + i}",
        f'args.message.startsWith("forbidden-{i}")',
        f'"{TENANT}/planner-{i}" in chain',
        f"size(args.message) * 8 > {8000 + i}",  # its bits: arithmetic, which CEL decides
        f'principal.agent == "blocked-{i}"',
    )
    return kinds[i % len(kinds)]


RULES = tuple(
    PolicyRule(
        name=f"bench-{i:03d}",
        tools=("echo",),
        when=_condition(i),
        outcome="deny" if i % 2 else "approve",
        reason=f"bench rule {i}",
    )
    for i in range(100)
)


def decision_samples(rounds: int, count: int) -> tuple[list[float], list[float]]:
    """`Policies.decide` of an echo call (us): with `RULES` and with none, `count` calls of
    each a round, in turns; the p50 of each round."""
    principal = Principal(tenant=TENANT, agent="caller", scopes=("tool:echo",),
                          expires_at=2**31, token_id="bench")  # fmt: skip
    ruled, bare = Policies(compile_rules(RULES)), Policies()
    if ruled.decide(principal, "echo", ARGUMENTS) is not None:
        raise RuntimeError("a bench rule holds for the bench's call: it would not run")
    medians: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for policies, taken in ((ruled, medians[0]), (bare, medians[1])):
            samples = []
            for _ in range(count):
                began = time.perf_counter_ns()
                policies.decide(principal, "echo", ARGUMENTS)
                samples.append((time.perf_counter_ns() - began) / 1000)
            taken.append(statistics.median(samples))
    return medians


@dataclass
class GatewayFigures:
    """One gateway's figures with `RULES` in force (`ruled`) and with none (`bare`)."""

    ruled_ms: list[float] = field(default_factory=list)  # sequential calls' latencies
    bare_ms: list[float] = field(default_factory=list)
    ruled_rates: list[float] = field(default_factory=list)  # calls/s at concurrency WORKERS
    bare_rates: list[float] = field(default_factory=list)
    # the gateway process's CPU time a call (us) in each round of calls/s
    ruled_cpu_us: list[float] = field(default_factory=list)
    bare_cpu_us: list[float] = field(default_factory=list)
    # the authorize stage's time in the gateway (its /metrics): seconds summed, and stages
    ruled_authorize: list[float] = field(default_factory=lambda: [0.0, 0.0])
    bare_authorize: list[float] = field(default_factory=lambda: [0.0, 0.0])


class _Gateway:
    """The calls the rows make, and the admin's: rules in and out, the stage's metrics."""

    def __init__(self, stack: EmbeddedStack) -> None:
        self.url = stack.url
        token = stack.token(TENANT, "caller", ["tool:echo"])
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        body = json.dumps({"arguments": ARGUMENTS}).encode()
        self.raw = encode_request("POST", stack.url, "/v1/tools/echo/call", headers, body)
        self.admin = Http1Connection(stack.url)
        self.admin_headers = stack.admin_headers
        self.connections = [Http1Connection(stack.url) for _ in range(WORKERS + 1)]
        self.calls = [self._call(connection) for connection in self.connections]

    def _call(self, connection: Http1Connection) -> Call:
        async def call() -> None:
            status, answer = await connection.request(self.raw)
            if status != 200:
                raise RuntimeError(f"a policy bench call was refused: {answer[:300]!r}")

        return call

    async def _admin(self, method: str, path: str, body: Any = None) -> bytes:
        data = b"" if body is None else json.dumps(body).encode()
        raw = encode_request(method, self.url, path, self.admin_headers, data)
        status, answer = await self.admin.request(raw)
        if status != 200:
            raise RuntimeError(f"the bench's {method} {path} failed: {answer[:300]!r}")
        return answer

    async def api_rules(self) -> list[Any]:
        rules: list[Any] = json.loads(await self._admin("GET", "/v1/policies"))["rules"]
        return rules

    async def put_rules(self, rules: list[Any]) -> None:
        """In force on this gateway when answered (its other replicas follow within 1 s)."""
        await self._admin("PUT", "/v1/policies", {"rules": rules})

    async def authorize_seconds(self) -> tuple[float, float]:
        """The authorize stage's seconds summed and its count, from the gateway's /metrics."""
        found = {"sum": 0.0, "count": 0.0}
        for line in (await self._admin("GET", "/metrics")).decode().splitlines():
            for kind in found:
                if line.startswith(f'conclave_stage_seconds_{kind}{{stage="authorize"}}'):
                    found[kind] = float(line.rsplit(" ", 1)[1])
        return found["sum"], found["count"]

    async def aclose(self) -> None:
        for connection in [self.admin, *self.connections]:
            await connection.aclose()


def gateway_samples(
    stack: EmbeddedStack, pid: int, count: int, rounds: int, seconds: float
) -> GatewayFigures:
    """One gateway (one process, `pid`), `RULES` put in force through the admin API and taken
    away again between rounds, in the order A B, B A, ...: the same process, caches and
    connections, only the rules differ. A round: `count / rounds` sequential calls, then
    calls/s at concurrency WORKERS for `seconds`, with the process's CPU time over them. The
    admin API's rules as they were are put back at the end."""
    rules = [rule.model_dump(mode="json") for rule in RULES]

    async def measure() -> GatewayFigures:
        gateway = _Gateway(stack)
        figures = GatewayFigures()
        kept = await gateway.api_rules()
        try:
            for turn in range(rounds):
                for ruled in (True, False) if turn % 2 == 0 else (False, True):
                    await gateway.put_rules(rules if ruled else [])
                    began = await gateway.authorize_seconds()
                    taken = await latencies(gateway.calls[-1], max(1, count // rounds))
                    await throughput(gateway.calls[:WORKERS], 0.2, warm=True)
                    used, clock = cpu_seconds([pid]), time.perf_counter()
                    rate = await throughput(gateway.calls[:WORKERS], seconds)
                    cpu_us = (cpu_seconds([pid]) - used) / (rate * (time.perf_counter() - clock))
                    ended = await gateway.authorize_seconds()
                    (figures.ruled_ms if ruled else figures.bare_ms).extend(taken)
                    (figures.ruled_rates if ruled else figures.bare_rates).append(rate)
                    (figures.ruled_cpu_us if ruled else figures.bare_cpu_us).append(cpu_us * 1e6)
                    authorize = figures.ruled_authorize if ruled else figures.bare_authorize
                    authorize[0] += ended[0] - began[0]
                    authorize[1] += ended[1] - began[1]
            return figures
        finally:
            await gateway.put_rules(kept)
            await gateway.aclose()

    return anyio.run(measure, backend_options={"use_uvloop": True})
