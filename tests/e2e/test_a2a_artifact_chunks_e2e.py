"""An artifact a hosted agent streams in chunks (A2A 1.0's `append` and `lastChunk`), end to
end: the gateway under uvicorn on a real Redis, a worker over the worker API by hand, and a
caller reading SendStreamingMessage's events as they come. The caller sees each chunk with
its flags; the task holds each artifact whole, once, even when its chunks are written again
(as a worker running the task again after another died writes them)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.anyio

TENANT = "t-chunks"


@pytest.fixture(scope="module")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    config = Path(tmp_path_factory.mktemp("a2a-chunks")) / "conclave.toml"
    config.write_text(f'[[a2a_agent]]\nname = "scribe"\ntenant = "{TENANT}"\nlease_s = 10\n')
    with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as running:
        yield running


async def _events(answer: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in answer.aiter_lines():
        if line.startswith("data:"):
            yield json.loads(line[5:])["result"]


def _chunk(artifact_id: str, text: str, **flags: Any) -> dict[str, Any]:
    return {"artifact": {"artifactId": artifact_id, "parts": [{"text": text}]}, **flags}


async def test_a_chunked_artifact_streams_as_chunks_and_is_held_whole(
    stack: EmbeddedStack,
) -> None:
    caller_token = stack.token("t-reader", "reader", ["agent:scribe"])
    caller = {"Authorization": f"Bearer {caller_token}", "A2A-Version": "1.0"}
    worker = {"Authorization": f"Bearer {stack.token(TENANT, 'scribe', [])}"}
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "write"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    body["params"] = {"message": message}
    # One run's writes: X in three chunks, with Y, whole, between its second and third.
    run = [
        _chunk("x", "1", last_chunk=False),
        _chunk("x", "2", append=True, last_chunk=False),
        _chunk("y", "whole"),
        _chunk("x", "3", append=True, last_chunk=True),
    ]
    updates: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        async with http.stream("POST", "/a2a/scribe", json=body, headers=caller) as answer:
            events = _events(answer)
            task_id = (await anext(events))["task"]["id"]
            item = (await http.post("/v1/a2a/scribe/work/next?wait_s=5", headers=worker)).json()
            assert item["task_id"] == task_id
            for write in [*run, *run]:  # written again, as a second run would
                update = {"token": item["token"], "state": "TASK_STATE_WORKING", **write}
                written = await http.post(
                    f"/v1/a2a/scribe/work/{task_id}", json=update, headers=worker
                )
                assert written.status_code == 200, written.text
            done = {"token": item["token"], "state": "TASK_STATE_COMPLETED"}
            await http.post(f"/v1/a2a/scribe/work/{task_id}", json=done, headers=worker)
            with anyio.fail_after(10):
                async for event in events:
                    if "artifactUpdate" in event:
                        updates.append(event["artifactUpdate"])
        got = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        task = (await http.post("/a2a/scribe", json=got, headers=caller)).json()["result"]
    seen = [
        (u["artifact"]["artifactId"], u["artifact"]["parts"][0]["text"], u.get("append", False),
         u.get("lastChunk"))
        for u in updates
    ]  # fmt: skip
    one_run = [("x", "1", False, False), ("x", "2", True, False), ("y", "whole", False, None)]
    one_run.append(("x", "3", True, True))
    assert seen == one_run * 2  # each write as it came, with its flags
    assert [(a["artifactId"], [p["text"] for p in a["parts"]]) for a in task["artifacts"]] == [
        ("x", ["1", "2", "3"]),
        ("y", ["whole"]),
    ]  # whole, in the order first written, once
