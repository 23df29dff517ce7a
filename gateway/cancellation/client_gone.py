"""Noticing that the HTTP client went away while its call runs.

Once a request's body is read, the next ASGI message its `receive` gives is
`http.disconnect`: when the client closes its connection (uvicorn), or once the answer is
sent (uvicorn, and httpx's ASGI transport). `cancel_when_client_goes` waits for that message
alongside the call and pulls the call's `CallCancel` if it comes first; the watch ends with
the call, before the answer is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.types import Receive

from gateway.cancellation.call_cancel import CallCancel

CLIENT_GONE = "the client closed its connection"


@asynccontextmanager
async def cancel_when_client_goes(receive: Receive, cancel: CallCancel) -> AsyncIterator[None]:
    """While the body runs, pull `cancel` if the client disconnects (`receive` must have
    given the whole request body already)."""

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


__all__ = ["CLIENT_GONE", "cancel_when_client_goes"]
