"""A SIMULATION of the budgets suite, offline: its chains and seeded draws replayed against the
policies' decision rules in pure Python, no gateway, no sandboxes, no clock.

For tuning ATBA's rules quickly, never for the suite's figures: what it prints is labelled a
simulation. It takes the suite's chains (`make_chains`, `on_workload`), the tools' seeded
latencies (`chain_latency_ms`, and `hedge_seed` for a hedge's draw), and runs each policy as
the suite's client does (retry a killed call while the deadline has not passed), with the
gateway's pure rules deciding ATBA's grant and hedge (`gateway.budgets.plan_call`, the
function the allocator itself calls) and the fixed policies' p95 hedge (`plan_fixed_hedge`).
What the platform costs is the `Host`'s assumption: a per-call overhead (request and reply),
how late a kill answers past its grant, how soon a hedge starts. The latency windows are
what the gateway would learn from the warm-up: each tool's Kaplan-Meier curve from
`WINDOW_SAMPLES` draws, a hung draw censored where a grant would kill it.

`python -m conclave.bench.recovery.budgets_sim --chains 100 --call-ms 40` prints completion per
deadline and policy, like the suite's table, headed SIMULATION.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from conclave.bench.recovery import (
    DEADLINES_MS,
    DEFAULT_TIMEOUT_MS,
    HEDGE_SHARE,
    HEDGED,
    POLICIES,
    WORKERS,
    WORKLOADS,
    Chain,
    make_chains,
    on_workload,
)
from gateway import GatewayError
from gateway.budgets import (
    DEFAULT_HEDGE_CAP,
    HEDGE_WORTH,
    HOPELESS,
    HedgePlan,
    LatencyEstimate,
    LatencySample,
    finish_curve,
    plan_call,
    plan_fixed_hedge,
)
from tools.harness.faults import MAX_SLEEP_MS, chain_latency_ms, hedge_seed

WINDOW_SAMPLES = 200
HUNG_CENSORED_MS = 400.0  # where a hung draw in the window counts as killed
HEDGE_QUANTILE = 0.95


@dataclass(frozen=True)
class Host:
    """What the simulation assumes the platform costs, per call (ms)."""

    call_ms: float = 40.0  # request and reply, the least
    jitter_ms: float = 15.0  # mean of an exponential extra on each call
    kill_late_ms: float = 25.0  # how late a killed attempt answers past its grant
    hedge_start_ms: float = 5.0  # from the hedge point to the second attempt running
    reply_margin_ms: int = 30  # the gateway's `budget_margin_ms`


@dataclass
class Bucket:
    """An identity's hedge budget, as `lua/hedge_*.lua` keep it."""

    share: float
    cap: float
    tokens: float = 0.0
    taken: int = 0

    def deposit(self) -> None:
        self.tokens = min(self.cap, self.tokens + self.share)

    def holds(self) -> bool:
        return self.tokens >= 1.0

    def take(self) -> bool:
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        self.taken += 1
        return True


@dataclass
class SimOutcome:
    completed: bool = False
    violated: bool = False
    calls: int = 0
    hedges: int = 0


SimResults = dict[tuple[int, str], list[SimOutcome]]  # per (deadline, policy): each chain's


@dataclass
class Simulation:
    host: Host
    rng: random.Random
    windows: dict[str, LatencyEstimate]
    lateness: LatencyEstimate
    share: float = HEDGE_SHARE
    cap: float = DEFAULT_HEDGE_CAP
    worth: float = HEDGE_WORTH
    hopeless: float = HOPELESS
    buckets: dict[str, Bucket] = field(default_factory=dict)

    def bucket(self, name: str) -> Bucket:
        return self.buckets.setdefault(name, Bucket(self.share, self.cap))

    def overhead(self) -> float:
        return self.host.call_ms + self.rng.expovariate(1 / self.host.jitter_ms)

    def attempt(
        self, tool: str, seed: int, grant_ms: float, hedge: HedgePlan | None, bucket: Bucket
    ) -> tuple[float, bool, bool]:
        """(wall ms the client waited, finished, hedged) for one call."""
        first = chain_latency_ms(tool, seed)
        took, hedged = first, False
        after = None if hedge is None else hedge.after_ms
        if after is not None and first > after and bucket.take():
            hedged = True
            second = after + self.host.hedge_start_ms
            took = min(first, second + chain_latency_ms(tool, hedge_seed(seed)))
        bucket.deposit()
        wall = self.overhead()
        if took <= grant_ms:
            return wall + took, True, hedged
        return wall + grant_ms + self.host.kill_late_ms, False, hedged

    def chain(self, policy: str, chain: Chain, deadline: float, bucket: Bucket) -> SimOutcome:
        base, hedging = policy.removesuffix(HEDGED), policy.endswith(HEDGED)
        out = SimOutcome()
        now, worked_until, done = 0.0, 0.0, 0
        split = max(1, int(deadline) // len(chain.tools))
        for step, tool in enumerate(chain.tools):
            attempt = 0
            while now < deadline:
                hedge: HedgePlan | None = None
                if base == "atba":
                    remaining = deadline - now - self.host.call_ms / 2  # the request's way in
                    try:
                        grant, hedge = self.atba(
                            tool, chain.tools[step:], remaining, hedging and bucket.holds()
                        )
                    except GatewayError:
                        now += self.host.call_ms
                        break
                else:
                    grant = {"fixed-60s": DEFAULT_TIMEOUT_MS, "fixed-split": split}.get(
                        base, max(1, int(deadline - now))
                    )
                    if hedging and bucket.holds():
                        hedge = plan_fixed_hedge(
                            self.windows[tool],
                            grant,
                            overhead_ms=self.host.reply_margin_ms,
                            quantile=HEDGE_QUANTILE,
                        )
                wall, finished, hedged = self.attempt(
                    tool, chain.seed(step, attempt), grant, hedge, bucket
                )
                now += wall
                worked_until = now
                out.calls += 1
                out.hedges += hedged
                if finished:
                    done += 1
                    break
                attempt += 1
            if done <= step:
                break
        out.violated = worked_until > deadline
        out.completed = done == len(chain.tools) and not out.violated
        return out

    def atba(
        self, tool: str, plan: tuple[str, ...], remaining: float, hedging: bool
    ) -> tuple[int, HedgePlan | None]:
        decision = plan_call(
            tool,
            list(plan),
            self.windows,
            lateness=self.lateness,
            remaining_ms=remaining,
            reserve_ms=0,
            max_ms=DEFAULT_TIMEOUT_MS,
            reply_margin_ms=self.host.reply_margin_ms,
            min_ms=10,
            hedging=hedging,
            hedge_quantile=HEDGE_QUANTILE,
            hedge_worth=self.worth,
            hopeless=self.hopeless,
        )
        if decision.hedge is not None and decision.hedge.hedges:
            return decision.granted_ms, decision.hedge
        return decision.unhedged_ms, None


def learned_windows(tools: tuple[str, ...], seed: int) -> dict[str, LatencyEstimate]:
    """Each tool's estimate as the warm-up and the run would teach the gateway."""
    found = {}
    for tool in tools:
        samples = []
        for index in range(WINDOW_SAMPLES):
            drawn = chain_latency_ms(tool, seed * 1_000_003 + index)
            hung = drawn >= MAX_SLEEP_MS
            samples.append(LatencySample(HUNG_CENSORED_MS if hung else drawn, hung))
        found[tool] = estimate_of(tool, samples)
    return found


def estimate_of(tool: str, samples: list[LatencySample]) -> LatencyEstimate:
    curve = finish_curve(samples)
    longest = max(s.duration_ms for s in samples)

    def q(p: float) -> float:
        return next((d for d, f in curve if f >= p - 1e-12), longest)

    return LatencyEstimate(
        tool, q(0.5), q(0.95), len(samples), sum(s.censored for s in samples), "observed", curve
    )


def simulate(
    chains: int,
    seed: int,
    host: Host,
    share: float,
    policies: tuple[str, ...] = POLICIES,
    worth: float = HEDGE_WORTH,
    hopeless: float = HOPELESS,
) -> dict[str, SimResults]:
    base = make_chains(seed, chains)
    results: dict[str, SimResults] = {}
    rng = random.Random(seed)
    late = estimate_of(
        "_kill", [LatencySample(host.kill_late_ms * (0.5 + rng.random()), False) for _ in range(50)]
    )
    sim = Simulation(host, rng, {}, late, share=share, worth=worth, hopeless=hopeless)
    for workload, tools in WORKLOADS.items():
        sim.windows = learned_windows(tools, seed)
        found: SimResults = {}
        for deadline in DEADLINES_MS:
            for policy in policies:
                found[(deadline, policy)] = [
                    sim.chain(
                        policy,
                        on_workload(chain, workload),
                        deadline,
                        sim.bucket(f"{policy}-w{index % WORKERS}"),
                    )
                    for index, chain in enumerate(base)
                ]
        results[workload] = found
    return results


def main(argv: list[str] | None = None, echo: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--call-ms", type=float, default=Host.call_ms)
    parser.add_argument("--jitter-ms", type=float, default=Host.jitter_ms)
    parser.add_argument("--kill-late-ms", type=float, default=Host.kill_late_ms)
    parser.add_argument("--share", type=float, default=HEDGE_SHARE)
    parser.add_argument("--worth", type=float, default=HEDGE_WORTH)
    parser.add_argument("--hopeless", type=float, default=HOPELESS)
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args(argv)
    host = Host(call_ms=args.call_ms, jitter_ms=args.jitter_ms, kill_late_ms=args.kill_late_ms)
    policies = tuple(args.policies.split(","))
    results = simulate(
        args.chains, args.seed, host, args.share, policies, args.worth, args.hopeless
    )
    echo(
        f"SIMULATION (offline, not a measurement): {args.chains} chains per deadline, seed "
        f"{args.seed}, assumed per-call overhead {host.call_ms:.0f} ms + exp({host.jitter_ms:.0f}),"
        f" kills {host.kill_late_ms:.0f} ms late, hedge share {args.share}, worth {args.worth}"
    )
    for workload, found in results.items():
        echo(f"SIMULATION {workload}: completion % per deadline (violations)")
        echo("policy".ljust(24) + "".join(f"{d:>10}" for d in DEADLINES_MS))
        calls = dict.fromkeys(policies, 0)
        hedges = dict.fromkeys(policies, 0)
        for policy in policies:
            cells = []
            for deadline in DEADLINES_MS:
                runs = found[(deadline, policy)]
                done = 100 * sum(r.completed for r in runs) / len(runs)
                late = sum(r.violated for r in runs)
                cells.append(f"{done:>6.0f}({late:>2})")
                calls[policy] += sum(r.calls for r in runs)
                hedges[policy] += sum(r.hedges for r in runs)
            extra = 100 * hedges[policy] / max(1, calls[policy])
            echo(policy.ljust(24) + "".join(f"{c:>10}" for c in cells) + f"  hedges {extra:.1f}%")


if __name__ == "__main__":
    main()
