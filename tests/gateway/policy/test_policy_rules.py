"""Policy rules (`gateway.policy`): compiled once, refusing a bad set whole; decided per call
on the caller, the tool and its (nested) arguments; kept in Redis and followed by every
replica within a second."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from gateway.assembly import ConfigurationError, create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from gateway.policy import Policies, PolicyError, PolicyStore, compile_rules
from protocol import ErrorCode, PolicyRule, PolicySet, Principal
from tests.helpers import admin_headers, in_process_gateway, in_process_replicas, until_true

pytestmark = pytest.mark.anyio


def _principal(tenant: str = "acme", agent: str = "payer") -> Principal:
    return Principal(tenant=tenant, agent=agent, scopes=("tool:*",), expires_at=2**31, token_id="t")


def _rule(**fields: Any) -> PolicyRule:
    return PolicyRule(**{"name": "r", "outcome": "deny", **fields})


def _policies(*rules: PolicyRule) -> Policies:
    return Policies(compile_rules(rules))


def test_a_deny_rule_refuses_only_the_calls_its_condition_holds_for() -> None:
    policies = _policies(
        _rule(name="small-transfers", tools=("transfer_*",), when="args.amount > 1000",
              reason="over 1,000 needs a person"),
    )  # fmt: skip
    refused = policies.refusal(_principal(), "transfer_funds", {"amount": 1500})
    assert refused is not None and refused.error.code is ErrorCode.POLICY_DENIED
    assert refused.error.details == {
        "policy": "small-transfers", "reason": "over 1,000 needs a person",
    }  # fmt: skip
    assert "small-transfers" in refused.error.message
    assert policies.refusal(_principal(), "transfer_funds", {"amount": 999}) is None
    assert policies.refusal(_principal(), "echo", {"amount": 5000}) is None  # another tool


def test_a_rule_reads_nested_arguments_the_caller_and_matches_by_glob() -> None:
    policies = _policies(
        _rule(name="bulk", agents=("bot-*",), when="args.order.items.exists(i, i.qty > 10)"),
        _rule(name="after-hours", tenants=("night",), when="principal.agent != 'ops'"),
    )
    bulk = {"order": {"items": [{"qty": 2}, {"qty": 50}]}}
    assert policies.refusal(_principal(agent="bot-7"), "order", bulk) is not None
    assert policies.refusal(_principal(agent="human"), "order", bulk) is None
    assert policies.refusal(_principal(agent="bot-7"), "order", {"order": {"items": []}}) is None
    assert policies.refusal(_principal("night", "ops"), "x", {}) is None
    assert policies.refusal(_principal("night", "other"), "x", {}) is not None


def test_an_approve_rule_asks_for_a_person_unless_a_deny_rule_refuses() -> None:
    policies = _policies(
        _rule(name="big", outcome="approve", tools=("transfer",), when="args.amount > 1000"),
        _rule(name="huge", tools=("transfer",), when="args.amount > 1000000"),
    )
    asked = policies.decide(_principal(), "transfer", {"amount": 5000})
    assert isinstance(asked, PolicyRule) and asked.name == "big"
    assert policies.refusal(_principal(), "transfer", {"amount": 5000}) is None
    assert policies.decide(_principal(), "transfer", {"amount": 5}) is None
    refused = policies.decide(_principal(), "transfer", {"amount": 5_000_000})
    assert not isinstance(refused, PolicyRule) and refused is not None
    assert refused.error.code is ErrorCode.POLICY_DENIED  # a deny wins over an approve
    approve_only = _policies(_rule(outcome="approve", when="args.amount > 1000"))
    undecidable = approve_only.decide(_principal(), "transfer", {"amount": "lots"})
    assert isinstance(undecidable, PolicyRule)  # cannot decide: a person does, not nobody


def test_a_condition_that_cannot_be_evaluated_denies_and_never_allows() -> None:
    deny = _policies(_rule(when="args.amount > 1000"))
    assert deny.refusal(_principal(), "t", {}) is not None  # no amount: cannot decide
    assert deny.refusal(_principal(), "t", {"amount": "lots"}) is not None
    # Not an int: CEL decides, not the plain check (a float compares, a bool cannot).
    assert deny.refusal(_principal(), "t", {"amount": 1500.5}) is not None
    assert deny.refusal(_principal(), "t", {"amount": True}) is not None
    assert deny.refusal(_principal(), "t", {"amount": 999}) is None
    typo = _policies(_rule(when="arg.amount > 1000"))  # no such variable: fails closed
    assert typo.refusal(_principal(), "t", {"amount": 1}) is not None


def test_of_a_hundred_rules_asked_together_the_first_that_holds_is_named() -> None:
    """The rules a call matches are asked by one program (`any_holds`) and then one by one
    only when one may hold: the rule named is still the first, in order, that holds or cannot
    be evaluated; a `//` comment ending one condition does not swallow the next."""
    rules = [
        _rule(name=f"r{i}", outcome="approve" if i % 2 else "deny", when=f"args.n == {i}")
        for i in range(100)
    ]
    policies = _policies(
        *rules,
        _rule(name="commented", when="args.n == 500 // a comment"),
        _rule(name="after-comment", when="args.m == 7"),
    )
    assert policies.decide(_principal(), "t", {"n": 1000, "m": 0}) is None
    refused = policies.refusal(_principal(), "t", {"n": 58, "m": 0})
    assert refused is not None and refused.error.details["policy"] == "r58"
    asked = policies.decide(_principal(), "t", {"n": 57, "m": 0})
    assert isinstance(asked, PolicyRule) and asked.name == "r57"
    after = policies.refusal(_principal(), "t", {"n": 1000, "m": 7})
    assert after is not None and after.error.details["policy"] == "after-comment"
    undecidable = policies.refusal(_principal(), "t", {"n": 1000})  # no m: cannot decide
    assert undecidable is not None and undecidable.error.details["policy"] == "after-comment"


def test_a_callers_variables_are_its_own_and_a_calls_are_not_kept_for_the_next() -> None:
    policies = _policies(
        _rule(name="admins", when='"tool:admin" in principal.scopes'),
        _rule(name="secrets", when="has(args.secret)"),
    )
    admin = _principal().model_copy(update={"scopes": ("tool:*", "tool:admin")})
    assert policies.refusal(_principal(), "t", {}) is None
    refused = policies.refusal(admin, "t", {})  # the same tenant, agent and tool
    assert refused is not None and refused.error.details["policy"] == "admins"
    assert policies.refusal(_principal(), "t", {}) is None
    assert policies.refusal(_principal(), "t", {"secret": 1}) is not None
    assert policies.refusal(_principal(), "t", {"public": 1}) is None
    ordered = _policies(
        _rule(name="big", when="args.n > 10"),
        _rule(name="bots", when='principal.agent.startsWith("bot")'),  # the caller's alone
        _rule(name="late", when="args.n > 5"),
    )
    for agent, n, named in [("bot-1", 20, "big"), ("bot-1", 0, "bots"), ("ann", 7, "late")]:
        refused = ordered.refusal(_principal(agent=agent), "t", {"n": n})
        assert refused is not None and refused.error.details["policy"] == named
    assert ordered.refusal(_principal(agent="ann"), "t", {"n": 0}) is None


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ([_rule(when="args.amount >")], "rule 'r': when does not compile"),
        ([_rule(), _rule()], "unique"),
    ],
)
def test_a_bad_rule_is_refused_with_where(rules: list[PolicyRule], says: str) -> None:
    with pytest.raises(PolicyError, match=says):
        compile_rules(rules)


async def test_rules_put_on_one_replica_take_effect_on_another_and_bad_ones_change_nothing(
    redis: Redis,
) -> None:
    here, there = PolicyStore(redis, Policies()), PolicyStore(redis, Policies())
    async with anyio.create_task_group() as group:
        await group.start(there.follow)
        await here.replace(PolicySet(rules=[_rule(name="no-echo", tools=("echo",))]))
        began = time.monotonic()
        while there.policies.refusal(_principal(), "echo", {}) is None:
            assert time.monotonic() - began < 1.5, "the other replica never took the rule"
            await anyio.sleep(0.05)
        with pytest.raises(PolicyError):
            await here.replace(PolicySet(rules=[_rule(name="bad", when="(")]))
        await anyio.sleep(0.7)
        assert there.policies.refusal(_principal(), "echo", {}) is not None  # still in force
        rules, _ = await here.rules()
        assert [r.name for r in rules.rules] == ["no-echo"]
        await here.replace(PolicySet(rules=[]))
        began = time.monotonic()
        while there.policies.refusal(_principal(), "echo", {}) is not None:
            assert time.monotonic() - began < 1.5
            await anyio.sleep(0.05)
        group.cancel_scope.cancel()


async def test_a_rule_put_through_one_gateways_admin_api_refuses_calls_on_another(
    settings: Settings,
) -> None:
    """What an operator sees: PUT /v1/policies on one replica, and within a second (the
    replicas read the rules' version every 0.5 s) the other refuses the calls the rule
    denies, with no restart; taken away the same way, the calls pass again."""
    settings = settings.model_copy(update={"sandbox_backend": "inprocess"})
    token = issue_token(settings, tenant="acme", agent="talker", scopes=["tool:echo"])
    caller, admin = {"Authorization": f"Bearer {token}"}, admin_headers(settings)
    rule = {"name": "no-long-echo", "tools": ["echo"], "when": "size(args.message) > 3",
            "outcome": "deny", "reason": "keep it short"}  # fmt: skip

    async with in_process_replicas(settings) as (a, b):

        async def long_call_code() -> str:
            body = {"arguments": {"message": "a long message"}}
            answer = await b.post("/v1/tools/echo/call", json=body, headers=caller)
            return "OK" if answer.status_code == 200 else str(answer.json()["details"]["policy"])

        async def refused() -> bool:
            return await long_call_code() == "no-long-echo"

        async def passes() -> bool:
            return await long_call_code() == "OK"

        assert await passes()
        try:
            assert (await a.put("/v1/policies", json={"rules": [rule]}, headers=admin)).is_success
            await until_true(refused, 1.5, poll_s=0.01)  # TimeoutError past 1.5 s
            short = {"arguments": {"message": "hi"}}
            assert (await b.post("/v1/tools/echo/call", json=short, headers=caller)).is_success
        finally:
            assert (await a.put("/v1/policies", json={"rules": []}, headers=admin)).is_success
        await until_true(passes, 1.5, poll_s=0.01)


async def test_conclave_toml_rules_refuse_calls_through_the_stages(
    settings: Settings, tmp_path: Path
) -> None:
    config = tmp_path / "conclave.toml"
    config.write_text(
        '[[policy]]\nname = "short-echo"\ntools = ["echo"]\nwhen = "size(args.message) > 5"\n'
        'outcome = "deny"\nreason = "keep it short"\n'
    )
    settings = settings.model_copy(update={"config": config, "sandbox_backend": "inprocess"})
    token = issue_token(settings, tenant="acme", agent="talker", scopes=["tool:echo"])
    headers = {"Authorization": f"Bearer {token}"}
    async with in_process_gateway(settings) as client:
        long = await client.post(
            "/v1/tools/echo/call", json={"arguments": {"message": "far too long"}}, headers=headers
        )
        short = await client.post(
            "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
        )
    assert long.status_code == 403 and long.json()["code"] == "POLICY_DENIED"
    assert long.json()["details"] == {"policy": "short-echo", "reason": "keep it short"}
    assert short.status_code == 200, short.text


async def test_a_rule_reads_the_callers_quota_use(settings: Settings, tmp_path: Path) -> None:
    """`usage`: what the caller has used of each quota its call counts against, by quota and
    limit, as GET /v1/quotas shows it; read from Redis only for calls a rule reading it
    matches. Here a rule asks for less than the quota allows: big echoes stop after two
    calls a day, while short ones go on to the quota."""
    config = tmp_path / "conclave.toml"
    config.write_text(
        '[[quota]]\nname = "daily"\ntools = ["echo"]\ncalls_per_day = 5\n\n'
        '[[policy]]\nname = "two-big"\ntools = ["echo"]\noutcome = "deny"\n'
        "when = 'size(args.message) > 3 && usage.daily.calls_per_day >= 2'\n"
    )
    settings = settings.model_copy(update={"config": config, "sandbox_backend": "inprocess"})
    tenant = f"usage-{uuid.uuid4().hex[:8]}"  # a new day's count
    token = issue_token(settings, tenant=tenant, agent="user", scopes=["tool:echo"])
    headers = {"Authorization": f"Bearer {token}"}
    codes = []
    async with in_process_gateway(settings) as client:
        for message in ["long one", "long two", "long three", "hi", "hi", "hi", "hi"]:
            body = {"arguments": {"message": message}}
            answer = await client.post("/v1/tools/echo/call", json=body, headers=headers)
            codes.append(answer.json().get("code") if answer.status_code != 200 else 200)
    assert codes == [200, 200, "POLICY_DENIED", 200, 200, 200, "RATE_LIMITED"]


def test_a_bad_rule_in_conclave_toml_stops_the_start(settings: Settings, tmp_path: Path) -> None:
    config = tmp_path / "conclave.toml"
    config.write_text('[[policy]]\nname = "broken"\nwhen = "args.x >"\noutcome = "deny"\n')
    with pytest.raises(ConfigurationError, match=r"broken.*does not compile"):
        create_app(settings.model_copy(update={"config": config}))


def test_a_condition_sees_every_argument_it_reads_however_it_reads_them() -> None:
    """Only the arguments the asked conditions name (`args.NAME`) cross into CEL, for speed:
    one that reads `args` otherwise (indexed, its size) still sees them all."""
    policies = _policies(
        _rule(name="named", when="args.a.startsWith('x') && args.b == 1"),
        _rule(name="indexed", when="args['k'] == 5"),
        _rule(name="counted", when="size(args) > 3"),
    )
    extra = {"c": "other", "d": [1, 2]}

    def refused_by(arguments: dict[str, Any]) -> str | None:
        refused = policies.refusal(_principal(), "t", arguments)
        return None if refused is None else str(refused.error.details["policy"])

    assert refused_by({"a": "xy", "b": 1, "k": 0}) == "named"
    assert refused_by({"a": "xy", "b": 2, "k": 5}) == "indexed"
    assert refused_by({"a": "xy", "b": 2, "k": 0, **extra}) == "counted"
    assert refused_by({"a": "xy", "b": 2, "k": 0}) is None
