"""A multi-agent task on shared state: agents jointly fill one ledger under contention.

Every agent posts its entries concurrently; each posting is one transaction through the
gateway that reads `total` and `count` and writes them back with the new entry. All agents
hit the same two keys, so most postings conflict at first and are reread and retried
(`SharedState.transact`). The run is correct when the final total is the sum of every
amount posted, the count is the number of postings, and the history checker proves the
namespace's commit stream serializable.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio

from agents import GatewayClient, SharedState
from gateway.state import check_history
from protocol import AgentRegistration, NamespaceConfig


@dataclass
class LedgerScore:
    agents: int
    postings: int = 0
    expected_total: int = 0
    final_total: int | None = None
    final_count: int | None = None
    conflicts: int = 0
    seconds: float = 0.0
    posting_ms: list[float] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    commits_checked: int = 0

    @property
    def correct(self) -> bool:
        totals = (self.final_total, self.final_count) == (self.expected_total, self.postings)
        return totals and not self.anomalies

    @property
    def per_second(self) -> float:
        return self.postings / self.seconds if self.seconds else 0.0


async def run_ledger(
    admin: GatewayClient, *, agents: int, postings_per_agent: int, seed: int
) -> LedgerScore:
    namespace = f"ledger-{uuid.uuid4().hex[:8]}"
    rng = random.Random(seed)
    amounts = [[rng.randint(1, 100) for _ in range(postings_per_agent)] for _ in range(agents)]
    score = LedgerScore(agents=agents, expected_total=sum(map(sum, amounts)))
    clients: list[GatewayClient] = []
    for index in range(agents):
        registration = AgentRegistration(
            tenant="bench", agent=f"clerk-{index}", namespaces={namespace: "write"}
        )
        clients.append(admin.for_token((await admin.register_agent(registration)).token))
    await clients[0].create_namespace(namespace, NamespaceConfig())

    async def clerk(index: int) -> None:
        ledger = SharedState(clients[index], namespace, max_attempts=200, seed=seed + index)
        for number, amount in enumerate(amounts[index]):
            entry = f"entry/{index}/{number}"

            def post(current: dict[str, Any], amount: int = amount, entry: str = entry) -> Any:
                return {
                    "total": current.get("total", 0) + amount,
                    "count": current.get("count", 0) + 1,
                    entry: amount,
                }

            started = time.perf_counter()
            done = await ledger.transact(["total", "count"], post)
            score.posting_ms.append((time.perf_counter() - started) * 1000)
            score.conflicts += done.conflicts
            score.postings += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(agents):
            group.start_soon(clerk, index)
    score.seconds = time.perf_counter() - started

    reader = clients[0]
    history = await reader.history(namespace)
    written = {key for entry in history for key in entry.keys}
    final: dict[str, tuple[int, Any]] = {}
    for key in sorted(written):
        read = await reader.read(namespace, key)
        final[key] = (read.version, read.value)
    report = check_history(history, final)
    score.final_total, score.final_count = final["total"][1], final["count"][1]
    score.anomalies = [str(a) for a in report.anomalies]
    score.commits_checked = report.commits
    for client in clients:
        await client.aclose()
    return score
