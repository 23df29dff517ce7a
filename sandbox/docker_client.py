"""`docker_client`: the Docker SDK's client, with Unix-socket connections that close their
socket when connecting fails.

The SDK's `UnixHTTPConnection.connect` opens a socket and connects it, and when the engine's
socket is missing or refuses (an engine that is restarting or gone) it raises with the new
socket still open (docker/docker-py#3356, not merged). Every call and health check against
such an engine then left a file descriptor behind until the garbage collector found it, with
a `ResourceWarning`. Here the Unix-socket adapter is replaced by one whose connections close
the socket when `connect` fails; everything else is the SDK's.
"""

from __future__ import annotations

import socket
from typing import Any

import docker
from docker.transport.unixconn import (
    UnixHTTPAdapter,
    UnixHTTPConnection,
    UnixHTTPConnectionPool,
)

_DOCKER_SCHEME = "http+docker://"


def docker_client(base_url: str, **options: Any) -> docker.DockerClient:
    """`docker.DockerClient(base_url=..., **options)`, closing sockets it could not connect."""
    client = docker.DockerClient(base_url=base_url, **options)
    api = client.api
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
    return client


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
