"""The embedded stack: a real Redis, the gateway under uvicorn, and the strongest sandbox.

`EmbeddedStack` starts all three and tears all of it down, so one command (or one test
fixture) gets a whole platform. The gateway runs in its own process, listening on a socket
this process bound to a free port, so callers cross a real HTTP and process boundary.

Secrets reach the gateway process through a pipe, never its environment. A bind beyond
loopback needs explicitly configured secrets; the sandbox backend is the strongest one found
(or the one configured), never a silent fall-back to no isolation.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import httpx

from conclave.embedded_redis import EmbeddedRedis
from conclave.settings_pipe import settings_pipe
from gateway import Settings, issue_token
from protocol import ADMIN_KEY_HEADER
from sandbox import BackendChoice, bwrap_status, docker_status, strongest_available

log = logging.getLogger("conclave.stack")

INPROCESS_WARNING = (
    "NO ISOLATION: tools run in the gateway's own threads; 'inprocess' is for benchmarks only"
)


class StackError(RuntimeError):
    pass


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


class EmbeddedStack:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        host: str = "127.0.0.1",
        log_path: Path | None = None,
    ) -> None:
        """`log_path`: where the gateway's output goes (appended); by default, ours."""
        self.base_settings = settings or Settings()
        self.host = host
        self.log_path = log_path
        self._log: IO[bytes] | None = None
        self.redis: EmbeddedRedis | None = None
        self.backend: BackendChoice | None = None
        self._gateway: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self.settings = self.base_settings
        self.url = ""

    def start(self, timeout_s: float = 30.0) -> EmbeddedStack:
        try:
            self._start(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout_s: float) -> None:
        base = self.base_settings
        if not is_loopback(self.host) and not base.secrets_configured:
            raise StackError(
                f"refusing to listen on {self.host} with generated secrets: set "
                "CONCLAVE_SECRET and CONCLAVE_ADMIN_KEY (long random values) to bind beyond "
                "loopback"
            )
        if base.sandbox_backend == "auto":
            self.backend = strongest_available(base.docker_host, base.sandbox_image)
        elif base.sandbox_backend == "inprocess":
            log.warning(INPROCESS_WARNING)
            self.backend = BackendChoice("inprocess", INPROCESS_WARNING)
        else:
            self._check_backend_runs(base)
            self.backend = BackendChoice(base.sandbox_backend, "chosen by configuration")
        redis_url = base.redis_url
        if not redis_url:
            self.redis = EmbeddedRedis(
                base.redis_data_dir,
                maxmemory_mb=base.redis_maxmemory_mb,
                fsync=base.redis_fsync,
            )
            self.redis.start()
            redis_url = self.redis.url
        self.settings = base.model_copy(
            update={"redis_url": redis_url, "sandbox_backend": self.backend.name}
        )
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # uvicorn takes an inherited fd for a unix socket and so never sets TCP_NODELAY; accepted
        # sockets inherit it from the listener, which keeps Nagle from adding ~40 ms per answer.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._socket.bind((self.host, base.port))  # port 0: any free port
        except OSError as exc:
            raise StackError(
                f"cannot listen on {self.host}:{base.port} ({exc.strerror}): stop what uses it,"
                " or choose another port with --port or CONCLAVE_PORT (0 picks a free one)"
            ) from exc
        self._socket.listen(2048)
        port = self._socket.getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        self.settings = self.settings.model_copy(update={"port": port, "host": self.host})
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
        settings_out = settings_pipe(self.settings)
        try:
            fds = (self._socket.fileno(), settings_out)
            command = [sys.executable, "-m", "conclave.gateway_process", *map(str, fds)]
            self._gateway = subprocess.Popen(
                command,
                env=self._gateway_env(),
                pass_fds=fds,
                stdout=self._log,
                stderr=subprocess.STDOUT if self._log else None,
            )
        finally:
            os.close(settings_out)
        self._wait_ready(timeout_s)

    @staticmethod
    def _check_backend_runs(settings: Settings) -> None:
        """A configured docker or bwrap backend that cannot run here is refused before the
        gateway starts, with the fix, rather than by a traceback from the gateway's start-up."""
        missing = None
        if settings.sandbox_backend == "docker":
            missing = docker_status(settings.docker_host, settings.sandbox_image)
        elif settings.sandbox_backend == "bwrap":
            missing = bwrap_status()
        if missing is not None:
            raise StackError(
                f"the {settings.sandbox_backend} sandbox backend cannot run: {missing}"
            )

    def _gateway_env(self) -> dict[str, str]:
        """Ours without any CONCLAVE_* variable: the settings travel through the pipe."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return env

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            assert self._gateway is not None
            if self._gateway.poll() is not None:
                raise StackError(f"the gateway exited with {self._gateway.returncode}")
            try:
                response = httpx.get(f"{self.url}/readyz", timeout=1.0)
                if response.status_code == 200:
                    return
                last = response.text
            except httpx.TransportError as exc:
                last = type(exc).__name__
            time.sleep(0.05)
        raise StackError(f"the gateway was not ready within {timeout_s} s: {last}")

    def stop(self) -> None:
        if self._gateway is not None:
            if self._gateway.poll() is None:
                self._gateway.terminate()
                try:
                    self._gateway.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self._gateway.kill()
                    self._gateway.wait()
            self._gateway = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self.redis is not None:
            self.redis.close()
            self.redis = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def token(
        self, tenant: str, agent: str, scopes: Iterable[str], *, obo: str | None = None
    ) -> str:
        return issue_token(self.settings, tenant=tenant, agent=agent, scopes=scopes, obo=obo)

    @property
    def admin_headers(self) -> dict[str, str]:
        return {ADMIN_KEY_HEADER: self.settings.admin_key.get_secret_value()}

    def __enter__(self) -> EmbeddedStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
