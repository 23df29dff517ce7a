"""/metrics names every tool a tenant called (issue 26): a stranger is refused ADMIN_REQUIRED
and learns nothing; the metrics key (a scraper's bearer) and the admin key read it; an
operator who sets `metrics_public` opens it on purpose."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.config import Settings

METRICS_KEY = "scraper-" + "k" * 32


def _stack(redis_url: str, **overrides: object) -> EmbeddedStack:
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="inprocess", **overrides)
    return EmbeddedStack(settings)


@pytest.fixture(scope="module")
def closed(redis_url: str) -> Iterator[EmbeddedStack]:
    with _stack(redis_url, metrics_key=METRICS_KEY) as running:
        yield running


def _victim_calls_echo(http: httpx.Client, stack: EmbeddedStack) -> None:
    token = stack.token("victim", f"a{uuid.uuid4().hex[:10]}", ["tool:echo"])
    ok = http.post(
        "/v1/tools/echo/call",
        json={"arguments": {"message": "secret plans"}},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert ok.status_code == 200, ok.text


def test_a_stranger_cannot_read_which_tools_are_called(closed: EmbeddedStack) -> None:
    with httpx.Client(base_url=closed.url, timeout=10) as http:
        _victim_calls_echo(http, closed)
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
            refused = http.get("/metrics", headers=headers)
            assert refused.status_code == 403, refused.text
            assert refused.json()["code"] == "ADMIN_REQUIRED"
            assert "echo" not in refused.text
        # A tenant's own token is not a metrics key either.
        token = closed.token("victim", "reader", ["tool:*"])
        as_tenant = http.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert as_tenant.status_code == 403


def test_the_metrics_key_and_the_admin_key_read_metrics(closed: EmbeddedStack) -> None:
    admin_key = closed.settings.admin_key.get_secret_value()
    with httpx.Client(base_url=closed.url, timeout=10) as http:
        _victim_calls_echo(http, closed)
        for headers in (
            {"Authorization": f"Bearer {METRICS_KEY}"},
            {"Authorization": f"Bearer {admin_key}"},
            closed.admin_headers,
        ):
            scraped = http.get("/metrics", headers=headers)
            assert scraped.status_code == 200, scraped.text
            assert 'operation="echo"' in scraped.text


def test_metrics_public_opens_them_on_purpose(redis_url: str) -> None:
    stack = _stack(redis_url, metrics_public=True)
    with stack, httpx.Client(base_url=stack.url, timeout=10) as http:
        _victim_calls_echo(http, stack)
        scraped = http.get("/metrics")
        assert scraped.status_code == 200 and 'operation="echo"' in scraped.text
