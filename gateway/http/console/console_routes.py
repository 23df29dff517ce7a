"""`/console`: the live console's routes, behind the admin key.

A GET without an admin session goes to the login form; the event stream answers
ADMIN_REQUIRED; a POST action needs the session and its form token (`console_session`).
Wrong keys at the login are throttled per client address (`login_throttle`). Logging out is
a POST that ends the session on the server; it needs no form token: another site's forged
post carries no cookie (SameSite=Strict), and all it could do is log the admin out.
Each page reads bounded windows of Redis and the audit stream (see each view's module).
The "try this tool" form posts like the other actions (session and form token) and calls
the tool through the pipeline as the agent it names (`try_view`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse, StreamingResponse
from redis.asyncio import Redis

from gateway.config import Settings, app_settings
from gateway.gateway_error import GatewayError
from gateway.http.body import read_body
from gateway.http.console.agents_view import agents_page
from gateway.http.console.approvals_view import approvals_page, decide_as_approver
from gateway.http.console.chains_view import chains_page
from gateway.http.console.charts_view import charts_page
from gateway.http.console.console_session import (
    SESSION_COOKIE,
    SESSION_TTL_S,
    ConsoleSession,
    admin_key_matches,
    end_session,
    form_token_matches,
    new_session,
    session_of,
)
from gateway.http.console.feed_view import feed_events, feed_page
from gateway.http.console.login_throttle import (
    clear_failures,
    count_failure,
    refuse_if_throttled,
)
from gateway.http.console.namespaces_view import check_namespace_of, namespace_page, namespaces_page
from gateway.http.console.page_layout import esc, page
from gateway.http.console.quotas_view import quotas_page
from gateway.http.console.sandboxes_view import sandboxes_page
from gateway.http.console.tools_view import tools_page
from gateway.http.console.try_view import call_as_agent, try_page
from gateway.http.gateway_parts import gateway_parts
from gateway.identity import AgentDirectory
from protocol import ADMIN_KEY_HEADER, ErrorCode

router = APIRouter(prefix="/console", include_in_schema=False)

MAX_FORM_BYTES = 8192

_LOGIN_FORM = """<form method="post" action="/console/login">
<label>Admin key <input type="password" name="admin_key" autofocus></label>
<button>Log in</button></form>
<p class="note">The gateway's admin key (CONCLAVE_ADMIN_KEY). Scripts may send it in the
{header} header instead.</p>"""

Page = Callable[[Request, ConsoleSession], Awaitable[Response]]


def _to_login() -> Response:
    return RedirectResponse("/console/login", status_code=303)


async def _form(request: Request, limit: int = MAX_FORM_BYTES) -> dict[str, str]:
    body = await read_body(request, limit)
    # Blank fields kept: an argument left empty is the empty string, not a missing one.
    parsed = parse_qs(body.decode(errors="replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


async def _acting(
    request: Request, limit: int = MAX_FORM_BYTES
) -> tuple[ConsoleSession, dict[str, str]] | Response:
    """A POST action's session and form, or the answer refusing it."""
    session = await session_of(request)
    if session is None:
        return _to_login()
    form = await _form(request, limit)
    if not form_token_matches(request, session, form.get("form_token", "")):
        body = "<p>This form is stale or came from elsewhere: reload the page and try again.</p>"
        return page("", "Refused", body, status_code=403)
    return session, form


def _token(request: Request, session: ConsoleSession) -> str:
    settings: Settings = app_settings(request.app)
    return session.form_token(settings)


@router.get("")
async def console_home() -> Response:
    return RedirectResponse("/console/feed", status_code=303)


@router.get("/login")
async def login_form(request: Request) -> Response:
    if await session_of(request) is not None:
        return RedirectResponse("/console/feed", status_code=303)
    return page("login", "Conclave console", _LOGIN_FORM.format(header=esc(ADMIN_KEY_HEADER)))


@router.post("/login")
async def login(request: Request) -> Response:
    settings: Settings = app_settings(request.app)
    redis: Redis = gateway_parts(request.app).redis
    address = request.client.host if request.client else ""
    await refuse_if_throttled(redis, settings, address)  # before the key is looked at
    form = await _form(request)
    if not admin_key_matches(settings, form.get("admin_key", "")):
        await count_failure(redis, settings, address)
        body = '<p class="refused">That is not the admin key.</p>' + _LOGIN_FORM.format(
            header=esc(ADMIN_KEY_HEADER)
        )
        return page("login", "Conclave console", body, status_code=401)
    await clear_failures(redis, address)
    _, cookie = new_session(settings)
    answer = RedirectResponse("/console/feed", status_code=303)
    answer.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=SESSION_TTL_S,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return answer


@router.post("/logout")
async def logout(request: Request) -> Response:
    session = await session_of(request)
    if session is not None:
        await end_session(request, session)
    answer = RedirectResponse("/console/login", status_code=303)
    answer.delete_cookie(SESSION_COOKIE, path="/console")
    return answer


def _viewed(view: Page) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        session = await session_of(request)
        return _to_login() if session is None else await view(request, session)

    return endpoint


router.add_api_route("/agents", _viewed(lambda r, s: agents_page(r, _token(r, s))), methods=["GET"])
router.add_api_route("/tools", _viewed(lambda r, s: tools_page(r)), methods=["GET"])
router.add_api_route(
    "/feed", _viewed(lambda r, s: feed_page(r, r.query_params.get("before"))), methods=["GET"]
)
router.add_api_route("/namespaces", _viewed(lambda r, s: namespaces_page(r)), methods=["GET"])
router.add_api_route("/chains", _viewed(lambda r, s: chains_page(r)), methods=["GET"])
router.add_api_route("/sandboxes", _viewed(lambda r, s: sandboxes_page(r)), methods=["GET"])
router.add_api_route("/charts", _viewed(lambda r, s: charts_page(r)), methods=["GET"])
router.add_api_route("/quotas", _viewed(lambda r, s: quotas_page(r)), methods=["GET"])
router.add_api_route(
    "/try",
    _viewed(lambda r, s: try_page(r, _token(r, s), r.query_params.get("tool", ""))),
    methods=["GET"],
)


router.add_api_route(
    "/approvals", _viewed(lambda r, s: approvals_page(r, _token(r, s))), methods=["GET"]
)


@router.post("/approvals/decide")
async def decide_approval(request: Request) -> Response:
    acting = await _acting(request)
    if isinstance(acting, Response):
        return acting
    session, form = acting
    notice = await decide_as_approver(request, form)
    return await approvals_page(request, _token(request, session), notice)


@router.post("/try")
async def try_tool(request: Request) -> Response:
    settings: Settings = app_settings(request.app)
    acting = await _acting(request, settings.max_body_bytes)  # arguments may be long
    if isinstance(acting, Response):
        return acting
    session, form = acting
    outcome = await call_as_agent(request, form)
    return await try_page(request, _token(request, session), form.get("tool", ""), form, outcome)


@router.get("/namespaces/{tenant}/{namespace}")
async def namespace_detail(tenant: str, namespace: str, request: Request) -> Response:
    session = await session_of(request)
    if session is None:
        return _to_login()
    return await namespace_page(request, tenant, namespace, _token(request, session), None)


@router.post("/namespaces/{tenant}/{namespace}/check")
async def namespace_check(tenant: str, namespace: str, request: Request) -> Response:
    acting = await _acting(request)
    if isinstance(acting, Response):
        return acting
    session, _ = acting
    report = await check_namespace_of(request, tenant, namespace)
    return await namespace_page(request, tenant, namespace, _token(request, session), report)


@router.post("/agents/revoke")
async def revoke(request: Request) -> Response:
    acting = await _acting(request)
    if isinstance(acting, Response):
        return acting
    session, form = acting
    tenant, agent = form.get("tenant", ""), form.get("agent", "")
    directory: AgentDirectory = gateway_parts(request.app).agents
    record = await directory.revoke(tenant, agent)
    notice = (
        f"Revoked {tenant}/{agent}: its next call is refused."
        if record is not None
        else f"No agent {tenant}/{agent} is registered."
    )
    return await agents_page(request, _token(request, session), notice)


@router.get("/feed/events")
async def events(request: Request) -> StreamingResponse:
    if await session_of(request) is None:
        raise GatewayError.of(
            ErrorCode.ADMIN_REQUIRED,
            "the live feed is for admins: log in at /console/login, or send the admin key in"
            f" {ADMIN_KEY_HEADER}",
        )
    return await feed_events(request)


__all__ = ["router"]
