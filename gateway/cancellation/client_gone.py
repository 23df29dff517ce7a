"""Noticing that the HTTP client went away while its call runs.

Under the gateway's own uvicorn protocol (`gateway.http.CoalescingHttpToolsProtocol`), each
request's scope carries a hook slot (`CLIENT_GONE_HOOK`): the call puts its cancel there
while it runs, and the protocol calls it when the connection is lost before the answer was
sent. No task per call: a call's cost stays what it was.

Under any other server (httpx's ASGI transport in tests, another ASGI server), the watch is
a task: once a request's body is read, the next ASGI message its `receive` gives is
`http.disconnect`, when the client closes its connection (or once the answer is sent, after
the watch has ended).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import anyio
from starlette.types import Receive, Scope

from gateway.cancellation.call_cancel import CallCancel

CLIENT_GONE = "the client closed its connection"
# The scope key of the hook the server calls when the connection is lost mid-request; the
# server puts it in every scope (None: nothing to call) to say it calls it.
CLIENT_GONE_HOOK = "conclave.client_gone"


@asynccontextmanager
async def cancel_when_client_goes(
    scope: Scope, receive: Receive, cancel: CallCancel
) -> AsyncIterator[None]:
    """While the body runs, pull `cancel` if the client disconnects (`receive` must have
    given the whole request body already)."""
    if CLIENT_GONE_HOOK in scope:
        scope[CLIENT_GONE_HOOK] = partial(cancel.cancel, CLIENT_GONE)
        try:
            yield
        finally:
            scope[CLIENT_GONE_HOOK] = None
        return

    async def watch() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                cancel.cancel(CLIENT_GONE)
                return

    async with anyio.create_task_group() as watching:
        watching.start_soon(watch)
        try:
            yield
        finally:
            watching.cancel_scope.cancel()


__all__ = ["CLIENT_GONE", "CLIENT_GONE_HOOK", "cancel_when_client_goes"]
