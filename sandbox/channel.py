"""The host's end of the runner protocol: framed JSON over the sandbox's Unix socket.

The host listens on `<workspace>/.conclave.sock` before the sandbox starts; the socket has the
workspace's owner and is no more open than it (0600 in a 0700 workspace). The runner
connects, says hello, then answers one request at a time. Frames are a 4-byte big-endian
length and UTF-8 JSON, the same as `sandbox/runner.py`.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

SOCKET_NAME = ".conclave.sock"
MAX_FRAME = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ChannelClosed(Exception):
    """The runner went away (it exited, was killed, or its sandbox was torn down)."""


class RunnerChannel:
    """One connected runner. Not safe for concurrent calls: the pool gives each call its own."""

    def __init__(self, stream: SocketStream) -> None:
        self._stream = stream
        self._reader = BufferedByteReceiveStream(stream)

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        try:
            await self._stream.send(_HEADER.pack(len(data)) + data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ChannelClosed(f"the runner is gone ({type(exc).__name__})") from exc

    async def receive(self) -> dict[str, Any]:
        try:
            header = await self._reader.receive_exactly(_HEADER.size)
            (size,) = _HEADER.unpack(header)
            if size > MAX_FRAME:
                raise ChannelClosed(f"the runner sent a frame of {size} bytes")
            body = await self._reader.receive_exactly(size)
        except (
            anyio.IncompleteRead,
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ) as exc:
            raise ChannelClosed(f"the runner is gone ({type(exc).__name__})") from exc
        message = json.loads(body)
        if not isinstance(message, dict):
            raise ChannelClosed("the runner sent something that is not a JSON object")
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
