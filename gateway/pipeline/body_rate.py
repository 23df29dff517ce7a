"""Each tenant's share of this process's JSON parsing: a byte rate for large request bodies.

A request's cost is about its count until its body is large: then parsing it is what costs,
in proportion to its bytes, and the request rate does not bound that. Four clients of one
tenant committing 869 KB read sets (under `max_body_bytes`, refused by the read-set cap only
once parsed, ~17 ms of this process's CPU each) kept the gateway at a core and another
tenant's p99 at 20x (issue 26). `BodyRate` holds a token bucket of bytes per tenant: a body
that may be large (`HeaderCheck.wanted`: declared over 64 KiB, or not declared) takes its
declared length, or `max_body_bytes` when it declares none, before it is read; a tenant
whose bucket is short is refused RATE_LIMITED (`details.limited_by: tenant_body_bytes`) and
its body is never read. Small bodies cost what a request costs: the rate buckets count them.

The buckets are per process, as the CPU they share out is (`local_buckets`). A body larger
than the burst takes the whole burst, so `max_body_bytes` above the burst still gets through.
"""

from __future__ import annotations

import math

from gateway.gateway_error import GatewayError
from gateway.pipeline.local_buckets import LocalBuckets
from protocol import ErrorCode


class BodyRate:
    def __init__(self, per_s: float, burst: int) -> None:
        self.per_s = per_s
        self.burst = burst
        self._buckets = LocalBuckets(per_s, burst)

    def take(self, tenant: str, size: int) -> GatewayError | None:
        """Take `size` bytes from `tenant`'s bucket, or say why not (taking nothing)."""
        wait_s = self._buckets.take(tenant, min(size, self.burst))
        if wait_s == 0:
            return None
        wait_ms = math.ceil(wait_s * 1000)
        return GatewayError.of(
            ErrorCode.RATE_LIMITED,
            f"tenant {tenant} is over its rate of large request bodies ({self.per_s:g} bytes/s,"
            f" burst {self.burst}, every body over 64 KiB counted, over all its agents): retry"
            " after the wait, or put large inputs in a file in the workspace",
            retry_after_ms=wait_ms,
            details={
                "limited_by": "tenant_body_bytes",
                "body_bytes_per_s": self.per_s,
                "body_bytes_burst": self.burst,
                "body_bytes": size,
            },
        )
