"""`conclave bench console`: what the live console costs and how live it is (issue 17).

On a gateway of its own (tools in-process, rate limits out of the way, the bench stack's
Redis), with 10,000 audit records written by real tool calls first:
- each console page's render time (GET with the admin key, median of sequential loads);
- how soon a tool call appears in the live feed: a server-sent-events client reads
  `/console/feed/events` while calls are made one at a time (median from sending the call to
  its event);
- gateway calls/s with and without a console feed client open, alternated in the same run.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx
from anyio.abc import ObjectReceiveStream

from conclave.bench.core import (
    BenchContext,
    Call,
    Goal,
    Http1Connection,
    SuiteResult,
    Table,
    encode_request,
    measuring_settings,
    throughput,
)
from conclave.stack import EmbeddedStack
from protocol import ADMIN_KEY_HEADER

AUDIT_RECORDS = 10_000
PAGES = ("agents", "tools", "feed", "namespaces", "chains", "sandboxes", "charts", "try")
GOAL_PAGE_MS, GOAL_FEED_MS, GOAL_DROP = 300.0, 1000.0, 0.05
WORKERS = 8


class _Caller:
    """Echo calls over keep-alive connections, one agent's token each."""

    def __init__(self, stack: EmbeddedStack, workers: int) -> None:
        self.stack = stack
        self.connections = [Http1Connection(stack.url) for _ in range(workers)]
        self.agents = [f"console-{i}-{uuid.uuid4().hex[:6]}" for i in range(workers)]
        body = json.dumps({"arguments": {"message": "ping"}}).encode()
        self.requests = [
            encode_request(
                "POST",
                stack.url,
                "/v1/tools/echo/call",
                {"Authorization": f"Bearer {stack.token('bench', agent, ['tool:echo'])}"},
                body,
            )
            for agent in self.agents
        ]

    def call(self, index: int) -> Call:
        connection, raw = self.connections[index], self.requests[index]

        async def call() -> None:
            status, answer = await connection.request(raw)
            if status != 200:
                raise RuntimeError(f"the gateway refused a bench call: {answer!r}")

        return call

    async def aclose(self) -> None:
        for connection in self.connections:
            await connection.aclose()


async def _seed(caller: _Caller, records: int) -> None:
    """`records` tool calls (so as many audit records), from every worker at once."""
    left = records

    async def worker(index: int) -> None:
        nonlocal left
        call = caller.call(index)
        while left > 0:
            left -= 1
            await call()

    async with anyio.create_task_group() as group:
        for index in range(len(caller.connections)):
            group.start_soon(worker, index)


async def _page_medians(http: httpx.AsyncClient, loads: int) -> dict[str, float]:
    medians = {}
    for name in PAGES:
        samples = []
        for _ in range(loads + 2):  # the first two warm connections and caches
            began = time.perf_counter()
            answer = await http.get(f"/console/{name}")
            samples.append((time.perf_counter() - began) * 1000)
            if answer.status_code != 200:
                raise RuntimeError(f"/console/{name} answered {answer.status_code}")
        medians[name] = statistics.median(samples[2:])
    return medians


@asynccontextmanager
async def _feed_client(
    http: httpx.AsyncClient,
) -> AsyncIterator[ObjectReceiveStream[str]]:
    """An open `/console/feed/events` stream; yields a channel of each record's agent."""
    send, receive = anyio.create_memory_object_stream[str](1000)
    opened = anyio.Event()

    async def read() -> None:
        async with http.stream("GET", "/console/feed/events") as answer:
            opened.set()
            async for line in answer.aiter_lines():
                if line.startswith("data: "):  # one event: the rows of one read
                    for row in json.loads(line[6:]):
                        send.send_nowait(row[2])  # the agent column

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        await opened.wait()
        yield receive
        group.cancel_scope.cancel()


async def _feed_latencies(http: httpx.AsyncClient, caller: _Caller, count: int) -> list[float]:
    samples = []
    call, agent = caller.call(0), caller.agents[0]
    async with _feed_client(http) as events:
        for _ in range(count):
            began = time.perf_counter()
            await call()
            with anyio.fail_after(10):
                while await events.receive() != agent:
                    pass
            samples.append((time.perf_counter() - began) * 1000)
    return samples


@contextmanager
def _external_feed(stack: EmbeddedStack, out: Path) -> Iterator[None]:
    """A feed client in a process of its own (curl, as a browser would be): it costs the
    gateway what a console costs, and the bench process nothing."""
    key = stack.settings.admin_key.get_secret_value()
    with out.open("wb") as sink:
        curl = subprocess.Popen(
            ["curl", "-sN", "-H", "@-", f"{stack.url}/console/feed/events"],
            stdin=subprocess.PIPE,
            stdout=sink,
        )
    assert curl.stdin is not None
    curl.stdin.write(f"{ADMIN_KEY_HEADER}: {key}\n".encode())  # never on its command line
    curl.stdin.close()
    try:
        deadline = time.monotonic() + 10
        while out.stat().st_size == 0:  # the stream's first line: it is open
            if time.monotonic() > deadline or curl.poll() is not None:
                raise RuntimeError("curl could not open the console's feed")
            time.sleep(0.01)
        yield
    finally:
        curl.terminate()
        curl.wait()


async def _rates(
    stack: EmbeddedStack, caller: _Caller, rounds: int, seconds: float, out: Path
) -> tuple[list[float], list[float]]:
    """Calls/s without and with a feed client open, alternated `rounds` times."""
    calls = [caller.call(i) for i in range(len(caller.connections))]
    without, with_feed = [], []
    for _ in range(rounds):
        without.append(await throughput(calls, seconds))
        with _external_feed(stack, out):
            with_feed.append(await throughput(calls, seconds))
    return without, with_feed


async def _measure(
    stack: EmbeddedStack, quick: bool, out: Path
) -> tuple[dict[str, float], list[float], list[float], list[float]]:
    caller = _Caller(stack, WORKERS)
    headers = stack.admin_headers
    try:
        async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30) as http:
            await _seed(caller, AUDIT_RECORDS)
            pages = await _page_medians(http, 10 if quick else 30)
            feed = await _feed_latencies(http, caller, 20 if quick else 100)
            rounds = 2 if quick else 5
            without, with_feed = await _rates(stack, caller, rounds, 2.0, out)
    finally:
        await caller.aclose()
    return pages, feed, without, with_feed


def run(ctx: BenchContext) -> SuiteResult:
    base = ctx.stack.settings
    settings = measuring_settings(base)
    task = ctx.progress.add_task("console: pages, live feed, calls/s with a feed open", total=1)
    with EmbeddedStack(settings, log_path=ctx.gateway_log("console")) as stack:
        pages, feed, without, with_feed = anyio.run(
            _measure, stack, ctx.quick, ctx.out_dir / "console-feed.txt"
        )
    ctx.progress.advance(task)

    result = SuiteResult("console")
    page_table = Table(
        f"console: page render with >= {AUDIT_RECORDS:,} audit records (ms, median)",
        ["page", "median ms"],
        [[f"/console/{name}", ms] for name, ms in pages.items()],
    )
    feed_ms = statistics.median(feed)
    rate_without, rate_with = statistics.mean(without), statistics.mean(with_feed)
    # Paired rounds, their median: one round a neighbour's load slowed does not decide it.
    drop = max(0.0, statistics.median(1 - b / a for a, b in zip(without, with_feed, strict=True)))
    rounds = [
        [i + 1, round(a), round(b)] for i, (a, b) in enumerate(zip(without, with_feed, strict=True))
    ]
    rate_table = Table(
        f"console: echo calls/s at concurrency {WORKERS}, alternated rounds",
        ["round", "without a feed client", "with a feed client open"],
        rounds,
    )
    rate_table.rows.append(["mean", round(rate_without), round(rate_with)])
    result.tables += [
        page_table,
        Table("console: live feed", ["measure", "ms"], [["call to its feed event, median",
              feed_ms], ["p95", sorted(feed)[int(0.95 * (len(feed) - 1))]]]),
        rate_table,
    ]  # fmt: skip
    slowest = max(pages, key=lambda name: pages[name])
    result.goals += [
        Goal("console page render, 10,000 audit records (slowest page's median)",
             f"<= {GOAL_PAGE_MS:.0f} ms", f"{pages[slowest]:.1f} ms ({slowest})",
             pages[slowest] <= GOAL_PAGE_MS),
        Goal("tool call to the live feed (median)", f"<= {GOAL_FEED_MS:.0f} ms",
             f"{feed_ms:.1f} ms", feed_ms <= GOAL_FEED_MS),
        Goal("calls/s drop with a console feed open (median of paired rounds)",
             f"<= {GOAL_DROP:.0%}", f"{drop:.1%}", drop <= GOAL_DROP),
    ]  # fmt: skip
    result.figures.update(
        {
            "slowest_page_median_ms": pages[slowest],
            "feed_median_ms": feed_ms,
            "calls_per_s_without_feed": rate_without,
            "calls_per_s_with_feed": rate_with,
            "calls_per_s_drop": drop,
        }
    )
    result.notes.append(
        "page times are measured by an httpx client in the bench process (HTTP included), with "
        "the admin key in its header; the gateway runs tools in-process so the console's cost "
        "is not hidden in sandbox time; both clients share the machine's cores with the gateway"
    )
    return result
