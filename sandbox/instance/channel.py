"""The host's end of the runner protocol: framed JSON over the sandbox's Unix socket.

The host listens on `<workspace>/.conclave.sock` before the sandbox starts; the socket has the
workspace's owner and is no more open than it (0600 in a 0700 workspace). The runner
connects, says hello, then answers one request at a time. Frames are `sandbox.runner.runner_wire`'s,
the definition the runner imports too. The runner shares its sandbox with tool code, so
each frame is read only up to the size its reader allows (`receive(limit)`): a longer one
is never read (`OversizedFrame`), and the channel cannot be trusted after it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from sandbox.runner import HEADER, HELLO_LIMIT, SOCKET_NAME


class ChannelClosed(Exception):
    """The runner went away (it exited, was killed, or its sandbox was torn down)."""


class OversizedFrame(Exception):
    """The runner announced a frame longer than its reader allows; nothing of it was read."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the runner sent a frame of {size} bytes (at most {limit} allowed)")
        self.size = size
        self.limit = limit


class RunnerChannel:
    """One connected runner. Not safe for concurrent calls: the pool gives each call its own
    (within a call, frames sent at once go one after the other)."""

    def __init__(self, stream: SocketStream) -> None:
        self._stream = stream
        self._reader = BufferedByteReceiveStream(stream)
        # A call's answers to its server's requests may go at once; uncontended, no yield.
        self._sending = anyio.Lock(fast_acquire=True)
        self.last_frame_size = 0  # the length of the frame `receive` returned last

    async def send(self, message: Mapping[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        try:
            async with self._sending:
                await self._stream.send(HEADER.pack(len(data)) + data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ChannelClosed(f"the runner is gone ({type(exc).__name__})") from exc

    async def receive(self, limit: int = HELLO_LIMIT) -> dict[str, Any]:
        """The next frame, at most `limit` bytes long (else `OversizedFrame`)."""
        try:
            header = await self._reader.receive_exactly(HEADER.size)
            (size,) = HEADER.unpack(header)
            if size > limit:
                raise OversizedFrame(size, limit)
            body = await self._reader.receive_exactly(size)
        except (
            anyio.IncompleteRead,
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ) as exc:
            raise ChannelClosed(f"the runner is gone ({type(exc).__name__})") from exc
        try:
            message = json.loads(body)
        except ValueError as exc:
            raise ChannelClosed("the runner sent a frame that is not JSON") from exc
        if not isinstance(message, dict):
            raise ChannelClosed("the runner sent something that is not a JSON object")
        self.last_frame_size = size
        return message

    async def aclose(self) -> None:
        await self._stream.aclose()


async def listen(workspace: Path) -> tuple[SocketListener, Path]:
    path = workspace / SOCKET_NAME
    path.unlink(missing_ok=True)
    listener = await anyio.create_unix_listener(path)
    # The runner runs as the workspace's user (65534 in an isolating sandbox): it, and only
    # those who may write in the workspace, may connect.
    workspace_stat = os.stat(workspace)
    path.chmod(workspace_stat.st_mode & 0o666)
    if (workspace_stat.st_uid, workspace_stat.st_gid) != (os.geteuid(), os.getegid()):
        os.chown(path, workspace_stat.st_uid, workspace_stat.st_gid)
    return listener, path


async def accept(listener: SocketListener) -> RunnerChannel:
    stream = await listener.accept()
    return RunnerChannel(stream)
