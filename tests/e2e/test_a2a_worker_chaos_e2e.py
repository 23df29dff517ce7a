"""A hosted agent's worker killed mid-task (SIGKILL), five times: the bench's chaos row
(`conclave.bench.a2a.worker_chaos`) at CI's size. Every task ends once, COMPLETED, holding
each of its artifacts once; each task a killed worker left is resumed by the other worker
within the lease plus 1 s. And a worker killed as it sends its update leaves no traceback in
the gateway's log (the bench's 100 kills found one)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from conclave.bench.a2a.worker_chaos import RESUME_GOAL_S, chaos_config, chaos_samples
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.system


def test_a_worker_killed_mid_task_loses_and_doubles_nothing(redis_url: str, tmp_path: Path) -> None:
    config = tmp_path / "conclave.toml"
    config.write_text(chaos_config())
    with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as stack:
        samples = chaos_samples(stack, 5, tmp_path / "marks")
    assert samples.faults == []
    assert len(samples.resumed_s) + samples.ended_after_kill == 5
    assert samples.resumed_s, "no kill landed mid-task"
    assert max(samples.resumed_s) <= RESUME_GOAL_S, samples.resumed_s


def test_a_worker_gone_mid_update_is_a_cancelled_request_not_an_error(
    redis_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "conclave.toml"
    config.write_text(chaos_config())
    log = tmp_path / "gateway.log"
    settings = e2e_settings(redis_url, "process", config=config)
    with EmbeddedStack(settings, log_path=log) as stack:
        token = stack.token("bench-chaos", "chaos", [])
        url = urlsplit(stack.url)
        began_ms = int(time.time() * 1000)
        with socket.create_connection((url.hostname, url.port)) as gone:
            gone.sendall(
                b"POST /v1/a2a/chaos/work/some-task HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + f"Authorization: Bearer {token}\r\n".encode()
                + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                + b'{"token": 1, "state": "TASK_STATE_WOR'
            )
            time.sleep(0.2)  # the gateway is reading the body
        # This test's records only: the chaos test before it wrote the same tenant's and
        # agent's into the worker's Redis.
        audit: dict[str, str | int] = {
            "tenant": "bench-chaos",
            "agent": "chaos",
            "since_ms": began_ms,
        }
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            records = httpx.get(
                f"{stack.url}/v1/audit", params=audit, headers=stack.admin_headers
            ).json()
            if records:
                break
            time.sleep(0.05)
    assert [(r["operation"], r["code"]) for r in records] == [("a2a-work:update", "CANCELLED")]
    assert "Exception in ASGI application" not in log.read_text()
