"""Schemathesis over the gateway's own OpenAPI document, against a real stack.

Every operation the document declares is called with generated input (valid and invalid),
three ways: with no credentials, with an agent's token, and with the admin key. Whatever it
sends, the gateway never answers 5xx, and every refusal is a SERF body an agent can act on
(on /mcp and /a2a, a JSON-RPC error carrying it in `data`; on /a2a's HTTP+JSON, in the error's
`details`). The policy rules it sets (admin) are cleared after each: they would refuse other
tests' calls on the same Redis. The hot routes (tool calls, state reads,
leases and commits, /mcp) are in the document too (`gateway.http.hot_routes`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from conclave.stack import EmbeddedStack
from gateway import create_app
from gateway.config import Settings
from protocol import SerfError
from tests.helpers import serf_in


@pytest.fixture(scope="module")
def fuzz_stack(redis_url: str) -> Iterator[EmbeddedStack]:
    # Rate limits (and the pace of 401s) high enough that the fuzzer meets the routes, not
    # the limiter.
    settings = Settings(
        redis_url=redis_url,
        port=0,
        rate_limit_per_s=10_000,
        rate_limit_burst=10_000,
        http_unauthenticated_per_s=10_000,
    )
    with EmbeddedStack(settings) as stack:
        yield stack
        _no_policies(stack)


@pytest.fixture(scope="module")
def credentials(fuzz_stack: EmbeddedStack) -> dict[str, dict[str, str]]:
    """Headers per kind of caller: nobody, an agent, the admin."""
    token = fuzz_stack.token("fuzz", "fuzzer", ["tool:echo", "state:fuzz*:write"])
    return {
        "none": {},
        "agent": {"Authorization": f"Bearer {token}"},
        "admin": dict(fuzz_stack.admin_headers),
    }


# The document the gateway serves at /openapi.json, built by the same code (Redis is only
# reached when the app starts, so any URL will do).
schema = schemathesis.openapi.from_dict(create_app(Settings(redis_url="redis://unused")).openapi())


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_error_and_every_refusal_is_serf(
    case: Any, fuzz_stack: EmbeddedStack, credentials: dict[str, dict[str, str]]
) -> None:
    for caller, headers in credentials.items():
        response = case.call(base_url=fuzz_stack.url, headers=headers, timeout=30)
        # A 5xx only where the caller's own run is out of time: DEADLINE_EXCEEDED is 504 in
        # the code table, the caller's deadline, not a failure of the gateway.
        out_of_time = response.status_code == 504 and _deadline_passed(case)
        if out_of_time:
            assert response.json()["code"] == "DEADLINE_EXCEEDED", (caller, response.text)
        assert response.status_code < 500 or out_of_time, (caller, response.text)
        if response.status_code >= 400:
            envelope, a2a_reason = serf_in(response.json())
            error = SerfError.model_validate(envelope)  # raises on anything but SERF
            # /mcp's 405 is the MCP transport's answer to a stream it does not offer; an A2A
            # error's status is the one A2A names for it.
            if (case.path, response.status_code) != ("/mcp", 405) and a2a_reason is None:
                assert error.http_status == response.status_code, (caller, response.text)
            assert error.message, (caller, response.text)
        if (case.method, case.path) == ("PUT", "/v1/policies") and caller == "admin":
            _no_policies(fuzz_stack)  # a random rule must not refuse the next cases' calls


def _no_policies(stack: EmbeddedStack) -> None:
    """Back to no policy rule (they live in the worker's Redis, which other tests share)."""
    answer = httpx.put(
        f"{stack.url}/v1/policies", json={"rules": []}, headers=stack.admin_headers, timeout=30
    )
    assert answer.status_code == 200, answer.text


def _deadline_passed(case: Any) -> bool:
    """Whether the case's body carries a run deadline (unix ms) that has already passed."""
    body = case.body if isinstance(case.body, dict) else {}
    budget = body.get("budget")
    deadline = budget.get("deadline_ms") if isinstance(budget, dict) else None
    is_number = isinstance(deadline, int | float) and not isinstance(deadline, bool)
    return is_number and deadline <= time.time() * 1000
