"""`UpstreamListener`: what an `mcp_http` upstream tells the gateway unasked.

Each upstream that issues sessions gets one more session of the gateway's, kept for its
news: after `initialize` the listener opens the session's GET stream (streamable HTTP's
standalone SSE stream) and reads it for good. There it learns:

- `notifications/resources/updated`: a resource the gateway subscribed to changed
  (`SourceEvents.resource_updated`, which relays it to the identities that subscribed);
- `notifications/{tools,resources,prompts}/list_changed`: the upstream's lists changed; the
  gateway lists them again on this session (`HttpUpstream.discover`), serves the tools now
  listed and withdraws those dropped (`on_rediscovered`), then says so
  (`SourceEvents.list_changed`).

Subscriptions are the gateway's, made on this session: of all the replicas' listeners, the
one that claims a resource (`SourceEvents.claim`) subscribes to it on the upstream, once
whoever asks, and keeps its claim while its session lives (it gives it up when the session
ends). Every `SWEEP_S` (and when its session opens: a restarted upstream forgot them) each
listener `sweep`s: it unsubscribes what it holds that no identity holds any more (the last
subscriber unsubscribed on any replica, or its hold ran out), so the upstream is told once,
by the session that subscribed; it subscribes to what some identity holds that no listener
holds (a replica that went away left it); and a resource subscribed again later is claimed
and subscribed anew. A stateless upstream has no session and so no news: its listener stops,
said once in the log. A lost stream is opened again after `RECONNECT_S` (the upstream
restarting) if it had been open `STEADY_S`, else after the source's `retry_s`. An upstream
that serves no GET stream (405) has no news either.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import httpx

from gateway.sources.mcp_http.http_upstream import HttpUpstream
from gateway.sources.mcp_http.mcp_session import McpSession
from gateway.sources.shared import Http1Pool, credential_headers

log = logging.getLogger("conclave.upstreams")

RECONNECT_S = 0.5  # after a stream that was open ends: the upstream may be restarting
STEADY_S = 5.0  # a stream open this long had been working: reopen it soon when it ends
# How often a listener puts its upstream subscriptions in step with what identities hold:
# bounds how long the upstream keeps a resource nobody is subscribed to any more.
SWEEP_S = 5.0
LIST_KINDS = ("tools", "resources", "prompts")
_UPDATED = "notifications/resources/updated"


class SourceEvents(Protocol):
    """Where the listeners' news goes (`gateway.mcp_state.subscriptions`)."""

    async def resource_updated(self, source: str, uri: str) -> None: ...

    async def list_changed(self, source: str, kind: str) -> None: ...

    async def subscribed(self, source: str) -> list[str]:
        """The source's own URIs some identity is subscribed to."""
        ...

    async def claim(self, source: str, uri: str, listener: str) -> bool:
        """Whether `listener` holds the upstream's subscription of `uri` (claimed now, or
        its own already, kept for longer); False when another listener holds it."""
        ...

    async def release(self, source: str, uri: str, listener: str) -> None:
        """Give up `listener`'s claim of `uri` (another's is left alone)."""
        ...


class UpstreamListener:
    def __init__(
        self,
        upstream: HttpUpstream,
        events: SourceEvents,
        on_rediscovered: Callable[[HttpUpstream], None],
    ) -> None:
        self.upstream = upstream
        self.events = events
        self.on_rediscovered = on_rediscovered
        self.session: McpSession | None = None
        self.stateless = False  # the upstream issues no session: it cannot tell us anything
        self.id = uuid.uuid4().hex  # its claims' owner, across its sessions
        self.held: set[str] = set()  # what its open session is subscribed to on the upstream
        self._changing = anyio.Lock()  # one change of `held` at a time: the upstream's order

    @property
    def offers_subscriptions(self) -> bool:
        """Whether the upstream said it takes `resources/subscribe` (once connected)."""
        if self.session is None:
            return not self.stateless  # not known yet: the subscription is kept for later
        resources = self.session.capabilities.get("resources")
        return isinstance(resources, dict) and bool(resources.get("subscribe"))

    async def subscribe(self, uri: str, *, subscribe: bool = True) -> None:
        """An identity subscribed to `uri`: subscribe on the upstream now unless a listener
        holds it already. Or (`subscribe` False) its last subscriber unsubscribed here:
        unsubscribe now if this listener holds it (the holder's next sweep does, else). Not
        connected: the next (re)open's sweep does it."""
        session = self.session
        if session is None:
            return
        async with self._changing:
            if not subscribe:
                if uri in self.held:
                    await self._unsubscribe(session, uri)
            elif uri not in self.held and await self.events.claim(self.name, uri, self.id):
                await self._subscribe(session, uri)

    async def sweep(self) -> None:
        """Put this listener's upstream subscriptions in step with what identities hold:
        unsubscribe each it holds that none holds any more, keep its claim on the others,
        and subscribe each held by some identity and by no listener."""
        session = self.session
        if session is None:
            return
        async with self._changing:
            live = set(await self.events.subscribed(self.name))
            for uri in sorted(self.held - live):
                await self._unsubscribe(session, uri)
            for uri in sorted(live):
                if await self.events.claim(self.name, uri, self.id):
                    if uri not in self.held:
                        await self._subscribe(session, uri)
                elif uri in self.held:  # another took it while this one was away
                    self.held.discard(uri)
                    await self._request(session, "resources/unsubscribe", uri)

    async def _subscribe(self, session: McpSession, uri: str) -> None:
        """Subscribe on the upstream what this listener has claimed; a refusal gives the
        claim back (and is the caller's error)."""
        try:
            await self._request(session, "resources/subscribe", uri)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.events.release(self.name, uri, self.id)
            raise
        self.held.add(uri)

    async def _unsubscribe(self, session: McpSession, uri: str) -> None:
        self.held.discard(uri)
        await self.events.release(self.name, uri, self.id)
        await self._request(session, "resources/unsubscribe", uri)

    async def _release(self, uris: set[str]) -> None:
        """Give up the claims of a session that ended (lost, or the replica shutting down), so
        the next sweep of any replica subscribes them again at once, not when they lapse."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.upstream.timeout_s):
            for uri in uris:
                try:
                    await self.events.release(self.name, uri, self.id)
                except Exception as exc:  # Redis gone first: the claim lapses by itself
                    log.debug("mcp_http source %r: claim kept (%s)", self.name, _reason(exc))
                    return

    async def _request(self, session: McpSession, method: str, uri: str) -> None:
        with anyio.fail_after(self.upstream.timeout_s):
            await session.request(method, {"uri": uri})

    async def run(self) -> None:
        """Listen for good (until the upstream turns out to be stateless)."""
        opened_before = False
        while True:
            opened, began = False, anyio.current_time()
            try:
                async with self._session() as session:
                    if session.session_id is None:
                        self.stateless = True
                        log.info("mcp_http source %r issues no session: no news", self.name)
                        return
                    if opened_before:  # it may have changed while we were away
                        await self._rediscover(session)
                    self.session, self.held = session, set()  # a new session holds nothing
                    try:
                        await self.sweep()  # its claims subscribed again, and orphans taken
                        opened = await self._read_sweeping(session)
                    except _Streamed as lost:  # the stream was open: worth a line
                        opened = True
                        why = _reason(lost.__cause__ or lost)
                        log.info("mcp_http source %r: news stream lost (%s)", self.name, why)
                    finally:
                        held, self.session, self.held = self.held, None, set()
                        await self._release(held)  # its session ends: another may take them
                    if not opened:  # the upstream serves no GET stream: no news
                        self.stateless = True
                        log.info("mcp_http source %r serves no event stream: no news", self.name)
                        return
            except Exception as exc:  # an unreachable upstream is said by its own pool
                log.debug("mcp_http source %r: no news stream (%s)", self.name, _reason(exc))
            opened_before = opened_before or opened
            # Soon after a stream that lasted (the upstream restarting); a stream that ends as
            # soon as it opens would otherwise cost the upstream a session every RECONNECT_S.
            lasted = anyio.current_time() - began >= STEADY_S
            await anyio.sleep(RECONNECT_S if opened and lasted else self.upstream.retry_s)

    @property
    def name(self) -> str:
        return self.upstream.name

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[McpSession]:
        source = self.upstream.source
        timeout_s = self.upstream.timeout_s
        http = Http1Pool(str(source.url), credential_headers(source), connect_timeout_s=timeout_s)
        try:
            async with anyio.create_task_group() as background:
                session = McpSession(http, background, notify_timeout_s=timeout_s)
                with anyio.fail_after(timeout_s):
                    await session.open()
                try:
                    yield session
                finally:
                    with anyio.CancelScope(shield=True):
                        await session.close()
        finally:
            await http.aclose()

    async def _read_sweeping(self, session: McpSession) -> bool:
        """`_read`, sweeping every `SWEEP_S` meanwhile."""
        outcome: bool | _Streamed
        async with anyio.create_task_group() as sweeping:
            sweeping.start_soon(self._sweep_every)
            try:
                outcome = await self._read(session)
            except _Streamed as lost:  # raised as it is, not in a group
                outcome = lost
            finally:
                sweeping.cancel_scope.cancel()
        if isinstance(outcome, _Streamed):
            raise outcome
        return outcome

    async def _sweep_every(self) -> None:
        while True:
            await anyio.sleep(SWEEP_S)
            try:
                await self.sweep()
            except Exception as exc:  # Redis or the upstream busy: the next sweep tries again
                log.debug("mcp_http source %r: sweep failed (%s)", self.name, _reason(exc))

    async def _read(self, session: McpSession) -> bool:
        """Read the session's GET stream until it ends, acting on each message; False when
        the upstream serves none (405). A failure once it is open is raised as `_Streamed`."""
        source = self.upstream.source
        headers = {**credential_headers(source), **session.headers}
        headers["accept"] = "text/event-stream"
        headers.pop("content-type", None)
        timeout = httpx.Timeout(self.upstream.timeout_s, read=None)  # news comes when it comes
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("GET", str(source.url), headers=headers) as answer,
        ):
            if answer.status_code == 405:
                return False
            if answer.status_code != 200:
                raise ConnectionError(f"GET stream answered HTTP {answer.status_code}")
            data: list[str] = []
            try:
                async for line in answer.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].removeprefix(" "))
                    elif not line and data:
                        await self._act(session, "\n".join(data))
                        data = []
            except Exception as exc:
                raise _Streamed from exc
        return True

    async def _act(self, session: McpSession, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        method: str = message["method"]
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if "id" in message:  # a request of the upstream's: only ping is answered
            if method == "ping":
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
                await session.http.request("POST", session.headers, json.dumps(answer).encode())
            return
        if method == _UPDATED and isinstance(params.get("uri"), str):
            await self.events.resource_updated(self.name, params["uri"])
            return
        kind = method.removeprefix("notifications/").removesuffix("/list_changed")
        if method.endswith("/list_changed") and kind in LIST_KINDS:
            await self._rediscover(session)
            await self.events.list_changed(self.name, kind)

    async def _rediscover(self, session: McpSession) -> None:
        """List everything again, and serve what is listed now."""
        with anyio.fail_after(self.upstream.timeout_s):
            await self.upstream.discover(session)
        self.on_rediscovered(self.upstream)


class _Streamed(Exception):
    """The stream was open when its cause (`__cause__`) ended it."""


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


__all__ = ["LIST_KINDS", "RECONNECT_S", "SWEEP_S", "SourceEvents", "UpstreamListener"]
