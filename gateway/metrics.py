"""Prometheus metrics, in a registry of the app's own (so two apps in one process never
collide): requests, latency per tool and per stage, errors by SERF code, rate-limit hits."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# Sub-millisecond buckets first: the gateway's own stages live there.
_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "conclave_requests",
            "Requests through the pipeline",
            ["transport", "operation", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "conclave_request_seconds",
            "Request latency through the whole pipeline, per tool or operation",
            ["operation"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.stage_latency = Histogram(
            "conclave_stage_seconds",
            "Time spent in each pipeline stage",
            ["stage"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "conclave_errors",
            "Refusals and failures by SERF code",
            ["code"],
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "conclave_rate_limited",
            "Requests refused by the rate limit",
            ["operation"],
            registry=self.registry,
        )
