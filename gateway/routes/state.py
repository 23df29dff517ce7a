"""HTTP routes of shared state, `/v1/state/...`: thin handlers over `StateStore`.

Visibility rules, the same for every route: a namespace is addressed within the caller's
tenant only (another tenant's namespace is simply not there: 404); without read scope on a
namespace the caller gets the same 404 `NAMESPACE_NOT_FOUND` as for a missing one, so scopes
do not leak what exists; with read but not write scope, writes (namespace creation, leases,
commits) are 403 `NAMESPACE_FORBIDDEN`. Bodies: not JSON is 400 `PARSE_ERROR`, wrong shape
or a bad key is 422 `INVALID_ARGUMENTS`, over `max_body_bytes` (or a value over
`max_value_bytes`) is 413 `PAYLOAD_TOO_LARGE`. The session is `X-Conclave-Session`, by
default the token's id.
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ValidationError

from gateway.auth import authenticated
from gateway.errors import GatewayError, validation_hints
from gateway.settings import Settings
from gateway.state import Actor, StateStore, check_namespace
from gateway.state.keys import check_session
from gateway.state.refusals import namespace_not_found
from protocol.budget import SESSION_HEADER
from protocol.identity import Access, Principal
from protocol.serf import ErrorCode
from protocol.state import CommitRequest, LeaseRequest, NamespaceConfig

router = APIRouter(prefix="/v1/state", tags=["state"])
Body = TypeVar("Body", bound=BaseModel)


def _store(request: Request) -> StateStore:
    store: StateStore | None = getattr(request.app.state, "state_store", None)
    if store is None:  # built on first use: the Redis client exists only inside the lifespan
        settings: Settings = request.app.state.settings
        store = StateStore(request.app.state.redis, max_value_bytes=settings.max_value_bytes)
        request.app.state.state_store = store
    return store


def _authorize(principal: Principal, namespace: str, access: Access) -> None:
    check_namespace(namespace)
    if not principal.may_access(namespace, "read"):
        raise namespace_not_found(namespace)
    if access == "write" and not principal.may_access(namespace, "write"):
        raise GatewayError.of(
            ErrorCode.NAMESPACE_FORBIDDEN,
            f"your token may read but not write state namespace {namespace!r}: ask for "
            f"scope state:{namespace}:write",
        )


def _actor(request: Request, principal: Principal) -> Actor:
    session = request.headers.get(SESSION_HEADER) or principal.token_id
    return Actor(principal.tenant, principal.agent, check_session(session))


async def _body(request: Request, model: type[Body], *, empty_ok: bool = False) -> Body:
    raw = await request.body()
    limit: int = request.app.state.settings.max_body_bytes
    if len(raw) > limit:
        raise GatewayError.of(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"the request body is {len(raw)} bytes; the limit is {limit}",
        )
    if empty_ok and not raw.strip():
        raw = b"{}"
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise GatewayError.of(
                ErrorCode.PARSE_ERROR,
                "the request body is not valid JSON",
                param_hints=validation_hints(exc),
            ) from exc
        raise GatewayError.of(
            ErrorCode.INVALID_ARGUMENTS,
            f"the request body is not a valid {model.__name__}",
            param_hints=validation_hints(exc),
        ) from exc


def _json(model: BaseModel, status_code: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code, media_type="application/json")


class NamespaceView(BaseModel):
    namespace: str
    config: NamespaceConfig
    created: bool = False


@router.put("/{namespace}")
async def put_namespace(
    namespace: str, request: Request, principal: Principal = Depends(authenticated)
) -> Response:
    _authorize(principal, namespace, "write")
    config = await _body(request, NamespaceConfig, empty_ok=True)
    created = await _store(request).create_namespace(principal.tenant, namespace, config)
    return _json(
        NamespaceView(namespace=namespace, config=config, created=created), 201 if created else 200
    )


@router.get("/{namespace}")
async def get_namespace(
    namespace: str, request: Request, principal: Principal = Depends(authenticated)
) -> Response:
    _authorize(principal, namespace, "read")
    config = await _store(request).namespace(principal.tenant, namespace)
    return _json(NamespaceView(namespace=namespace, config=config))


class HistoryPage(BaseModel):
    entries: list[dict[str, object]]
    next_after: str | None


@router.get("/{namespace}/history")
async def get_history(
    namespace: str,
    request: Request,
    after: str | None = Query(default=None, pattern=r"^\d+-\d+$"),
    limit: int = Query(default=100, ge=1, le=1000),
    principal: Principal = Depends(authenticated),
) -> Response:
    _authorize(principal, namespace, "read")
    entries = await _store(request).history(principal.tenant, namespace, after=after, limit=limit)
    page = HistoryPage(
        entries=[e.model_dump(mode="json") for e in entries],
        next_after=entries[-1].commit_id if entries else after,
    )
    return _json(page)


@router.get("/{namespace}/{key:path}")
async def get_key(
    namespace: str, key: str, request: Request, principal: Principal = Depends(authenticated)
) -> Response:
    _authorize(principal, namespace, "read")
    result = await _store(request).read(_actor(request, principal), namespace, key)
    return _json(result)


@router.post("/{namespace}/leases")
async def post_leases(
    namespace: str, request: Request, principal: Principal = Depends(authenticated)
) -> Response:
    _authorize(principal, namespace, "write")
    body = await _body(request, LeaseRequest)
    actor = _actor(request, principal)
    grants = await _store(request).acquire(actor, namespace, body.keys, body.ttl_ms)
    return _json(grants)


@router.delete("/{namespace}/leases/{key:path}", status_code=204)
async def delete_lease(
    namespace: str, key: str, request: Request, principal: Principal = Depends(authenticated)
) -> Response:
    _authorize(principal, namespace, "write")
    await _store(request).release(_actor(request, principal), namespace, key)
    return Response(status_code=204)


@router.post("/{namespace}/commit")
async def post_commit(
    namespace: str, request: Request, principal: Principal = Depends(authenticated)
) -> Response:
    _authorize(principal, namespace, "write")
    body = await _body(request, CommitRequest)
    result = await _store(request).commit(_actor(request, principal), namespace, body)
    return _json(result)
