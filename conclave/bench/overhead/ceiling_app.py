"""The gateway bench's ceiling: a bare FastAPI endpoint under uvicorn doing one Redis call.

What a competent engineer would write for "an authenticated JSON call that touches Redis":
no stages, no sandbox, one `INCR` per request. Run in its own process on an inherited socket
(as the gateway is), and driven by the same load generator, it bounds from above what any
Python gateway on this machine can answer; the suite prints the gateway's share of it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request
from redis.asyncio import Redis


def create_app(redis_url: str) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.redis = Redis.from_url(redis_url)
        yield
        await app.state.redis.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, Any]:
        body = await request.json()
        await request.app.state.redis.incr("conclave:bench:ceiling")
        return {"result": body.get("arguments")}

    return app


@contextmanager
def ceiling_server(redis_url: str, timeout_s: float = 20.0) -> Iterator[str]:
    """Run the ceiling app in its own process on a free loopback port; yields its URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the stack's listener
    listener.bind(("127.0.0.1", 0))
    listener.listen(2048)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    fd = listener.fileno()
    command = [sys.executable, "-m", "conclave.bench.overhead.ceiling_app", str(fd), redis_url]
    process = subprocess.Popen(command, pass_fds=(fd,))
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.post(f"{url}/echo", json={}, timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the ceiling app did not start")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        listener.close()


def main() -> None:
    listener = socket.socket(fileno=int(sys.argv[1]))
    config = uvicorn.Config(
        create_app(sys.argv[2]), log_level="warning", access_log=False, proxy_headers=False
    )
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
