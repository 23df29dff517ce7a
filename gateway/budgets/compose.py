"""Builds the ATBA parts from settings: one latency window and breaker, shared by both seams."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from gateway.budgets.allocator import AtbaAllocator
from gateway.budgets.breaker import CircuitBreaker
from gateway.budgets.guard import GuardedExecutor
from gateway.budgets.latency import LatencyWindow
from gateway.settings import Settings
from sandbox.executor import ToolExecutor
from tools.registry import ToolRegistry


@dataclass(frozen=True)
class TimeBudgets:
    window: LatencyWindow
    breaker: CircuitBreaker
    allocator: AtbaAllocator  # the budget stage's TimeAllocator
    executor: GuardedExecutor  # the dispatch stage's executor, wrapped


def latency_window(settings: Settings, redis: Redis) -> LatencyWindow:
    return LatencyWindow(
        redis,
        window_s=settings.latency_window_s,
        max_samples=settings.latency_window_max,
        min_samples=settings.latency_min_samples,
    )


def circuit_breaker(settings: Settings, redis: Redis) -> CircuitBreaker:
    return CircuitBreaker(
        redis, failures=settings.breaker_failures, cooldown_ms=settings.breaker_cooldown_ms
    )


def build_time_budgets(
    settings: Settings, redis: Redis, registry: ToolRegistry, executor: ToolExecutor
) -> TimeBudgets:
    window = latency_window(settings, redis)
    breaker = circuit_breaker(settings, redis)
    allocator = AtbaAllocator(
        window,
        breaker,
        registry,
        margin_ms=settings.budget_margin_ms,
        min_grant_ms=settings.budget_min_grant_ms,
    )
    return TimeBudgets(
        window,
        breaker,
        allocator,
        GuardedExecutor(executor, window, breaker, registry, margin_ms=settings.budget_margin_ms),
    )
