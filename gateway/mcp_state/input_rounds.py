"""`InputRounds`: a 2026-07-28 client's tool call whose handshake-era server asks the client
something mid-call (sampling, elicitation, roots), turned into that revision's multi
round-trip requests.

The 2026-07-28 wire has no server-to-client requests: a server answers `InputRequiredResult`
and the client retries the call with `inputResponses`. A handshake-era server instead asks
and waits, mid-call. So a stateless-era `tools/call` whose client declared client features
(its `_meta` capabilities) runs in this object's task group, not in its request's task: the
request waits for the call's first outcome (`RoundTrip.first_round`). The call's result is
the answer, as for any call. A request of its server's is answered instead with
`InputRequiredResult`: the request under a gateway-issued key (`ClientRequests.issue`) in
`inputRequests`, and a `requestState` naming the running call, bound by an HMAC (a key
derived from the gateway's secret) to the caller's identity and an expiry: opaque to the
client and tamper-evident. The call keeps running, its server waiting for the answer.

The client's retry (`tools/call` with that `requestState` and `inputResponses`), on any
replica (`resume`), hands each response to the waiting call (`ClientRequests.answer`), then
waits for the call's next outcome, which the call pushes to a Redis list of its own
(`OUTCOMES`): its result (the answer, under the retry's id), or its server's next request
(another round, the same `requestState`). A retry whose state is not the caller's, forged or
expired is refused; one whose call ended without anyone reading its result waits for nothing
longer than the state's expiry (the call's time limit). The call's server never waits on a
client that does not retry: `CallEvents.request` answers it with an error by its deadline.

A server on the 2026-07-28 wire asks in rounds itself (`gateway.sources.mcp_http.upstream_rounds`):
its call ends with its own `InputRequiredResult` (`protocol.InputRound`), and nothing keeps
running between the rounds. The client is answered with the server's `inputRequests`
unchanged (its own keys) and a `requestState` of the gateway's (`relayed`): the server's own
state, the served tool's name and a digest of the call's arguments (the retry is the same
call, as the revision asks), the caller's identity and an expiry (`RELAY_TTL_S`), sealed
with AES-GCM under a key derived from the gateway's secret, so the client can neither read
the server's state nor change any of it. The retry is a new call of the same tool through
every stage (`admit_answer` opens its state once the caller is known: a state that is
another caller's, another call's, changed or expired is refused INVALID_REQUEST), on any
replica, and reaches the server with the client's `inputResponses` and the server's own
`requestState`, as the server handed it out (`protocol.InputAnswer`).

A `resources/read` or `prompts/get` forwarded to an MCP source takes the same rounds as a
tool call: a handshake-era server's request mid-read is a round of the gateway's (the read
running on meanwhile), an upstream's own round is relayed with its state bound to the method
and what it names (`RoundCall`: the read's URI, the prompt's name and arguments).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.responses import JSONResponse, Response

from gateway.gateway_error import GatewayError
from gateway.mcp_state.client_requests import ClientRequests
from gateway.pipeline import Pipeline, RequestContext
from protocol import (
    INPUT_REQUESTS,
    INPUT_REQUIRED,
    INPUT_RESPONSES,
    REQUEST_STATE,
    ErrorCode,
    InputAnswer,
    InputRound,
    Principal,
    RequestId,
)
from tools.calls import NO_CLIENT

log = logging.getLogger("conclave.gateway.mcp")

OUTCOMES = "conclave:mcp:round:{%s}"  # a parked call's next outcomes, JSON, oldest first
OUTCOME_TTL_S = 60  # an outcome nobody retried for is dropped this long after the call
GRACE_S = 5.0  # a retry waits this much past its call's time limit for its outcome
STATE_FIELD, RESPONSES_FIELD = REQUEST_STATE, INPUT_RESPONSES
RELAYED = "u1."  # how a relayed round's state begins (a running call's never does)
RELAY_TTL_S = 600  # how long a client may take to answer a server's own round
# What a relayed state binds its retry to: the tool (or `resources/read`, `prompts/get`) and
# its arguments (the read's `uri`, the prompt's `name` and `arguments`).
RoundCall = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class _Input:
    """A server's request, for the client to answer in its next round."""

    key: str
    request: dict[str, Any]  # {"method", "params"}


class RoundTrip:
    """One call that may take rounds: its side of `InputRounds`."""

    def __init__(self, rounds: InputRounds, ctx: RequestContext) -> None:
        self.rounds = rounds
        self.ctx = ctx
        self.id = secrets.token_urlsafe(16)
        self.expires = time.time() + 60.0  # the call's time limit, once dispatch knows it
        self._first, self._first_outcome = anyio.create_memory_object_stream[_Input | Response](1)
        self._answered_first = False

    async def first_round(self, pipeline: Pipeline, answer: Callable[[], Response]) -> Response:
        """Start the call; its answer, or `InputRequiredResult` for its server's request."""
        group = self.rounds.group
        assert group is not None, "InputRounds.run is not running"
        group.start_soon(self._run, pipeline, answer)
        with self._first_outcome:
            try:
                outcome = await self._first_outcome.receive()
            except anyio.EndOfStream:
                raise RuntimeError("the call ended without an outcome") from None
        if isinstance(outcome, Response):
            return outcome
        return JSONResponse(
            _rpc(self.ctx.request_id, self.rounds.input_required(self.ctx, self, outcome))
        )

    async def ask(self, method: str, params: dict[str, Any]) -> object:
        """The client's answer to a server's request, from the round it answers it in."""
        principal = self.ctx.require_principal()
        if self.ctx.invocation is not None:
            self.expires = time.time() + self.ctx.invocation.limits.timeout_ms / 1000
        key = self.rounds.requests.issue(principal)
        with self.rounds.requests.waiting(principal, key) as answers:
            try:
                await self._deliver(_Input(key, {"method": method, "params": params}))
            except (RedisError, OSError):
                return {"error": {"code": -32603, "message": "the client cannot be reached"}}
            return await answers.receive()

    async def _run(self, pipeline: Pipeline, answer: Callable[[], Response]) -> None:
        """The call, in the rounds' task group: whatever happens, nothing escapes into it."""
        try:
            await pipeline.run(self.ctx)  # never raises for a refusal or a tool's failure
            await self._deliver(answer())
        except Exception:  # a lost Redis at the last outcome: its retry times out
            log.exception("a call answered in rounds could not deliver its outcome")
        finally:
            self._first.close()  # a first round still waiting is not left waiting

    async def _deliver(self, outcome: _Input | Response) -> None:
        """The first outcome to the request waiting here; later ones to the retry's list."""
        if not self._answered_first:
            self._answered_first = isinstance(outcome, _Input)
            # Refused only when the request is gone (its client went: the call is cancelled).
            with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._first.send_nowait(outcome)
            return
        if isinstance(outcome, _Input):
            pushed: dict[str, Any] = {"input": {outcome.key: outcome.request}}
        else:
            pushed = {"status": outcome.status_code, "body": json.loads(bytes(outcome.body))}
        key = OUTCOMES % self.id
        await self.rounds.redis.rpush(key, json.dumps(pushed))
        await self.rounds.redis.expire(key, OUTCOME_TTL_S + int(self.expires - time.time()))


class InputRounds:
    def __init__(self, redis: Redis, requests: ClientRequests, secret: bytes) -> None:
        self.redis = redis
        self.requests = requests
        self._key = hmac.new(secret, b"conclave: request state", hashlib.sha256).digest()
        sealing = hmac.new(secret, b"conclave: relayed request state", hashlib.sha256).digest()
        self._sealing = AESGCM(sealing)
        self.group: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the calls that run between their rounds, for good."""
        async with anyio.create_task_group() as group:
            self.group = group
            task_status.started()
            await anyio.sleep_forever()

    def round_trip(self, ctx: RequestContext) -> RoundTrip:
        return RoundTrip(self, ctx)

    def input_required(
        self, ctx: RequestContext, call: RoundTrip, asked: _Input | dict[str, Any]
    ) -> dict[str, Any]:
        requests = asked if isinstance(asked, dict) else {asked.key: asked.request}
        state = self._state(ctx.require_principal(), call.id, call.expires)
        return {"resultType": INPUT_REQUIRED, "inputRequests": requests, STATE_FIELD: state}

    def relayed(self, ctx: RequestContext, asked: InputRound, call: RoundCall) -> dict[str, Any]:
        """The client's `InputRequiredResult` for a server's own round on `call`: its
        questions as it asked them, its state sealed into the gateway's."""
        principal = ctx.require_principal()
        sealed = {
            "tool": call[0],
            "arguments": _digest(call[1]),
            "state": asked.state,
            "expires": time.time() + RELAY_TTL_S,
        }
        nonce = secrets.token_bytes(12)
        body = self._sealing.encrypt(nonce, json.dumps(sealed).encode(), _bound_to(principal))
        state = RELAYED + base64.urlsafe_b64encode(nonce + body).decode().rstrip("=")
        result: dict[str, Any] = {"resultType": INPUT_REQUIRED}
        if asked.requests:
            result[INPUT_REQUESTS] = asked.requests
        return {**result, STATE_FIELD: state}

    @staticmethod
    def relays(state: object) -> bool:
        """Whether `state` is a relayed round's (else a running call's, or no state)."""
        return isinstance(state, str) and state.startswith(RELAYED)

    def admit_answer(
        self, params: dict[str, Any], retried: RoundCall
    ) -> Callable[[RequestContext], Any]:
        """The hook that opens a retry's relayed state once its caller is known (dispatch's
        `on_admitted`): the server's answers for the call (`retried`), or INVALID_REQUEST."""

        async def admit(ctx: RequestContext) -> None:
            state = self._unsealed(ctx.require_principal(), params.get(STATE_FIELD))
            call = {"tool": retried[0], "arguments": _digest(retried[1])}
            if state is None or any(state.get(k) != v for k, v in call.items()):
                raise _not_yours()
            responses = params.get(RESPONSES_FIELD)
            kept = state.get("state")
            answer = InputAnswer(
                dict(responses) if isinstance(responses, dict) else {},
                kept if isinstance(kept, str) else None,
            )
            ctx.client = replace(ctx.client or NO_CLIENT, answer=answer)

        return admit

    def _unsealed(self, principal: Principal, state: object) -> dict[str, Any] | None:
        if not self.relays(state):
            return None
        assert isinstance(state, str)
        try:
            raw = base64.urlsafe_b64decode(state[len(RELAYED) :] + "==")
            opened = self._sealing.decrypt(raw[:12], raw[12:], _bound_to(principal))
        except (InvalidTag, ValueError, binascii.Error):
            return None
        sealed = json.loads(opened)
        if not isinstance(sealed, dict) or float(sealed.get("expires", 0)) < time.time():
            return None
        return sealed

    def _state(self, principal: Principal, call_id: str, expires: float) -> str:
        body = f"{call_id}.{int(expires)}"
        return f"{body}.{self._mac(principal, body)}"

    def _mac(self, principal: Principal, body: str) -> str:
        signed = "\0".join((principal.tenant, principal.agent, body)).encode()
        return hmac.new(self._key, signed, hashlib.sha256).hexdigest()[:32]

    def _opened(self, principal: Principal, state: object) -> tuple[str, float]:
        """The call and expiry `state` names, if it is one this gateway gave `principal`."""
        if isinstance(state, str) and state.count(".") == 2:
            call_id, expires, mac = state.split(".")
            body = f"{call_id}.{expires}"
            good = hmac.compare_digest(mac.encode(), self._mac(principal, body).encode())
            if good and expires.isdigit() and int(expires) + GRACE_S > time.time():
                return call_id, float(expires)
        raise _not_yours()

    async def resume(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        """A retry's action: hand the call its client's responses, then its next outcome
        (the JSON-RPC answer under the retry's id)."""
        principal = ctx.require_principal()
        call_id, expires = self._opened(principal, params.get(STATE_FIELD))
        responses = params.get(RESPONSES_FIELD)
        for key, response in (responses if isinstance(responses, dict) else {}).items():
            if self.requests.issued_to(principal, key) and isinstance(response, dict):
                await self.requests.answer(principal, key, {"result": response})
        wait_s = max(1.0, expires + GRACE_S - time.time())
        popped = await self.redis.blpop([OUTCOMES % call_id], timeout=wait_s)
        if popped is None:
            raise GatewayError.of(
                ErrorCode.TOOL_TIMEOUT,
                "the call this requestState names gave no outcome before its time ran out",
            )
        outcome = json.loads(popped[1])
        if "input" in outcome:
            state = self._state(principal, call_id, expires)
            result = {"resultType": INPUT_REQUIRED, "inputRequests": outcome["input"]}
            return {"status": 200, "body": _rpc(ctx.request_id, {**result, STATE_FIELD: state})}
        return {"status": outcome["status"], "body": {**outcome["body"], "id": ctx.request_id}}


def _not_yours() -> GatewayError:
    return GatewayError.of(
        ErrorCode.INVALID_REQUEST,
        "requestState is not one this gateway gave you for this tool, still current (it was"
        " changed, is another caller's or another tool's, or its time ran out): call the tool"
        " again",
        param_hints={STATE_FIELD: "the requestState of your last InputRequiredResult"},
    )


def _digest(arguments: dict[str, Any]) -> str:
    """What a relayed state binds of the call's arguments: the retry is the same call."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _bound_to(principal: Principal) -> bytes:
    """What a sealed state is bound to: its caller (associated data, never in the state)."""
    return "\0".join((principal.tenant, principal.agent)).encode()


def _rpc(request_id: RequestId | None, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


__all__ = [
    "OUTCOMES",
    "RELAYED",
    "RELAY_TTL_S",
    "RESPONSES_FIELD",
    "STATE_FIELD",
    "InputRounds",
    "RoundCall",
    "RoundTrip",
]
