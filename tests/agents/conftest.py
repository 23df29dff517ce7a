"""Fixtures for the SDK tests.

`gateway`: the real gateway app in-process (real Redis); `admin`: a client holding its admin
key. `chat_server`: a small real HTTP server speaking the OpenAI chat-completions format; it
proposes one `echo` tool call, then answers with what the tool returned, and keeps every
request it received so tests can check what went over the wire.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from agents.client import GatewayClient
from gateway.assembly import create_app
from gateway.config import Settings


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def reply_to(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        message: dict[str, Any] = {
            "role": "assistant",
            "content": f"done: {messages[-1]['content']}",
        }
    else:
        arguments = json.dumps({"message": messages[-1]["content"]})
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "echo", "arguments": arguments},
                }
            ],
        }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append((dict(self.headers), body))
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
        elif body.get("model") == "missing":
            self._send(404, {"error": {"message": "model 'missing' not found"}})
        else:
            self._send(200, reply_to(body))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server = ChatServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@dataclass
class Gateway:
    """The real gateway app in-process: its settings and a transport to reach it."""

    settings: Settings
    transport: httpx.AsyncBaseTransport
    base_url: str = "http://gateway"

    def admin(self) -> GatewayClient:
        key = self.settings.admin_key.get_secret_value()
        return GatewayClient(self.base_url, admin_key=key, transport=self.transport)


@pytest.fixture
async def gateway(settings: Settings, redis: Redis) -> AsyncIterator[Gateway]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield Gateway(settings, httpx.ASGITransport(app=app))


@pytest.fixture
async def admin(gateway: Gateway) -> AsyncIterator[GatewayClient]:
    async with gateway.admin() as client:
        yield client
