"""Commutative state ops in commits: increment, append, merge, add_to_set, over the HTTP API."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from gateway.state import NamespaceKeys, check_namespace_history

pytestmark = pytest.mark.anyio


def _op(key: str, op: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"key": key, "op": op, "value": value, **extra}


async def test_each_op_returns_the_value_it_produced(agent: Any, redis: Redis) -> None:
    alice = agent()
    await alice.put_namespace("ops")
    first = await alice.commit(
        "ops",
        _op("n", "increment", 5),
        _op("log", "append", {"by": "alice"}),
        _op("cfg", "merge", {"a": {"x": 1, "list": []}, "f": 0.1}),
        _op("tags", "add_to_set", "red"),
    )
    assert first.status_code == 200, first.text
    assert first.json()["values"] == {
        "n": 5, "log": [{"by": "alice"}], "cfg": {"a": {"x": 1, "list": []}, "f": 0.1},
        "tags": ["red"],
    }  # fmt: skip
    again = await alice.commit(
        "ops",
        _op("n", "increment", -1.5),
        _op("log", "append", [1, 2]),
        _op("cfg", "merge", {"a": {"y": 2}, "f": 0.2}),
        _op("tags", "add_to_set", "red"),
        {"key": "plain", "value": 1},
    )
    assert again.status_code == 200, again.text
    assert again.json()["values"] == {
        "n": 3.5, "log": [{"by": "alice"}, [1, 2]],
        "cfg": {"a": {"x": 1, "list": [], "y": 2}, "f": 0.2}, "tags": ["red"],
    }  # fmt: skip
    assert again.json()["versions"] == {"n": 2, "log": 2, "cfg": 2, "tags": 2, "plain": 1}
    read = (await alice.read("ops", "cfg")).json()
    assert (read["value"], read["version"]) == ({"a": {"x": 1, "list": [], "y": 2}, "f": 0.2}, 2)
    entry = (await alice.history("ops"))[-1]
    assert entry["ops"]["n"] == {"op": "increment", "value": -1.5}
    # The history keeps the op and its operand, not its result (the checker replays it), so an
    # op on a large value adds a small entry.
    assert "n" not in entry["values"] and entry["values"]["plain"] == 1
    assert "plain" not in entry["ops"]
    tenths = await alice.commit("ops", _op("f", "increment", 0.1))
    tenths = await alice.commit("ops", _op("f", "increment", 0.2))
    assert tenths.json()["values"] == {"f": 0.1 + 0.2}  # doubles, not rounded to 14 digits
    assert (await check_namespace_history(redis, NamespaceKeys("acme", "ops"))).serializable


async def test_ops_from_16_clients_lose_nothing_and_the_history_checks(
    agent: Any, redis: Redis
) -> None:
    await agent().put_namespace("hot")
    per_agent = 10

    async def work(index: int) -> None:
        me = agent(f"agent-{index}", session=f"s-{index}")
        for n in range(per_agent):  # one session: others' ops in between never refuse its next
            done = await me.commit(
                "hot",
                _op("counter", "increment", 1),
                _op("list", "append", f"{index}-{n}"),
                _op("members", "add_to_set", index),
            )
            assert done.status_code == 200, done.text

    async with anyio.create_task_group() as tasks:
        for index in range(16):
            tasks.start_soon(work, index)
    alice = agent()
    assert (await alice.read("hot", "counter")).json()["value"] == 16 * per_agent
    appended = (await alice.read("hot", "list")).json()["value"]
    assert sorted(appended) == sorted(f"{i}-{n}" for i in range(16) for n in range(per_agent))
    assert sorted((await alice.read("hot", "members")).json()["value"]) == list(range(16))
    report = await check_namespace_history(redis, NamespaceKeys("acme", "hot"))
    assert report.commits == 16 * per_agent and report.anomalies == []


async def test_a_type_error_refuses_the_whole_mixed_commit(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("mixed")
    await alice.commit("mixed", {"key": "name", "value": "alice"}, _op("n", "increment", 1))
    refused = await alice.commit(
        "mixed",
        {"key": "plain", "value": "new", "expected_version": 0},
        _op("n", "increment", 1),
        _op("name", "append", "x"),  # a string is not a list
    )
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["code"] == "INVALID_ARGUMENTS"
    assert body["details"] == {"key": "name", "op": "append", "stored_type": "string"}
    assert "'name'" in body["message"] and "string" in body["message"]
    for key, version, value in [("plain", 0, None), ("n", 1, 1), ("name", 1, "alice")]:
        read = (await alice.read("mixed", key)).json()
        assert (read["version"], read["value"]) == (version, value)
    stale = await alice.commit("mixed", _op("n", "increment", 1, expected_version=0))
    assert stale.status_code == 409 and stale.json()["code"] == "STATE_CONFLICT"
    assert (await alice.read("mixed", "n")).json()["value"] == 1


async def test_an_op_in_an_owned_namespace_needs_the_lease(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("owned-ops", "owned")
    refused = await bob.commit("owned-ops", _op("n", "increment", 1))
    assert refused.status_code == 409 and refused.json()["code"] == "LEASE_REQUIRED"
    token = (await alice.lease("owned-ops", "n")).json()["leases"][0]["fencing_token"]
    held = await bob.commit("owned-ops", _op("n", "increment", 1))
    assert held.status_code == 409 and held.json()["code"] == "LEASE_HELD"
    done = await alice.commit("owned-ops", _op("n", "increment", 2, fencing_token=token))
    assert done.status_code == 200 and done.json()["values"] == {"n": 2}


async def test_op_with_delete_and_op_with_a_wrong_operand_are_400(agent: Any) -> None:
    """Refused by the commit's model, as a body that does not parse is on every route (an op
    that does not fit the stored value is the store's refusal: 422, above)."""
    alice = agent()
    await alice.put_namespace("bad")
    for write in [
        {"key": "n", "op": "append", "delete": True},
        _op("n", "increment", "1"),
        _op("n", "merge", [1]),
        _op("n", "multiply", 2),
    ]:
        answer = await alice.commit("bad", write)
        assert answer.status_code == 400, write
        assert answer.json()["code"] == "INVALID_REQUEST"
    assert (await alice.read("bad", "n")).json()["version"] == 0


async def test_the_checker_catches_a_forged_op_result(agent: Any, redis: Redis) -> None:
    alice = agent()
    await alice.put_namespace("forged")
    await alice.commit("forged", _op("n", "increment", 2))
    await alice.commit("forged", _op("n", "increment", 3))
    keys = NamespaceKeys("acme", "forged")
    assert (await check_namespace_history(redis, keys)).serializable
    # A third commit whose recorded result is not 5 + 1, with the store agreeing with it.
    await redis.xadd(
        keys.history,
        {"agent": "mallory", "session": "m", "time": "0", "keys": json.dumps({"n": [2, 3]}),
         "reads": "{}", "values": json.dumps({"n": 7}),
         "ops": json.dumps({"n": {"op": "increment", "value": 1}})},
    )  # fmt: skip
    await redis.hset(keys.data("n"), mapping={"val": "7", "ver": 3})
    report = await check_namespace_history(redis, keys)
    [anomaly] = report.anomalies
    assert (anomaly.kind, anomaly.key) == ("bad_op", "n")
    assert "recorded 7" in anomaly.message


async def test_the_value_cap_and_the_quota_apply_to_an_ops_result(
    settings: Settings, redis: Redis
) -> None:
    limited = settings.model_copy(update={"max_value_bytes": 40, "state_quota_bytes": 1_365})
    app = create_app(limited)
    token = issue_token(limited, tenant="acme", agent="alice", scopes=["state:*:write"])
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://gateway", headers=headers) as c,
    ):
        await c.put("/v1/state/capped", json={})

        async def commit(*writes: dict[str, Any]) -> httpx.Response:
            return await c.post("/v1/state/capped/commit", json={"writes": writes})

        for n in range(3):  # ["xxxxxxxxx0","xxxxxxxxx1","xxxxxxxxx2"]: 40 bytes
            assert (await commit(_op("list", "append", f"xxxxxxxxx{n}"))).status_code == 200
        too_big = await commit(_op("list", "append", "y"))
        assert too_big.status_code == 413, too_big.text
        assert too_big.json()["details"] == {"key": "list", "size_bytes": 44, "limit_bytes": 40}
        # The namespace and the three appends hold 975 bytes (121 of the namespace's config, 124
        # of the key's own hash, 40 of values, 690 of history entries). This commit adds a key
        # (125 bytes), its history entry (242) and its result (24): 1366 is over the quota,
        # where its operand (22 bytes) would have fit.
        over_quota = await commit(_op("other", "append", "z" * 20))
        assert over_quota.status_code == 507, over_quota.text
        read = (await c.get("/v1/state/capped/list")).json()
        assert (read["version"], len(read["value"])) == (3, 3)
