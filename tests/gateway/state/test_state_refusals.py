"""Every bad input and refusal of the state API: the exact SERF code, and nothing written."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def _unchanged(alice: Any, ns: str, key: str, version: int, entries: int) -> None:
    assert (await alice.read(ns, key)).json()["version"] == version
    assert len(await alice.history(ns)) == entries


def _code(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    return body


async def test_unknown_namespace_is_404_for_every_operation(agent: Any) -> None:
    alice = agent()
    for response in (
        await alice.read("nowhere", "k"),
        await alice.commit("nowhere", {"key": "k", "value": 1}),
        await alice.lease("nowhere", "k"),
        await alice.release("nowhere", "k"),
        await alice.client.get("/v1/state/nowhere/history", headers=alice.headers),
    ):
        _code(response, 404, "NAMESPACE_NOT_FOUND")
    await alice.put_namespace("nowhere")
    assert await alice.history("nowhere") == []


async def test_bad_keys_and_names_are_422(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("team")
    long_key = "k" * 257
    _code(await alice.read("team", long_key), 422, "INVALID_ARGUMENTS")
    _code(await alice.read("team", "white space"), 422, "INVALID_ARGUMENTS")
    # A key the body's model refuses (its pattern) is a body that does not parse: 400, as
    # the same bad body is on every route.
    body = _code(await alice.commit("team", {"key": long_key, "value": 1}), 400, "INVALID_REQUEST")
    assert any("key" in hint for hint in body["param_hints"])
    _code(await alice.commit("team", {"key": "history", "value": 1}), 422, "INVALID_ARGUMENTS")
    bad_read_set = await alice.commit("team", {"key": "k", "value": 1}, read_set={"a b": 0})
    _code(bad_read_set, 422, "INVALID_ARGUMENTS")
    _code(await alice.lease("team", "bad key!"), 422, "INVALID_ARGUMENTS")
    _code(await alice.put_namespace("-bad-ns"), 422, "INVALID_ARGUMENTS")
    bad_session = await alice.client.get(
        "/v1/state/team/k", headers={**alice.headers, "X-Conclave-Session": "no spaces"}
    )
    _code(bad_session, 422, "INVALID_ARGUMENTS")
    await _unchanged(alice, "team", "k", 0, 0)


async def test_wrong_shapes_are_400_invalid_request_and_broken_json_is_400(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("team")
    _code(await alice.commit("team"), 400, "INVALID_REQUEST")  # no writes
    twice = await alice.commit("team", {"key": "k", "value": 1}, {"key": "k", "value": 2})
    _code(twice, 400, "INVALID_REQUEST")
    _code(await alice.put_namespace("team", "exclusive"), 400, "INVALID_REQUEST")
    broken = await alice.client.post(
        "/v1/state/team/commit",
        content=b'{"writes": [{"key": "k", "value": ',
        headers={**alice.headers, "content-type": "application/json"},
    )
    _code(broken, 400, "PARSE_ERROR")
    await _unchanged(alice, "team", "k", 0, 0)


async def test_value_over_the_limit_is_413_and_writes_no_key(agent: Any, settings: Any) -> None:
    alice = agent()
    await alice.put_namespace("team")
    big = "x" * settings.max_value_bytes
    body = _code(
        await alice.commit("team", {"key": "small", "value": 1}, {"key": "big", "value": big}),
        413,
        "PAYLOAD_TOO_LARGE",
    )
    assert body["details"]["key"] == "big"
    huge = "y" * (settings.max_body_bytes + 1)
    _code(await alice.commit("team", {"key": "small", "value": huge}), 413, "PAYLOAD_TOO_LARGE")
    await _unchanged(alice, "team", "small", 0, 0)


async def test_expected_version_mismatch_lists_the_key_and_writes_nothing(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("team")
    await alice.commit("team", {"key": "a", "value": 1})
    refused = await alice.commit(
        "team", {"key": "b", "value": 1}, {"key": "a", "value": 2, "expected_version": 0}
    )
    body = _code(refused, 409, "STATE_CONFLICT")
    assert body["details"]["conflicts"] == [
        {"key": "a", "reason": "expected_version is not current", "expected_version": 0,
         "current_version": 1, "current_value": 1}
    ]  # fmt: skip
    await _unchanged(alice, "team", "b", 0, 1)


async def test_owned_namespace_needs_a_lease_and_its_token(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("owned", "owned")
    _code(await alice.commit("owned", {"key": "k", "value": 1}), 409, "LEASE_REQUIRED")
    grant = (await alice.lease("owned", "k")).json()["leases"][0]
    no_token = await alice.commit("owned", {"key": "k", "value": 1})
    _code(no_token, 409, "LEASE_REQUIRED")
    wrong = await alice.commit(
        "owned", {"key": "k", "value": 1, "fencing_token": grant["fencing_token"] + 1}
    )
    body = _code(wrong, 409, "FENCED")
    assert body["details"]["conflicts"][0]["owner"] == "alice"
    await _unchanged(alice, "owned", "k", 0, 0)
    ok = await alice.commit(
        "owned", {"key": "k", "value": 1, "fencing_token": grant["fencing_token"]}
    )
    assert ok.status_code == 200


async def test_a_key_leased_by_another_agent_is_refused(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("owned", "owned")
    await alice.lease("owned", "k")
    held = _code(await bob.lease("owned", "k", "free"), 409, "LEASE_HELD")
    assert held["details"]["conflicts"][0]["owner"] == "alice"
    assert held["action"] == "retry_backoff"
    assert (await alice.read("owned", "free")).json()["owner"] is None  # all or none
    _code(await bob.commit("owned", {"key": "k", "value": 1}), 409, "LEASE_HELD")
    _code(await bob.release("owned", "k"), 409, "LEASE_HELD")
    assert (await bob.read("owned", "k")).json()["owner"] == "alice"
    await _unchanged(alice, "owned", "k", 0, 0)


async def test_leases_in_optimistic_namespaces_are_honoured(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("team")
    await alice.lease("team", "k")
    _code(await bob.commit("team", {"key": "k", "value": 1}), 409, "LEASE_HELD")
    await _unchanged(alice, "team", "k", 0, 0)


async def test_commit_with_an_expired_lease_is_refused(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("owned", "owned")
    grant = (await alice.lease("owned", "k", ttl_ms=30)).json()["leases"][0]
    await _wait_until_free(alice, "owned", "k")
    late = await alice.commit(
        "owned", {"key": "k", "value": 1, "fencing_token": grant["fencing_token"]}
    )
    body = _code(late, 409, "LEASE_EXPIRED")
    assert body["action"] == "reacquire"
    await _unchanged(alice, "owned", "k", 0, 0)


async def _wait_until_free(someone: Any, ns: str, key: str, timeout_s: float = 5.0) -> None:
    import anyio

    with anyio.fail_after(timeout_s):
        while True:  # the lease lapses on Redis's clock: poll it, bounded
            if (await someone.read(ns, key)).json()["owner"] is None:
                return
            await anyio.sleep(0.01)


async def test_a_taken_over_lease_fences_the_stale_owner(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("owned", "owned")
    old = (await alice.lease("owned", "k", ttl_ms=30)).json()["leases"][0]
    await _wait_until_free(alice, "owned", "k")
    new = (await bob.lease("owned", "k")).json()["leases"][0]
    assert new["fencing_token"] == old["fencing_token"] + 1
    stale = await alice.commit(
        "owned", {"key": "k", "value": "stale", "fencing_token": old["fencing_token"]}
    )
    body = _code(stale, 409, "FENCED")
    assert body["details"]["conflicts"][0]["owner"] == "bob"
    await _unchanged(alice, "owned", "k", 0, 0)
    fresh = await bob.commit(
        "owned", {"key": "k", "value": 1, "fencing_token": new["fencing_token"]}
    )
    assert fresh.status_code == 200


async def test_renewal_keeps_the_token_and_release_frees_the_key(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("owned", "owned")
    first = (await alice.lease("owned", "k", ttl_ms=1000)).json()["leases"][0]
    renewed = (await alice.lease("owned", "k", ttl_ms=60_000)).json()["leases"][0]
    assert renewed["fencing_token"] == first["fencing_token"]
    assert renewed["expires_at_ms"] > first["expires_at_ms"]
    assert (await alice.release("owned", "k")).status_code == 204
    taken = (await bob.lease("owned", "k")).json()["leases"][0]
    assert taken["fencing_token"] == first["fencing_token"] + 1
    released = await alice.commit(
        "owned", {"key": "k", "value": 1, "fencing_token": first["fencing_token"]}
    )
    _code(released, 409, "FENCED")


async def test_a_refusal_lists_every_conflicting_key(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("team")
    for key in ("a", "b"):
        await alice.read("team", key)
        await bob.commit("team", {"key": key, "value": 1})
    body = _code(await alice.commit("team", {"key": "c", "value": 1}), 409, "STATE_CONFLICT")
    assert sorted(c["key"] for c in body["details"]["conflicts"]) == ["a", "b"]
    await _unchanged(alice, "team", "c", 0, 2)
