"""The gateway's one Redis client (a standalone server or a Redis Cluster), and the way its
per-call Lua scripts are run."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import unquote

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import AskError, MovedError, NoScriptError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.gateway_error import GatewayError
from gateway.redis_io.coalesced_connection import CoalescedConnection, coalesced
from gateway.telemetry import TRACING, SpanKind, mark_raised
from protocol import ErrorCode

# `WAIT numreplicas timeout_ms` after a script: acknowledge its writes only once that many
# replicas hold them (durability "replicated"); None acknowledges at once (durability "async").
ReplicaWait = tuple[int, int]

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
_CLUSTER_URL_FORM = "redis+cluster://[user:password@]host:port[,host:port...]"


def connect_redis(url: str) -> Redis:
    """A pooled asyncio client decoding to str: for redis://, rediss:// or unix:// URLs a
    standalone server's; for redis+cluster://host:port[,host:port...] (rediss+cluster://
    with TLS) redis-py's `RedisCluster`, started from those nodes. A cluster is only ever
    named by that scheme, never guessed.

    The cluster client is typed as `Redis`: it has the same commands, a command goes to the
    node owning its key's slot, and a transaction (`pipeline(transaction=True)`) works when
    all its keys share one slot, which the gateway's key layout guarantees (hash tags).
    """
    if url.partition("://")[0] in CLUSTER_SCHEMES:
        return cast(Redis, _connect_cluster(url))
    return Redis.from_url(url, decode_responses=True, health_check_interval=30)


def _connect_cluster(url: str) -> RedisCluster:
    scheme, _, rest = url.partition("://")
    address, _, database = rest.partition("/")
    credentials, _, hosts = address.rpartition("@")
    username, _, password = credentials.partition(":")
    nodes: list[ClusterNode] = []
    for host_port in hosts.split(","):
        host, _, port = host_port.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad Redis Cluster URL {url!r}: write {_CLUSTER_URL_FORM}")
        nodes.append(ClusterNode(host, int(port)))
    if database not in ("", "0"):
        raise ValueError(f"a Redis Cluster has only database 0, not {database!r}: drop it")
    return RedisCluster(
        startup_nodes=nodes,
        username=unquote(username) or None,
        password=unquote(password) or None,
        ssl=scheme == "rediss+cluster",
        decode_responses=True,
        health_check_interval=30,
    )


class PooledScript:
    """A Lua script the gateway runs on every call (admission, the outcome record), by EVALSHA
    straight on a pooled connection under that connection's own retry policy.

    The same commands as redis-py's `Script`, without the layers it and `execute_command` add
    per command (~6 us of ~30 per script call on the 2-core VM, two calls per tool call,
    issue 13). A server that lost the script (a restart, SCRIPT FLUSH) is sent it by EVAL,
    which also caches it there, as `Script` does. While tracing is on, each call is a span.

    With `wait=(replicas, timeout_ms)` the call runs `WAIT` on the same connection after the
    script (WAIT covers the writes of its own connection, so it cannot run anywhere else) and
    raises 503 `DURABILITY_UNCONFIRMED` when fewer replicas confirmed in time: the script's
    effect may or may not survive a failover, and a retry with the same idempotency key
    settles which.
    """

    def __init__(self, redis: Redis, text: str, *, name: str = "script") -> None:
        self._cluster = redis if isinstance(redis, RedisCluster) else None
        self._pool = None if self._cluster else redis.connection_pool
        self._text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()
        self.name = name
        self._span_name = f"redis {name}"  # what a trace calls it
        self._span_attributes = {
            "db.system": "redis",
            "db.operation": "EVALSHA",
            "conclave.script": name,
        }
        self._shared: CoalescedConnection | None = None  # the pool's, found once per loop

    async def __call__(
        self, keys: Sequence[Any], args: Sequence[Any], *, wait: ReplicaWait | None = None
    ) -> Any:
        if not TRACING.on:
            return await self._call(keys, args, wait)
        # In a client span (keys, arguments and replies stay out of it), opened here rather
        # than in a coroutine of its own: a traced call's frames are resumed at every await.
        with TRACING.span(self._span_name, self._span_attributes, SpanKind.CLIENT) as span:
            try:
                return await self._call(keys, args, wait)
            except Exception as exc:
                mark_raised(span, exc)
                raise

    async def _call(
        self, keys: Sequence[Any], args: Sequence[Any], wait: ReplicaWait | None = None
    ) -> Any:
        if self._cluster is not None:
            return await self._call_on_cluster(self._cluster, keys, args, wait)
        assert self._pool is not None
        if wait is None:  # nothing must follow it on its connection: share one (one write)
            shared = self._shared
            if shared is None or shared.loop is not asyncio.get_running_loop():
                shared = self._shared = coalesced(self._pool)
            policy = (await shared.connection()).retry
            return await policy.call_with_retry(
                lambda: self._run_coalesced(shared, keys, args), _reconnects_by_itself
            )
        connection = await self._pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            reply = await connection.retry.call_with_retry(
                lambda: self._run(connection, keys, args), lambda _: connection.disconnect()
            )
            if wait is not None:
                await _wait_for_replicas(connection, *wait)
            return reply
        finally:
            await self._pool.release(connection)

    async def _call_on_cluster(
        self,
        cluster: RedisCluster,
        keys: Sequence[Any],
        args: Sequence[Any],
        wait: ReplicaWait | None,
    ) -> Any:
        """The call on the master owning the first key's slot (a script's keys share one).
        A slot that moved (MOVED) runs once more on the master the answer names (the node
        the slot map is re-read from may not have heard of the move yet); a master that
        stopped answering (a failover) refreshes the slot map and runs once more on the
        slot's master now; a slot being migrated (ASK) runs once on the node the answer
        names, after ASKING. A MOVED also refreshes the map, for later calls."""
        await cluster.initialize()
        try:
            return await self._on_node(_master_of(cluster, keys), keys, args, wait)
        except MovedError as moved:
            await cluster.nodes_manager.initialize()
            node = cluster.get_node(host=moved.host, port=moved.port)
            return await self._on_node(node or _master_of(cluster, keys), keys, args, wait)
        except (RedisConnectionError, RedisTimeoutError):
            await cluster.nodes_manager.initialize()
            return await self._on_node(_master_of(cluster, keys), keys, args, wait)
        except AskError as redirect:
            node = cluster.get_node(host=redirect.host, port=redirect.port)
            if node is None:
                raise
            return await self._on_node(node, keys, args, wait, asking=True)

    async def _on_node(
        self,
        node: ClusterNode,
        keys: Sequence[Any],
        args: Sequence[Any],
        wait: ReplicaWait | None,
        *,
        asking: bool = False,
    ) -> Any:
        """Get a connection of the node for these keys -> run (and WAIT) -> release."""
        connection = node.acquire_connection()
        try:
            if asking:
                await connection.send_command("ASKING")
                await connection.read_response()
            reply = await self._run(connection, keys, args)
            if wait is not None:
                await _wait_for_replicas(connection, *wait)
            return reply
        except (RedisConnectionError, RedisTimeoutError):
            await connection.disconnect()
            raise
        finally:
            node.release(connection)

    async def _run_coalesced(
        self, shared: CoalescedConnection, keys: Sequence[Any], args: Sequence[Any]
    ) -> Any:
        try:
            return await shared.execute("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await shared.execute("EVAL", self._text, len(keys), *keys, *args)

    async def _run(
        self, connection: AbstractConnection, keys: Sequence[Any], args: Sequence[Any]
    ) -> Any:
        try:
            await connection.send_command("EVALSHA", self.sha, len(keys), *keys, *args)
            return await connection.read_response()
        except NoScriptError:
            await connection.send_command("EVAL", self._text, len(keys), *keys, *args)
            return await connection.read_response()


async def _reconnects_by_itself(_: Exception) -> None:
    """A failed shared connection was disconnected where it failed; its next command connects."""


async def _wait_for_replicas(
    connection: AbstractConnection, replicas: int, timeout_ms: int
) -> None:
    """WAIT for the connection's writes to reach `replicas` replicas, or refuse with 503."""
    await connection.send_command("WAIT", replicas, timeout_ms)
    # WAIT answers after up to timeout_ms, which may be past the connection's read timeout
    confirmed = int(await connection.read_response(timeout=timeout_ms / 1000 + 5))
    if confirmed < replicas:
        raise GatewayError.of(
            ErrorCode.DURABILITY_UNCONFIRMED,
            f"the write was made but only {confirmed} of {replicas} Redis replicas confirmed it"
            f" within {timeout_ms} ms, so a failover could still lose it: retry with the same"
            " idempotency key, which returns its outcome if it was kept and applies it if not",
            details={"replicas_confirmed": confirmed, "replicas_required": replicas},
        )


def _master_of(cluster: RedisCluster, keys: Sequence[Any]) -> ClusterNode:
    """The master serving the first key's slot (any node for a script without keys)."""
    if not keys:
        return cluster.get_default_node()
    node = cluster.get_node_from_key(str(keys[0]))
    assert node is not None  # only a replica may be missing, and none is asked for
    return node
