"""The faults `conclave bench chaos` injects, on real processes of this machine.

`SpareEngine` is a second `dockerd` of the suite's own (own data root, exec root and socket,
no bridge, no iptables, like `tests/sandbox/test_engines.py`), so restarting "a Docker
engine" never touches the engine other users of this machine share. `haproxy` balances two
gateways. The Redis faults act on a `LocalRedisCluster`'s node processes: SIGKILL a master
(its replica is promoted; the killed node is started again and rejoins as a replica) and
SIGSTOP a master for a while (SIGCONT after).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from docker.errors import DockerException

from conclave.bench.chaos.redis_cluster import LocalRedisCluster
from conclave.stack import free_port, write_haproxy
from sandbox import RuntimeImageBuilder, docker_client

OWNER_LABEL = "conclave.owner_pid"  # what each sandbox container names its gateway by


class ChaosSetupError(RuntimeError):
    pass


def wait_until(ready: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll `ready` until true; returns the seconds it took, raises past `timeout_s`."""
    start = time.monotonic()
    while True:
        try:
            if ready():
                return time.monotonic() - start
        except (redis.RedisError, DockerException, OSError):
            pass  # not up yet
        if time.monotonic() - start > timeout_s:
            raise ChaosSetupError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def engine_answers(host: str) -> bool:
    if not Path(host.removeprefix("unix://")).exists():
        return False
    client = docker_client(host, timeout=2)
    try:
        return bool(client.ping())
    finally:
        client.close()


class SpareEngine:
    """A dockerd of our own holding the runtime image; `restart` SIGKILLs and starts it."""

    def __init__(self, source_host: str, image: str) -> None:
        self._scratch = Path(tempfile.mkdtemp(prefix="cch-", dir="/tmp"))  # short socket path
        self.host = f"unix://{self._scratch}/docker.sock"
        self._source_host = source_host
        self._image = image
        self._daemon: subprocess.Popen[bytes] | None = None

    def start(self) -> SpareEngine:
        if shutil.which("dockerd") is None:
            raise ChaosSetupError("dockerd not found: apt-get install docker.io")
        self._launch()
        RuntimeImageBuilder(self._source_host, self._image, say=lambda _: None).copy_to(self.host)
        return self

    def _launch(self) -> None:
        s = self._scratch
        argv = ["dockerd", "--data-root", str(s / "data"), "--exec-root", str(s / "x")]
        argv += ["-H", self.host, "--pidfile", str(s / "docker.pid")]
        argv += ["--bridge=none", "--iptables=false", "--shutdown-timeout", "1"]
        with (s / "dockerd.log").open("ab") as log:
            self._daemon = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        wait_until(lambda: engine_answers(self.host), 60, "the spare dockerd to answer")

    def restart(self) -> None:
        """Stop the daemon (SIGTERM: its containers are stopped within 1 s, and with them
        the calls on them), then start it again. (A SIGKILLed dockerd leaves its containers'
        shims running, and the next one waits on them for minutes.)"""
        self._terminate()
        self._launch()

    def _terminate(self) -> None:
        if self._daemon is not None and self._daemon.poll() is None:
            self._daemon.terminate()
            try:
                self._daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._daemon.kill()
                self._daemon.wait()

    def stop(self) -> None:
        self._terminate()
        subprocess.run(["umount", "-R", str(self._scratch / "x")], capture_output=True, check=False)
        shutil.rmtree(self._scratch, ignore_errors=True)


def containers_of(hosts: list[str], owners: set[int]) -> list[str]:
    """The sandbox containers (running or not) that gateways `owners` started: name, status
    and engine of each."""
    found: list[str] = []
    for host in hosts:
        client = docker_client(host, timeout=10)
        try:
            for container in client.containers.list(
                ignore_removed=True, all=True, filters={"label": OWNER_LABEL}
            ):
                if int(container.labels.get(OWNER_LABEL, "0")) in owners:
                    found.append(f"{container.name} ({container.status}) on {host}")
        finally:
            client.close()
    return found


def kill_containers(hosts: list[str], owners: set[int]) -> int:
    """`docker kill` every running sandbox container of `owners`; returns how many."""
    killed = 0
    for host in hosts:
        client = docker_client(host, timeout=10)
        try:
            for container in client.containers.list(
                ignore_removed=True, filters={"label": OWNER_LABEL}
            ):
                if int(container.labels.get(OWNER_LABEL, "0")) in owners:
                    try:
                        container.kill()
                        killed += 1
                    except DockerException:
                        pass  # it ended on its own meanwhile
        finally:
            client.close()
    return killed


@contextmanager
def haproxy(backends: list[str], workdir: Path) -> Iterator[str]:
    """HAProxy over `backends`, configured by `conclave.stack.balancer` and logging each request to
    `chaos-haproxy.log`; yields its URL."""
    binary = shutil.which("haproxy")
    if binary is None:
        raise ChaosSetupError("haproxy not found: apt-get install haproxy")
    port = free_port()
    config = write_haproxy(workdir / "chaos-haproxy", port, backends, log=True)
    with (workdir / "chaos-haproxy.log").open("ab") as log:
        process = subprocess.Popen([binary, "-f", str(config)], stdout=log)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=10)


def cluster_ok(cluster: LocalRedisCluster, port: int) -> bool:
    with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as client:
        return "cluster_state:ok" in str(client.execute_command("CLUSTER", "INFO"))


def _slot_master(cluster: LocalRedisCluster, port: int, key: str) -> int:
    with redis.Redis(port=port, socket_timeout=1) as client:
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
        for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(master[1])
    return 0


def kill_master(cluster: LocalRedisCluster, key: str, timeout_s: float = 30.0) -> bool:
    """SIGKILL the master owning `key`, wait until another node serves its slot with
    cluster_state ok, then start the killed node again (it rejoins as a replica). When the
    replica has not taken over by itself within half of `timeout_s` (its election can stall
    on a loaded machine), it is told to (`CLUSTER FAILOVER TAKEOVER`); returns whether it was."""
    victim = cluster.node_of_key(key)
    with redis.Redis(port=victim, socket_timeout=2, decode_responses=True) as client:
        replicas = [
            int(line.split()[1].split(":")[1].split("@")[0])
            for line in client.execute_command(
                "CLUSTER", "REPLICAS", client.execute_command("CLUSTER", "MYID")
            )
        ]
    cluster.processes[victim].kill()
    cluster.processes[victim].wait(timeout=10)
    witness = next(p for p in cluster.ports if p != victim and cluster.processes[p].poll() is None)

    def promoted() -> bool:
        master = _slot_master(cluster, witness, key)
        return master not in (0, victim) and cluster_ok(cluster, witness)

    forced = False
    try:
        wait_until(promoted, timeout_s / 2, f"the failover of master {victim}")
    except ChaosSetupError:
        forced = True
        for port in replicas:
            with redis.Redis(port=port, socket_timeout=2) as replica:
                replica.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        wait_until(promoted, timeout_s / 2, f"the forced failover of master {victim}")
    cluster.restart_node(victim)
    return forced


def pause_master(cluster: LocalRedisCluster, key: str, seconds: float) -> int:
    """SIGSTOP the master owning `key` for `seconds`, then SIGCONT; returns its port."""
    victim = cluster.node_of_key(key)
    os.kill(cluster.processes[victim].pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(cluster.processes[victim].pid, signal.SIGCONT)
    return victim


def wait_cluster_settled(cluster: LocalRedisCluster, timeout_s: float = 30.0) -> None:
    """Every node answers with cluster_state ok and each master has its replica online."""

    def settled() -> bool:
        if not all(cluster_ok(cluster, port) for port in cluster.ports):
            return False
        for port in cluster.masters():
            with redis.Redis(port=port, socket_timeout=1) as client:
                info = client.info("replication")
            slave = info.get("slave0")
            if not (isinstance(slave, dict) and slave.get("state") == "online"):
                return False
        return True

    wait_until(settled, timeout_s, "every cluster master with an online replica")
