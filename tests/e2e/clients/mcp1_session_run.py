"""The official `mcp` client of the 1.x line (the one langchain-mcp-adapters pins, installed
in the `langchain` client venv) on one session: a refused tool, an unknown tool and arguments
that do not fit, each followed by a call that must still work on the same session (1.x ended
a session on an HTTP 4xx). Run by tests/e2e/test_mcp_client_matrix.py with CONCLAVE_URL and
CONCLAVE_ADMIN_KEY set; prints one JSON object: what each call returned, or what it raised.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
from datetime import timedelta
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

URL, ADMIN_KEY = os.environ["CONCLAVE_URL"], os.environ["CONCLAVE_ADMIN_KEY"]
CALLS = [
    ("run_shell", {"command": "id"}),
    ("echo", {"message": "after a refused tool"}),
    ("no_such_tool", {}),
    ("echo", {"message": "after an unknown tool"}),
    ("echo", {"text": "the wrong argument"}),
    ("echo", {"message": "after bad arguments"}),
]


def _seen(result: Any) -> dict[str, Any]:
    text = "\n".join(block.text for block in result.content if block.type == "text")
    return {"is_error": result.isError, "text": text}


async def main() -> None:
    body = {"tenant": "acme", "agent": "mcp1-desk", "tools": ["echo", "read_file"]}
    headers = {"X-Conclave-Admin-Key": ADMIN_KEY}
    async with httpx.AsyncClient(timeout=30) as http:
        registered = await http.post(f"{URL}/v1/agents", json=body, headers=headers)
    registered.raise_for_status()
    auth = {"Authorization": f"Bearer {registered.json()['token']}"}
    report: dict[str, Any] = {"mcp": importlib.metadata.version("mcp"), "calls": []}
    try:
        async with (
            streamablehttp_client(f"{URL}/mcp", headers=auth) as (read, write, _),
            ClientSession(read, write, read_timeout_seconds=timedelta(seconds=60)) as session,
        ):
            await session.initialize()
            report["tools"] = sorted(tool.name for tool in (await session.list_tools()).tools)
            for name, arguments in CALLS:
                report["calls"].append(_seen(await session.call_tool(name, arguments)))
            await session.send_ping()
        report["outcome"] = "ended"
    except BaseException as exc:  # what the user's program would die of
        report["outcome"] = f"raised {type(exc).__name__}: {exc}"
    print(json.dumps(report))


asyncio.run(main())
