"""The A2A TCK's scenario behaviours as a Conclave-hosted agent: a worker written with the SDK
(`serve_a2a`), which the kit tests through the gateway (tests/conformance/test_a2a_tck.py).

The kit names the behaviour it wants by its message id's prefix, as its reference agent
(`sut/a2a-python/sut_agent.py` in the kit) reads it; this worker answers each the same way,
with what the SDK gives any agent: a reply's message, state and artifacts, or a message
alone. Run as `python tests/a2a_tck_hosted_agent.py GATEWAY_URL AGENT_NAME` with the agent's
own token in `CONCLAVE_TOKEN`; it serves until killed.
"""

from __future__ import annotations

import os
import sys

import anyio

from agents import Artifact, GatewayClient, Reply, WorkItem, serve_a2a

_FILE = Artifact.file(b"tck", filename="output.txt", media_type="text/plain")
_REPLIES: dict[str, Reply] = {  # by message id prefix, the longest first where one holds another
    "tck-stream-artifact-chunked": Reply(artifacts=(Artifact.text("chunk-1 chunk-2"),)),
    "tck-stream-artifact-text": Reply(artifacts=(Artifact.text("Streamed text content"),)),
    "tck-stream-artifact-file": Reply(artifacts=(_FILE,)),
    "tck-stream-ordering-001": Reply(artifacts=(Artifact.text("Ordered output"),)),
    "tck-artifact-file-url": Reply(
        artifacts=(
            Artifact.file_url(
                "https://example.com/output.txt", filename="output.txt", media_type="text/plain"
            ),
        )
    ),
    "tck-message-response": Reply("Direct message response", as_message=True),
    "tck-input-required": Reply(state="TASK_STATE_INPUT_REQUIRED"),
    "tck-complete-task": Reply("Hello from TCK"),
    "tck-artifact-text": Reply(artifacts=(Artifact.text("Generated text content"),)),
    "tck-artifact-file": Reply(artifacts=(_FILE,)),
    "tck-artifact-data": Reply(artifacts=(Artifact.data({"key": "value", "count": 42}),)),
    "tck-reject-task": Reply("rejected", state="TASK_STATE_REJECTED"),
    "tck-stream-001": Reply(artifacts=(Artifact.text("Stream hello from TCK"),)),
    "tck-stream-002": Reply(),
    "tck-stream-003": Reply(artifacts=(Artifact.text("Stream task lifecycle"),)),
}
_SLOW = "test-resubscribe-message-id"  # works a while, so a client can subscribe meanwhile


async def tck_behaviour(item: WorkItem) -> Reply:
    """The reply the kit's scenario asks for by the latest message's id."""
    latest = next(m for m in reversed(item.messages) if m.get("role") == "ROLE_USER")
    message_id = str(latest.get("messageId", ""))
    if message_id.startswith(_SLOW):
        await anyio.sleep(4)
        return Reply()
    for prefix, reply in _REPLIES.items():
        if message_id.startswith(prefix):
            return reply
    return Reply(f"Unhandled messageId prefix: {message_id}")


async def main(url: str, name: str, token: str) -> None:
    async with GatewayClient(url, token) as client:
        await serve_a2a(client, name, tck_behaviour, concurrency=8)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], os.environ["CONCLAVE_TOKEN"])
