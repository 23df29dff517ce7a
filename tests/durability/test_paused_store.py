"""A state store that stops answering (its Redis master paused with SIGSTOP, as a stalled
or failing-over master does): the gateway answers each request at the caller's deadline with
504 DEADLINE_EXCEEDED instead of holding it until the store answers, and a commit cut off
there is settled by its retry with the same idempotency key once the store is back.
"""

from __future__ import annotations

import signal
import time

import pytest

from protocol import DEADLINE_HEADER
from tests.durability.conftest import durable_settings, gateway
from tests.redis_replication import RedisReplicaPair

pytestmark = pytest.mark.anyio

WAIT_MS = 400


def _deadline_in(ms: int) -> dict[str, str]:
    return {DEADLINE_HEADER: str(int(time.time() * 1000) + ms)}


async def test_a_paused_store_is_answered_at_the_deadline_and_the_retry_settles_the_commit(
    pair: RedisReplicaPair,
) -> None:
    master = pair.processes[pair.master_port]
    async with gateway(durable_settings(pair.master_url, "async")) as gw:
        alice = gw.as_agent()
        assert (await gw.client.put("/v1/state/ledger", json={}, headers=alice)).is_success
        body = {"writes": [{"key": "paid", "value": 1}], "idempotency_key": "pay-1"}
        master.send_signal(signal.SIGSTOP)
        try:
            began = time.monotonic()
            cut = await gw.client.post(
                "/v1/state/ledger/commit", json=body, headers={**alice, **_deadline_in(WAIT_MS)}
            )
            waited = time.monotonic() - began
            read = await gw.client.get(
                "/v1/state/ledger/paid", headers={**alice, **_deadline_in(WAIT_MS)}
            )
        finally:
            master.send_signal(signal.SIGCONT)

        assert cut.status_code == 504, cut.text
        assert cut.json()["code"] == "DEADLINE_EXCEEDED"
        assert "same idempotency key" in cut.json()["message"]
        assert waited < WAIT_MS / 1000 + 0.5  # answered at the deadline, not when Redis woke
        assert read.json()["code"] == "DEADLINE_EXCEEDED", read.text

        retried = await gw.client.post("/v1/state/ledger/commit", json=body, headers=alice)
        assert retried.status_code == 200, retried.text
        again = await gw.client.post("/v1/state/ledger/commit", json=body, headers=alice)
        assert again.json()["versions"] == retried.json()["versions"]
        value = await gw.client.get("/v1/state/ledger/paid", headers=alice)
        assert value.json()["value"] == 1
        assert value.json()["version"] == retried.json()["versions"]["paid"] == 1
