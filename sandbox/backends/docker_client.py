"""`docker_client`: the Docker SDK's client, with Unix-socket connections that close their
socket when connecting fails.

The SDK's `UnixHTTPConnection.connect` opens a socket and connects it, and when the engine's
socket is missing or refuses (an engine that is restarting or gone) it raises with the new
socket still open (docker/docker-py#3356, not merged). Every call and health check against
such an engine then left a file descriptor behind until the garbage collector found it, with
a `ResourceWarning`. Here the Unix-socket adapter is replaced by one whose connections close
the socket when `connect` fails; everything else is the SDK's.

The SDK asks the engine for its API version inside its constructor, through its own adapter,
before the one here can be mounted, and a constructor that raises leaves its connection pool
for the garbage collector. So the client is built with a fixed version, the adapter swapped,
and only then the engine asked; a client whose question fails is closed before the error
goes on.
"""

from __future__ import annotations

import socket
from typing import Any

import docker
from docker.constants import MINIMUM_DOCKER_API_VERSION
from docker.errors import InvalidVersion
from docker.transport.unixconn import (
    UnixHTTPAdapter,
    UnixHTTPConnection,
    UnixHTTPConnectionPool,
)
from docker.utils import version_lt

_DOCKER_SCHEME = "http+docker://"


def docker_client(base_url: str, **options: Any) -> docker.DockerClient:
    """`docker.DockerClient(base_url=..., **options)`, closing sockets it could not connect.

    Without a fixed `version` (or with "auto") the engine's version is asked for, as the SDK
    does; if that fails, the error is the SDK's and no socket is left open.
    """
    version = options.pop("version", None)
    detect = version is None or (isinstance(version, str) and version.lower() == "auto")
    client = docker.DockerClient(
        base_url=base_url, version=MINIMUM_DOCKER_API_VERSION if detect else version, **options
    )
    try:
        _close_failed_connects(client.api)
        if detect:
            client.api._version = _server_version(client.api)
    except BaseException:
        client.close()
        raise
    return client


def _server_version(api: docker.APIClient) -> str:
    """The engine's API version, refused below the SDK's minimum as its constructor does."""
    version: str = api._retrieve_server_version()
    if version_lt(version, MINIMUM_DOCKER_API_VERSION):
        raise InvalidVersion(
            f"Docker engine API {version} is older than {MINIMUM_DOCKER_API_VERSION}, the oldest"
            " this client speaks: upgrade the engine"
        )
    return version


def _close_failed_connects(api: docker.APIClient) -> None:
    """Replace the SDK's Unix-socket adapter (unused so far) with `_UnixAdapter`."""
    inherited = getattr(api, "_custom_adapter", None)
    if isinstance(inherited, UnixHTTPAdapter):
        adapter = _UnixAdapter(
            inherited.socket_path,
            inherited.timeout,
            pool_connections=inherited.pools._maxsize,
            max_pool_size=inherited.max_pool_size,
        )
        api.mount(_DOCKER_SCHEME, adapter)
        api._custom_adapter = adapter
        inherited.close()


class _UnixConnection(UnixHTTPConnection):  # type: ignore[misc]
    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.unix_socket)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class _UnixConnectionPool(UnixHTTPConnectionPool):  # type: ignore[misc]
    def _new_conn(self) -> _UnixConnection:
        return _UnixConnection(self.base_url, self.socket_path, self.timeout)


class _UnixAdapter(UnixHTTPAdapter):  # type: ignore[misc]
    def get_connection(self, url: str, proxies: Any = None) -> _UnixConnectionPool:
        with self.pools.lock:
            pool: _UnixConnectionPool | None = self.pools.get(url)
            if pool is None:
                pool = _UnixConnectionPool(
                    url, self.socket_path, self.timeout, maxsize=self.max_pool_size
                )
                self.pools[url] = pool
        return pool
