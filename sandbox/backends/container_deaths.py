"""`ContainerDeaths`: which of an engine's sandbox containers died, from the engine's own event
stream, so a start waits on its runner's hello or its container's death and never asks the
engine how the container is doing.

One thread per engine reads the engine's `die` events of Conclave's containers (label
`conclave.sandbox=1`) while the backend is open. A container is watched from its creation
(`watch`, before it starts: its death cannot come first) to its removal (`forget`). When the
stream breaks (the engine restarted), the reader connects again and asks once about each
container still watched, so a death in the gap is not missed.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio
from docker.errors import DockerException, NotFound
from requests.exceptions import RequestException

from sandbox.backends.docker_client import docker_client

log = logging.getLogger("conclave.sandbox")
RECONNECT_S = 0.5  # after the stream broke: how soon the reader connects again
_DIE_EVENTS = {"type": "container", "event": "die", "label": "conclave.sandbox=1"}


class _Watched:
    def __init__(self) -> None:
        self.died = anyio.Event()
        self.reason = ""


class ContainerDeaths:
    def __init__(self, docker_host: str) -> None:
        self.docker_host = docker_host
        self._watched: dict[str, _Watched] = {}
        self._stream: Any = None  # the engine's event stream, while one is open
        self._closed = False

    def watch(self, container_id: str) -> None:
        self._watched.setdefault(container_id, _Watched())

    def forget(self, container_id: str) -> None:
        self._watched.pop(container_id, None)

    async def died(self, container_id: str) -> str:
        """Why the container died, once it has (it waits for that)."""
        watched = self._watched.get(container_id)
        if watched is None:
            return "the container is gone"
        await watched.died.wait()
        return watched.reason

    async def read_forever(self) -> None:
        """Read the engine's death events until `close` (run as the backend's background
        work); connect again after the stream breaks."""
        while not self._closed:
            try:
                await anyio.to_thread.run_sync(self._read, abandon_on_cancel=True)
            except (DockerException, RequestException, OSError) as exc:
                log.debug("the Docker engine's event stream at %s broke: %s", self.docker_host, exc)
            finally:
                self._close_stream()
            await anyio.sleep(RECONNECT_S)

    def close(self) -> None:
        self._closed = True
        self._close_stream()

    def reopen(self) -> None:
        """Read again from the next `read_forever` (the backend opened once more)."""
        self._closed = False

    def _read(self) -> None:
        """In a thread of its own: the events, each death handed to the event loop."""
        client = docker_client(self.docker_host)
        try:
            self._stream = client.events(filters=_DIE_EVENTS, decode=True)
            for container_id in list(self._watched):  # what died while no stream was open
                reason = _state_of(client, container_id)
                if reason is not None:
                    anyio.from_thread.run_sync(self._died, container_id, reason)
            for event in self._stream:
                actor = event.get("Actor") or {}
                code = (actor.get("Attributes") or {}).get("exitCode")
                container_id = str(event.get("id") or actor.get("ID") or "")
                reason = f"the container exited with {code}"
                anyio.from_thread.run_sync(self._died, container_id, reason)
        finally:
            client.close()

    def _died(self, container_id: str, reason: str) -> None:
        watched = self._watched.get(container_id)
        if watched is not None and not watched.died.is_set():
            watched.reason = reason
            watched.died.set()

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(Exception):  # ends the reader's blocked read
                stream.close()


def _state_of(client: Any, container_id: str) -> str | None:
    """Why the container is not running, or None while it runs or has yet to start (watched
    from its creation: a container created and not started yet is not dead, and its death
    will come as an event on the stream just opened)."""
    try:
        state = client.api.inspect_container(container_id).get("State", {})
    except NotFound:
        return "the container is gone"
    if state.get("Running", True) or state.get("Status") == "created":
        return None
    return f"the container exited with {state.get('ExitCode')}: {state.get('Error') or ''}"
