"""The state API's ordinary paths: namespaces, reads, commits, read logs, history, tenancy."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.state import NamespaceKeys, check_namespace_history

pytestmark = pytest.mark.anyio


async def test_namespace_creation_is_idempotent_for_the_same_config(agent: Any) -> None:
    alice = agent()
    first = await alice.put_namespace("notes", "owned")
    again = await alice.put_namespace("notes", "owned")
    other = await alice.put_namespace("notes", "optimistic")
    assert (first.status_code, first.json()["created"]) == (201, True)
    assert (again.status_code, again.json()["created"]) == (200, False)
    assert other.status_code == 409 and other.json()["code"] == "STATE_CONFLICT"
    shown = await alice.client.get("/v1/state/notes", headers=alice.headers)
    assert shown.json()["config"] == {"mode": "owned", "validate_reads": True}


async def test_missing_key_reads_as_version_zero_and_commits_bump_versions(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("notes")
    missing = await alice.read("notes", "plan/step-1")
    assert missing.status_code == 200
    assert (missing.json()["version"], missing.json()["value"]) == (0, None)
    done = await alice.commit("notes", {"key": "plan/step-1", "value": {"todo": ["a", "b"]}})
    assert done.status_code == 200, done.text
    assert done.json()["versions"] == {"plan/step-1": 1} and done.json()["replayed"] is False
    again = await alice.commit("notes", {"key": "plan/step-1", "value": 2, "expected_version": 1})
    assert again.json()["versions"] == {"plan/step-1": 2}
    read = (await alice.read("notes", "plan/step-1")).json()
    assert (read["value"], read["version"]) == (2, 2)
    gone = await alice.commit("notes", {"key": "plan/step-1", "delete": True})
    assert gone.json()["versions"] == {"plan/step-1": 3}
    read = (await alice.read("notes", "plan/step-1")).json()
    assert (read["value"], read["version"]) == (None, 3)


async def test_multi_key_commit_writes_all_and_records_one_history_entry(agent: Any) -> None:
    alice = agent(session="s1")
    await alice.put_namespace("team")
    await alice.read("team", "a")
    done = await alice.commit("team", {"key": "a", "value": 1}, {"key": "b", "value": "x"})
    assert done.json()["versions"] == {"a": 1, "b": 1}
    [entry] = await alice.history("team")
    assert entry["commit_id"] == done.json()["commit_id"]
    assert (entry["agent"], entry["session"]) == ("alice", "s1")
    assert entry["keys"] == {"a": [0, 1], "b": [0, 1]}
    assert entry["values"] == {"a": 1, "b": "x"}
    assert entry["read_set"] == {"a": 0}


async def test_stale_logged_read_is_refused_and_rereading_fixes_it(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("team")
    await alice.read("team", "counter")  # alice logs counter@0
    assert (await bob.commit("team", {"key": "counter", "value": 1})).status_code == 200
    refused = await alice.commit("team", {"key": "summary", "value": "counter is 0"})
    assert refused.status_code == 409
    body = refused.json()
    assert (body["code"], body["action"]) == ("STATE_CONFLICT", "reread_and_retry")
    assert body["details"]["conflicts"] == [
        {"key": "counter", "reason": "logged read is stale", "expected_version": 0,
         "current_version": 1, "current_value": 1}
    ]  # fmt: skip
    assert (await alice.read("team", "summary")).json()["version"] == 0
    await alice.read("team", "counter")
    assert (await alice.commit("team", {"key": "summary", "value": "1"})).status_code == 200


async def test_a_retry_built_from_the_409_details_commits_in_one_request(
    agent: Any, redis: Any
) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("team")
    await alice.read("team", "counter")  # alice logs counter@0
    await bob.commit("team", {"key": "counter", "value": 41})
    refused = await alice.commit("team", {"key": "counter", "value": 1})
    [stale] = refused.json()["details"]["conflicts"]
    assert (stale["current_value"], stale["current_version"]) == (41, 1)
    retry = await alice.commit(
        "team",
        {"key": "counter", "value": stale["current_value"] + 1},
        read_set={"counter": stale["current_version"]},
    )
    assert retry.status_code == 200, retry.text
    assert (await alice.read("team", "counter")).json() == {
        "namespace": "team", "key": "counter", "value": 42, "version": 2,
        "owner": None, "lease_expires_at_ms": None,
    }  # fmt: skip
    report = await check_namespace_history(redis, NamespaceKeys("acme", "team"))
    assert report.anomalies == [] and report.commits == 2


async def test_a_blind_resend_after_a_409_is_still_refused(agent: Any) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("team")
    await alice.read("team", "counter")
    await bob.commit("team", {"key": "counter", "value": 5})
    assert (await alice.commit("team", {"key": "counter", "value": 1})).status_code == 409
    # The 409 logged counter@1 as shown only: a commit that does not declare it is stale.
    resent = await alice.commit("team", {"key": "counter", "value": 1})
    assert resent.status_code == 409
    [stale] = resent.json()["details"]["conflicts"]
    assert (stale["key"], stale["current_version"], stale["current_value"]) == ("counter", 1, 5)
    # Declaring a version another commit has since replaced is refused too.
    await bob.commit("team", {"key": "counter", "value": 6})
    late = await alice.commit("team", {"key": "counter", "value": 6}, read_set={"counter": 1})
    assert late.status_code == 409
    assert late.json()["details"]["conflicts"][0]["current_version"] == 2
    assert (await alice.read("team", "counter")).json()["value"] == 6


async def test_a_successful_commit_refreshes_the_writers_read_log(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("team")
    await alice.read("team", "k")
    for version in range(1, 4):  # each commit leaves k@version in alice's log, not k@0
        done = await alice.commit("team", {"key": "k", "value": version})
        assert done.json()["versions"] == {"k": version}


async def test_read_validation_off_ignores_the_log_but_not_the_explicit_read_set(
    agent: Any,
) -> None:
    alice, bob = agent("alice"), agent("bob")
    await alice.put_namespace("loose", validate_reads=False)
    await alice.read("loose", "x")
    await bob.commit("loose", {"key": "x", "value": 1})
    assert (await alice.commit("loose", {"key": "y", "value": 1})).status_code == 200
    stale = await alice.commit("loose", {"key": "y", "value": 2}, read_set={"x": 0})
    assert stale.status_code == 409 and stale.json()["code"] == "STATE_CONFLICT"


async def test_sessions_of_one_agent_keep_separate_read_logs(agent: Any) -> None:
    first, second, bob = agent(session="one"), agent(session="two"), agent("bob")
    await first.put_namespace("team")
    await first.read("team", "x")
    await bob.commit("team", {"key": "x", "value": 1})
    assert (await second.commit("team", {"key": "y", "value": 1})).status_code == 200
    assert (await first.commit("team", {"key": "y", "value": 2})).status_code == 409


async def test_idempotency_key_returns_the_first_outcome(agent: Any) -> None:
    alice = agent()
    await alice.put_namespace("team")
    write = {"key": "k", "value": "once"}
    first = await alice.commit("team", write, idempotency_key="job-7")
    second = await alice.commit("team", write, idempotency_key="job-7")
    assert first.json()["replayed"] is False and second.json()["replayed"] is True
    assert second.json()["commit_id"] == first.json()["commit_id"]
    assert len(await alice.history("team")) == 1
    assert (await alice.read("team", "k")).json()["version"] == 1


async def test_another_tenants_namespace_is_invisible(agent: Any) -> None:
    acme, globex = agent("alice", tenant="acme"), agent("alice", tenant="globex")
    await acme.put_namespace("shared")
    await acme.commit("shared", {"key": "secret", "value": 42})
    seen = await globex.read("shared", "secret")
    assert seen.status_code == 404 and seen.json()["code"] == "NAMESPACE_NOT_FOUND"
    await globex.put_namespace("shared")  # the same name is globex's own namespace
    assert (await globex.read("shared", "secret")).json()["value"] is None
    assert (await acme.read("shared", "secret")).json()["value"] == 42


async def test_scopes_hide_namespaces_and_guard_writes(agent: Any) -> None:
    owner = agent("owner")
    reader = agent("reader", scopes=("state:docs:read",))
    stranger = agent("stranger", scopes=("state:other:write",))
    await owner.put_namespace("docs")
    await owner.commit("docs", {"key": "k", "value": 1})
    assert (await reader.read("docs", "k")).json()["value"] == 1
    denied = await reader.commit("docs", {"key": "k", "value": 2})
    assert denied.status_code == 403 and denied.json()["code"] == "NAMESPACE_FORBIDDEN"
    assert (await reader.lease("docs", "k")).json()["code"] == "NAMESPACE_FORBIDDEN"
    hidden = await stranger.read("docs", "k")
    assert hidden.status_code == 404 and hidden.json()["code"] == "NAMESPACE_NOT_FOUND"
    assert (await reader.read("docs", "k")).json()["version"] == 1


async def test_requests_without_a_token_are_refused(agent: Any) -> None:
    response = await agent().client.get("/v1/state/docs/k")
    assert response.status_code == 401 and response.json()["code"] == "AUTH_REQUIRED"
