"""`conclave state check` on real Redis: a clean history passes, a naive one is refused."""

from __future__ import annotations

import re
import uuid

import anyio
import pytest
from typer.testing import CliRunner

from conclave.bench.contention.baselines import NaiveStore
from conclave.cli import app
from gateway.config import Settings
from gateway.redis_io import connect_redis
from gateway.state import Actor, NamespaceKeys, StateStore
from protocol.state import CommitRequest, NamespaceConfig, Write


async def _write_histories(redis_url: str, good: str, bad: str) -> None:
    redis = connect_redis(redis_url)
    store = StateStore.from_settings(redis, Settings(max_value_bytes=1024))
    await store.create_namespace("acme", good, NamespaceConfig())
    actor = Actor("acme", "a", "s")
    for value in range(3):
        await store.read(actor, good, "k")
        await store.commit(actor, good, CommitRequest(writes=[Write(key="k", value=value)]))
    naive = NaiveStore(redis, NamespaceKeys("acme", bad))
    for agent in ("a", "b"):  # both read version 0, both write: a lost update
        await naive.commit(agent, agent, {"k": agent}, {"k": 0})
    await redis.aclose()


def test_state_check_tells_serializable_from_lost_updates(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, bad = f"good-{uuid.uuid4().hex[:8]}", f"bad-{uuid.uuid4().hex[:8]}"
    anyio.run(_write_histories, redis_url, good, bad)
    monkeypatch.setenv("CONCLAVE_REDIS_URL", redis_url)
    runner = CliRunner()
    clean = runner.invoke(app, ["state", "check", good, "--tenant", "acme"])
    caught = runner.invoke(app, ["state", "check", bad, "--tenant", "acme"])
    assert clean.exit_code == 0, clean.output
    assert "3 commits" in clean.output and "serializable" in clean.output
    assert caught.exit_code == 1 and "NOT serializable" in caught.output
    assert "stale_read" in caught.output and len(re.findall(r"\d{10,}-\d+", caught.output)) >= 3


def test_state_check_refuses_a_namespace_that_does_not_exist(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONCLAVE_REDIS_URL", redis_url)
    missing = f"nope-{uuid.uuid4().hex[:8]}"
    done = CliRunner().invoke(app, ["state", "check", missing, "--tenant", "acme"])
    assert done.exit_code == 1
    assert f"acme/{missing} does not exist in this Redis" in done.output
    assert "serializable" not in done.output
