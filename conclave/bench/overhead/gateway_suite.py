"""`conclave bench gateway`: what the gateway adds to a tool call, and how many it carries.

`echo` is called three ways in the same run: directly through an `InProcessExecutor` (no
gateway), through a gateway over real HTTP (`POST /v1/tools/echo/call`), and through `/mcp`
(raw JSON-RPC over a minimal HTTP/1.1 client, and the official `mcp` client). The gateway
measured for overhead runs tools in-process, so the difference is the gateway itself: HTTP,
the six stages and their Redis round trips. One more row calls the bench stack's own
gateway, whose executor is the configured sandbox, to show what a sandboxed call costs end
to end.

A gateway is measured with history too (issue 39): the REST row again after `HISTORY` calls of
`echo` (its latency windows full, its audit stream long), with the bytes each call made Redis
send (the server's own `total_net_output_bytes`, over the calls/s run), so a cost that grows
with what the gateway has served shows as a drop from the fresh row.

A streamed `/mcp` call (issue 24) is measured against the plain one in turns: `echo` reports
nothing, so the gateway answers it plain JSON even to a client that takes an event stream;
`echo_with_progress` (`tools.harness.reporting`) is `echo` reporting one progress event, asked
as the `mcp` client with a progress callback asks (a `progressToken` in `_meta`, `Accept:
application/json, text/event-stream`), so its answer is an SSE stream on the POST: the
progress notification, then the JSON-RPC response, which the raw client reads to its end.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
from redis.asyncio import Redis

from conclave.bench.core import (
    BenchContext,
    Call,
    Goal,
    Http1Connection,
    SuiteResult,
    Table,
    alternated_latencies,
    encode_request,
    latencies,
    measuring_settings,
    percentile,
    throughput,
)
from conclave.bench.overhead.ceiling_app import ceiling_server
from conclave.stack import EmbeddedStack
from gateway import connect_redis
from protocol import Principal, ToolContext
from sandbox import InProcessExecutor
from tools import default_registry
from tools.calls import CallLimits, Invocation

GOAL_P50_MS, GOAL_P99_MS, GOAL_RATE = 1.5, 5.0, 1500.0
GOAL_CEILING_SHARE = 0.6  # the REST echo's calls/s against the bare endpoint's (issue 39)
GOAL_HISTORY_DROP = 0.05  # calls/s after HISTORY calls against a fresh gateway's (issue 39)
GOAL_CLIENT_SHARE = 0.5  # the official mcp client's calls/s against raw /mcp's (issue 39)
HISTORY = 10_000
REST = "gateway HTTP /v1/tools"
REST_AFTER = f"gateway HTTP /v1/tools after {HISTORY:,} calls"
OFFICIAL = "gateway /mcp (official mcp client)"
GOAL_STREAMED_ADDED_MS = 1.0  # a streamed /mcp call's p50 over a plain one's (issue 24)
CEILING = "ceiling: bare FastAPI+uvicorn, one Redis call"
PLAIN = "gateway /mcp (JSON-RPC, raw HTTP/1.1)"
STREAMED = "gateway /mcp streamed (SSE, one progress event, raw HTTP/1.1)"
STREAMED_TOOL = "echo_with_progress"
STREAMED_ADDED = "streamed added p50 over plain (ms)"
# The overhead gateway's tools: `echo`, and the one that streams (`STREAMED_TOOL`).
TOOL_MODULES = ("tools.builtin", "tools.harness.reporting")
ROUNDS = 2  # of calls/s each for the plain and the streamed /mcp rows, in turns


async def _throughput(make_call: Callable[[int], Call], workers: int, seconds: float) -> float:
    return await throughput([make_call(i) for i in range(workers)], seconds, warm=True)


def _invocation() -> Invocation:
    principal = Principal(tenant="bench", agent="direct", expires_at=0, token_id="direct")
    context = ToolContext(
        principal=principal, session_id="bench", trace_id="0" * 32, traceparent=""
    )
    return Invocation(
        "echo",
        "tools.builtin:echo",
        {"message": "ping"},
        context,
        CallLimits(memory_mb=64, cpu_seconds=1, timeout_ms=2000, max_output_bytes=1 << 20),
    )


def _expect(status: int, body: bytes) -> None:
    if status != 200:
        raise RuntimeError(f"the gateway refused a bench call: {body.decode(errors='replace')}")


class _Target:
    """One gateway, with a token and a connection per worker: no two workers share a
    rate-limit bucket, and no worker waits on another's connection. The workers' agents keep
    their names when the suite runs again after a transient refusal, so a sandboxed row's
    retry finds the sandboxes its first attempt started (warm, or on their way) instead of
    starting a second set past the tenant's share."""

    def __init__(self, stack: EmbeddedStack, connections: list[Http1Connection]) -> None:
        self.stack = stack
        self.connections = connections
        # Worker 16 times sequential calls, workers 0-15 the calls/s: in tenants of their own,
        # so a sandbox the gateway starts for worker 16 in the background (a hedge of its slow
        # first calls) never takes one of the 16 places the throughput workers' tenant has.
        self.tokens = [
            stack.token(
                "bench" if i < 16 else "bench-solo",
                f"gateway-suite-w{i}",
                ["tool:echo", f"tool:{STREAMED_TOOL}"],
            )
            for i in range(17)
        ]

    def _raw(
        self, index: int, path: str, body: Any, accept: str, extra: dict[str, str] | None = None
    ) -> bytes:
        """The request's bytes, built once: the bench measures the gateway, not the encoding."""
        headers = {"Authorization": f"Bearer {self.tokens[index]}", "Accept": accept}
        headers |= extra or {}
        return encode_request("POST", self.stack.url, path, headers, json.dumps(body).encode())

    def rest(self, index: int) -> Call:
        raw = self._raw(
            index, "/v1/tools/echo/call", {"arguments": {"message": "ping"}}, "application/json"
        )
        connection = self.connections[index]

        async def call() -> None:
            _expect(*await connection.request(raw))

        return call

    def jsonrpc(self, index: int, *, stateless: bool = False) -> Call:
        """A `tools/call` on the handshake era's wire, or (`stateless`) on MCP 2026-07-28's:
        version and capabilities in `_meta`, `Mcp-Method`/`Mcp-Name` headers."""
        params: dict[str, Any] = {"name": "echo", "arguments": {"message": "ping"}}
        extra = None
        if stateless:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            extra = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
            extra["Mcp-Name"] = "echo"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        raw = self._raw(index, "/mcp", body, "application/json, text/event-stream", extra)
        connection = self.connections[index]

        async def call() -> None:
            status, answer = await connection.request(raw)
            _expect(status, answer)
            if json.loads(answer)["result"].get("isError"):
                raise RuntimeError(f"the gateway refused a bench call: {answer!r}")

        return call

    def streamed(self, index: int) -> Call:
        """The handshake era's `tools/call` of `STREAMED_TOOL`, answered as an event stream: read
        to its end, the JSON-RPC response its last event."""
        params = {
            "name": STREAMED_TOOL,
            "arguments": {"message": "ping"},
            "_meta": {"progressToken": 1},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        raw = self._raw(index, "/mcp", body, "application/json, text/event-stream")
        connection = self.connections[index]

        async def call() -> None:
            status, answer = await connection.request(raw)
            _expect(status, answer)
            # Not streamed, the row would measure a plain call under another name.
            if not answer.startswith(b"event: message\ndata: ") or b"/progress" not in answer:
                raise RuntimeError(f"a streamed bench call was not streamed: {answer!r}")
            if json.loads(answer.rsplit(b"data: ", 1)[1])["result"].get("isError"):
                raise RuntimeError(f"the gateway refused a bench call: {answer!r}")

        return call


async def _plain_and_streamed(
    target: _Target, count: int, seconds: float
) -> dict[str, tuple[list[float], float]]:
    """The plain and the streamed /mcp rows, measured in turns: sequential calls one of each
    at a time, calls/s in `ROUNDS` rounds of each, so the streamed call's added p50 is a
    difference within one stretch of the machine's load."""
    plain, streamed = await alternated_latencies([target.jsonrpc(16), target.streamed(16)], count)
    rates: tuple[list[float], list[float]] = ([], [])
    for _ in range(ROUNDS):
        rates[0].append(await _throughput(target.jsonrpc, 16, seconds / ROUNDS))
        rates[1].append(await _throughput(target.streamed, 16, seconds / ROUNDS))
    return {
        PLAIN: (plain, statistics.mean(rates[0])),
        STREAMED: (streamed, statistics.mean(rates[1])),
    }


async def _official_client_rows(target: _Target, count: int, seconds: float) -> list[list[Any]]:
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with AsyncExitStack() as stack:
        clients = []
        for index in range(17):
            http = create_mcp_http_client(
                headers={"Authorization": f"Bearer {target.tokens[index]}"}
            )
            await stack.enter_async_context(http)
            transport = streamable_http_client(f"{target.stack.url}/mcp", http_client=http)
            clients.append(await stack.enter_async_context(Client(transport)))

        def make(index: int) -> Call:
            async def call() -> None:
                answer = await clients[index].call_tool("echo", {"message": "ping"})
                if answer.is_error:
                    raise RuntimeError(f"the gateway refused a bench call: {answer}")

            return call

        samples = await latencies(make(16), count)
        rate = await _throughput(make, 16, seconds)
    return [samples, rate]  # type: ignore[list-item]


async def _rate_and_bytes(
    redis: Redis, make_call: Callable[[int], Call], seconds: float
) -> tuple[float, float]:
    """Calls/s at concurrency 16, and the bytes Redis sent per call meanwhile (every client
    of the bench's Redis counts: the other gateways are idle while a row runs)."""
    done = 0

    def counted(index: int) -> Call:
        call = make_call(index)

        async def once() -> None:
            nonlocal done
            await call()
            done += 1

        return once

    before = await _sent_bytes(redis)
    rate = await _throughput(counted, 16, seconds)
    return rate, (await _sent_bytes(redis) - before) / max(1, done)


async def _sent_bytes(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_net_output_bytes"])


async def _history(make_call: Callable[[int], Call]) -> None:
    """`HISTORY` calls from the 16 workers, so the row after them meets full windows."""
    async with anyio.create_task_group() as calling:
        for index in range(16):

            async def worker(call: Call = make_call(index)) -> None:
                for _ in range(HISTORY // 16):
                    await call()

            calling.start_soon(worker)


def _ceiling_call(connection: Http1Connection, url: str) -> Call:
    body = json.dumps({"arguments": {"message": "ping"}}).encode()
    raw = encode_request("POST", url, "/echo", {"Accept": "application/json"}, body)

    async def call() -> None:
        _expect(*await connection.request(raw))

    return call


async def _measure(
    ctx: BenchContext, overhead_stack: EmbeddedStack, ceiling_url: str, count: int, seconds: float
) -> tuple[dict[str, Any], dict[str, float]]:
    executor = InProcessExecutor(default_registry)
    invocation = _invocation()

    async def direct() -> None:
        outcome = await executor.execute(invocation)
        if not outcome.ok:
            raise RuntimeError(f"echo failed in-process: {outcome.error}")

    rows: dict[str, Any] = {}
    rows["direct (in-process executor)"] = (
        await latencies(direct, count),
        await _throughput(lambda _: direct, 16, seconds),
    )
    async with AsyncExitStack() as exits:
        connections = [Http1Connection(overhead_stack.url) for _ in range(17)]
        for connection in connections:
            exits.push_async_callback(connection.aclose)
        target = _Target(overhead_stack, connections)
        redis = connect_redis(overhead_stack.settings.redis_url or "")
        exits.push_async_callback(redis.aclose)
        sent: dict[str, float] = {}
        for row in (REST, REST_AFTER):
            if row == REST_AFTER:
                await _history(target.rest)
            samples = await latencies(target.rest(16), count)
            rate, sent[row] = await _rate_and_bytes(redis, target.rest, seconds)
            rows[row] = (samples, rate)
        rows |= await _plain_and_streamed(target, count, seconds)
        rows["gateway /mcp 2026-07-28 (JSON-RPC, raw HTTP/1.1)"] = (
            await latencies(target.jsonrpc(16, stateless=True), count),
            await _throughput(lambda i: target.jsonrpc(i, stateless=True), 16, seconds),
        )
        rows[OFFICIAL] = tuple(await _official_client_rows(target, count, seconds))
        ceiling = [Http1Connection(ceiling_url) for _ in range(17)]
        for connection in ceiling:
            exits.push_async_callback(connection.aclose)
        rows[CEILING] = (
            await latencies(_ceiling_call(ceiling[16], ceiling_url), count),
            await _throughput(lambda i: _ceiling_call(ceiling[i], ceiling_url), 16, seconds),
        )
        stack_connections = [Http1Connection(ctx.stack.url) for _ in range(17)]
        for connection in stack_connections:
            exits.push_async_callback(connection.aclose)
        sandboxed = _Target(ctx.stack, stack_connections)
        name = ctx.stack.backend.name if ctx.stack.backend else "?"
        rows[f"stack gateway HTTP, {name} executor"] = (
            await latencies(sandboxed.rest(16), max(50, count // 4)),
            await _throughput(sandboxed.rest, 16, seconds / 2),
        )
    return rows, sent


def run(ctx: BenchContext) -> SuiteResult:
    count, seconds = (300, 2.0) if ctx.quick else (2000, 8.0)
    return measure(ctx, count, seconds)


def measure(ctx: BenchContext, count: int, seconds: float) -> SuiteResult:
    """The suite with `count` sequential calls a row and `seconds` of calls/s at concurrency
    16 (`run`: by --quick; a test: the least that shows its rows)."""
    base = ctx.stack.settings
    settings = measuring_settings(base, tool_modules=TOOL_MODULES)
    task = ctx.progress.add_task("gateway: echo direct vs through the gateway", total=1)
    with (
        EmbeddedStack(settings, log_path=ctx.gateway_log("overhead")) as overhead_stack,
        ceiling_server(base.redis_url or "") as ceiling_url,
    ):
        # uvloop on the client side too: the bench's own event loop shares the gateway's 2 cores.
        rows, sent = anyio.run(
            _measure,
            ctx,
            overhead_stack,
            ceiling_url,
            count,
            seconds,
            backend_options={"use_uvloop": True},
        )
    ctx.progress.advance(task)

    direct_samples, _ = rows["direct (in-process executor)"]
    d50, d99 = statistics.median(direct_samples), percentile(direct_samples, 0.99)
    table = Table(
        "gateway: echo, direct vs through the gateway (ms; calls/s at concurrency 16)",
        ["path", "p50", "p99", "added p50", "added p99", "calls/s c=16"],
    )
    result = SuiteResult("gateway", tables=[table])
    for path, (samples, rate) in rows.items():
        p50, p99 = statistics.median(samples), percentile(samples, 0.99)
        added50, added99 = p50 - d50, p99 - d99
        table.rows.append([path, p50, p99, added50, added99, round(rate)])
        result.figures[f"{path} added_p50_ms"] = added50
        result.figures[f"{path} added_p99_ms"] = added99
        result.figures[f"{path} calls_per_s"] = rate
        result.series[path] = {"p50": p50, "p99": p99, "rate": rate}
        if path.startswith("gateway") and path != STREAMED:  # its own goal, over the plain row
            result.goals += [
                Goal(f"{path}: added p50", f"<= {GOAL_P50_MS} ms", f"{added50:.3f} ms",
                     added50 <= GOAL_P50_MS),
                Goal(f"{path}: added p99", f"<= {GOAL_P99_MS} ms", f"{added99:.3f} ms",
                     added99 <= GOAL_P99_MS),
                Goal(f"{path}: calls/s c=16", f">= {GOAL_RATE:.0f}", f"{rate:.0f}",
                     rate >= GOAL_RATE),
            ]  # fmt: skip
    streamed_added = statistics.median(rows[STREAMED][0]) - statistics.median(rows[PLAIN][0])
    result.figures[STREAMED_ADDED] = streamed_added
    result.goals.append(
        Goal("streamed /mcp call: added p50 over a plain one", f"<= {GOAL_STREAMED_ADDED_MS:g} ms",
             f"{streamed_added:.3f} ms", streamed_added <= GOAL_STREAMED_ADDED_MS)
    )  # fmt: skip
    _, rest_rate = rows[REST]
    _, ceiling_rate = rows[CEILING]
    share = rest_rate / ceiling_rate
    result.figures["REST share of ceiling"] = share
    _, after_rate = rows[REST_AFTER]
    drop = 1 - after_rate / rest_rate
    result.figures[f"REST calls/s drop after {HISTORY} calls"] = drop
    client_share = rows[OFFICIAL][1] / rows[PLAIN][1]
    result.figures["official client share of raw /mcp"] = client_share
    history = Table(
        f"gateway: a REST echo call, fresh and after {HISTORY:,} calls (calls/s at c=16)",
        ["gateway", "calls/s c=16", "Redis bytes sent per call"],
    )
    for path in (REST, REST_AFTER):
        history.rows.append([path, round(rows[path][1]), round(sent[path])])
        result.figures[f"{path} redis_bytes_per_call"] = sent[path]
    result.tables.append(history)
    result.goals += [
        Goal("gateway HTTP /v1/tools: calls/s share of the ceiling", f">= {GOAL_CEILING_SHARE:.0%}",
             f"{share:.0%}", share >= GOAL_CEILING_SHARE),
        Goal(f"gateway HTTP /v1/tools: calls/s after {HISTORY:,} calls vs fresh",
             f"<= {GOAL_HISTORY_DROP:.0%} lower", f"{drop:+.1%} lower ({after_rate:.0f} vs "
             f"{rest_rate:.0f}; {sent[REST_AFTER]:.0f} vs {sent[REST]:.0f} Redis bytes a call)",
             drop <= GOAL_HISTORY_DROP),
        Goal("official mcp client: calls/s share of raw /mcp", f">= {GOAL_CLIENT_SHARE:.0%}",
             f"{client_share:.0%}", client_share >= GOAL_CLIENT_SHARE),
    ]  # fmt: skip
    result.notes.append(
        "ceiling row: a bare FastAPI endpoint under uvicorn (bench/overhead/ceiling_app) that "
        "parses the JSON body and makes one Redis call, in its own process, driven by the same "
        "client; it bounds what a Python gateway can answer on this machine"
    )
    result.notes.append(
        "overhead rows: a gateway whose executor is in-process (settings sandbox_backend="
        "inprocess), so 'added' is HTTP + the six stages + Redis; the client (a minimal keep-alive "
        "HTTP/1.1 client, or the mcp SDK) runs in the bench process on the same 2 cores and is "
        "part of the figure"
    )
    result.notes.append(
        f"streamed row: `{STREAMED_TOOL}` (tools.harness.reporting), `echo` reporting one "
        "progress event (`echo` reports none, so it is answered plain JSON even with a "
        "progressToken), asked with a progressToken in _meta and Accept: application/json, "
        "text/event-stream, as the mcp client with a progress callback asks; answered as an SSE "
        "stream on the POST (the progress notification, then the JSON-RPC response), read to its "
        f"end. It and the plain /mcp row are measured in turns (sequential calls one of each, "
        f"calls/s in {ROUNDS} rounds of each); '{STREAMED_ADDED}' is their p50s' difference"
    )
    return result
