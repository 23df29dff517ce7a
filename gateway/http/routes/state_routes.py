"""HTTP routes of shared state, `/v1/state/...`: thin handlers over `StateStore`.

Every route runs the gateway's pipeline: authenticate, scope (the session is
`X-Conclave-Session`, by default the token's id), authorize, budget (the revocation check and
one token from the identity's state bucket, shared by all its namespaces: 429 `RATE_LIMITED`
with `retry_after_ms` when empty), the store operation as the dispatch stage's action, and
account (audit, metrics).

Visibility rules, enforced by the authorize stage, the same for every route: a namespace is
addressed within the caller's tenant only (another tenant's namespace is simply not there:
404); without read scope on a namespace the caller gets the same 404 `NAMESPACE_NOT_FOUND` as
for a missing one, so scopes do not leak what exists; with read but not write scope, writes
(namespace creation, leases, commits) are 403 `NAMESPACE_FORBIDDEN`. Bodies: not JSON is 400
`PARSE_ERROR`, the wrong shape (a bad key in it too) is 400 `INVALID_REQUEST`, as on every
route (`gateway.gateway_error.translate`); a bad key or name in the path is 422
`INVALID_ARGUMENTS`; over `max_body_bytes` (or
a value over `max_value_bytes`, a commit over `state_max_writes` or `state_max_read_set`) is
413 `PAYLOAD_TOO_LARGE`; a read of one more key than a session's read log holds
(`state_max_read_log`) is 400 `INVALID_REQUEST`; a commit that would take the tenant over its
quota (`state_quota_keys`, `state_quota_bytes`) is 507 `STATE_QUOTA_EXCEEDED`; a full Redis is
503 `STATE_UNAVAILABLE`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ValidationError

from gateway.config import app_settings
from gateway.gateway_error import GatewayError
from gateway.http.body import read_body, refuse_before_body
from gateway.http.gateway_parts import gateway_parts
from gateway.http.hot_routes import hot_route
from gateway.http.responses import refusal
from gateway.pipeline import Pipeline, RequestContext
from gateway.state import Actor, StateStore
from protocol import (
    Access,
    CommitRequest,
    CommitResult,
    LeaseGrants,
    LeaseRequest,
    NamespaceConfig,
    ReadResult,
)

router = APIRouter(prefix="/v1/state", tags=["state"])
Body = TypeVar("Body", bound=BaseModel)
Operation = Callable[[Actor], Awaitable[Response]]


def _store(request: Request) -> StateStore:
    store: StateStore = gateway_parts(request.app).state_store
    return store


async def _body(request: Request, model: type[Body], *, empty_ok: bool = False) -> Body:
    """The body as `model`; one that does not parse raises pydantic's ValidationError, which
    `gateway.gateway_error.translate` answers as it does for every route."""
    raw = await read_body(request, app_settings(request.app).max_body_bytes)
    if empty_ok and not raw.strip():
        raw = b"{}"
    return model.model_validate_json(raw)


async def _through_pipeline(
    request: Request,
    name: str,
    namespace: str,
    access: Access,
    operation: Operation | None,
    input_error: BaseException | None = None,
) -> Response:
    async def perform(ctx: RequestContext) -> Response:
        assert ctx.tool_context is not None and operation is not None  # scope ran; body parsed
        principal = ctx.tool_context.principal
        return await operation(
            Actor(principal.tenant, principal.agent, ctx.tool_context.session_id)
        )

    ctx = RequestContext(
        "http",
        f"state:{name}",
        request.headers,
        namespace=namespace,
        access=access,
        action=perform,
        input_error=input_error,
    )
    pipeline: Pipeline = gateway_parts(request.app).pipeline
    await pipeline.run(ctx)
    if ctx.error is not None:
        return refusal(ctx.error)
    response: Response = ctx.result
    return response


async def _write_with_body(
    request: Request,
    name: str,
    namespace: str,
    model: type[Body],
    operation: Callable[[Actor, Body], Awaitable[Response]],
    *,
    empty_ok: bool = False,
) -> Response:
    """A write whose body is parsed first: a body that does not parse is refused through
    the pipeline too, so it is authenticated and audited like any other refusal."""
    try:
        limit = app_settings(request.app).max_body_bytes
        await refuse_before_body(request, "state:*", limit)
        body = await _body(request, model, empty_ok=empty_ok)
    except (GatewayError, ValidationError) as exc:
        return await _through_pipeline(request, name, namespace, "write", None, exc)

    async def perform(actor: Actor) -> Response:
        return await operation(actor, body)

    return await _through_pipeline(request, name, namespace, "write", perform)


def _json(model: BaseModel, status_code: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code, media_type="application/json")


class NamespaceView(BaseModel):
    namespace: str
    config: NamespaceConfig
    created: bool = False


@router.put("/{namespace}")
async def put_namespace(namespace: str, request: Request) -> Response:
    async def create(actor: Actor, config: NamespaceConfig) -> Response:
        created = await _store(request).create_namespace(actor.tenant, namespace, config)
        view = NamespaceView(namespace=namespace, config=config, created=created)
        return _json(view, 201 if created else 200)

    return await _write_with_body(
        request, "create", namespace, NamespaceConfig, create, empty_ok=True
    )


@router.get("/{namespace}")
async def get_namespace(namespace: str, request: Request) -> Response:
    async def describe(actor: Actor) -> Response:
        config = await _store(request).namespace(actor.tenant, namespace)
        return _json(NamespaceView(namespace=namespace, config=config))

    return await _through_pipeline(request, "namespace", namespace, "read", describe)


class HistoryPage(BaseModel):
    entries: list[dict[str, object]]
    next_after: str | None


@router.get("/{namespace}/history")
async def get_history(
    namespace: str,
    request: Request,
    after: str | None = Query(default=None, pattern=r"^\d+-\d+$"),
    limit: int = Query(default=100, ge=1, le=1000),
) -> Response:
    async def history(actor: Actor) -> Response:
        entries = await _store(request).history(actor.tenant, namespace, after=after, limit=limit)
        page = HistoryPage(
            entries=[e.model_dump(mode="json") for e in entries],
            next_after=entries[-1].commit_id if entries else after,
        )
        return _json(page)

    return await _through_pipeline(request, "history", namespace, "read", history)


class KeyVersion(BaseModel):
    key: str
    version: int


class KeyPage(BaseModel):
    keys: list[KeyVersion]
    next_after: str | None


@router.get("/{namespace}/keys")
async def get_keys(
    namespace: str,
    request: Request,
    after: str | None = Query(default=None, max_length=256),
    limit: int = Query(default=100, ge=1, le=1000),
) -> Response:
    """The namespace's written keys with their versions, in name order (the read right on the
    namespace; no value is read, so nothing is logged as read)."""

    async def listing(actor: Actor) -> Response:
        found = await _store(request).list_keys(actor.tenant, namespace, after=after, limit=limit)
        page = KeyPage(
            keys=[KeyVersion(key=key, version=version) for key, version in found.keys],
            next_after=found.next_after,
        )
        return _json(page)

    return await _through_pipeline(request, "keys", namespace, "read", listing)


@hot_route(router, "/v1/state/{namespace}/{key:path}", "GET", answer=ReadResult)
async def get_key(request: Request) -> Response:
    """Read a key: its value and version (0: the key does not exist yet)."""
    namespace, key = request.path_params["namespace"], request.path_params["key"]

    async def read(actor: Actor) -> Response:
        return _json(await _store(request).read(actor, namespace, key))

    return await _through_pipeline(request, "read", namespace, "read", read)


@hot_route(router, "/v1/state/{namespace}/leases", "POST", body=LeaseRequest, answer=LeaseGrants)
async def post_leases(request: Request) -> Response:
    """Take write leases on keys (pessimistic namespaces): each with a fencing token."""
    namespace = request.path_params["namespace"]

    async def acquire(actor: Actor, body: LeaseRequest) -> Response:
        return _json(await _store(request).acquire(actor, namespace, body.keys, body.ttl_ms))

    return await _write_with_body(request, "lease", namespace, LeaseRequest, acquire)


@hot_route(router, "/v1/state/{namespace}/leases/{key:path}", "DELETE", status=204)
async def delete_lease(request: Request) -> Response:
    """Release a lease this agent holds."""
    namespace, key = request.path_params["namespace"], request.path_params["key"]

    async def release(actor: Actor) -> Response:
        await _store(request).release(actor, namespace, key)
        return Response(status_code=204)

    return await _through_pipeline(request, "release", namespace, "write", release)


@hot_route(router, "/v1/state/{namespace}/commit", "POST", body=CommitRequest, answer=CommitResult)
async def post_commit(request: Request) -> Response:
    """Commit writes atomically, checked against what this session read."""
    namespace = request.path_params["namespace"]

    async def commit(actor: Actor, body: CommitRequest) -> Response:
        return _json(await _store(request).commit(actor, namespace, body))

    return await _write_with_body(request, "commit", namespace, CommitRequest, commit)
