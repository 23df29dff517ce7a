"""The embedded stack: a real Redis, the gateway under uvicorn, and the strongest sandbox.

`EmbeddedStack` starts all three and tears all of it down, so one command (or one test
fixture) gets a whole platform. The gateway runs in its own process, listening on a socket
this process bound to a free port, so callers cross a real HTTP and process boundary.
"""

from __future__ import annotations

import json
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
from gateway import Settings, issue_token
from protocol import ADMIN_KEY_HEADER
from sandbox import BackendChoice, strongest_available


class StackError(RuntimeError):
    pass


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
        redis_url = base.redis_url
        if not redis_url:
            self.redis = EmbeddedRedis(
                base.redis_data_dir,
                maxmemory_mb=base.redis_maxmemory_mb,
                fsync=base.redis_fsync,
            )
            self.redis.start()
            redis_url = self.redis.url
        if base.sandbox_backend == "auto":
            self.backend = strongest_available(base.docker_host, base.sandbox_image)
        else:
            self.backend = BackendChoice(base.sandbox_backend, "chosen by configuration")
        self.settings = base.model_copy(
            update={"redis_url": redis_url, "sandbox_backend": self.backend.name}
        )
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # uvicorn takes an inherited fd for a unix socket and so never sets TCP_NODELAY; accepted
        # sockets inherit it from the listener, which keeps Nagle from adding ~40 ms per answer.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind((self.host, base.port))  # port 0: any free port
        self._socket.listen(2048)
        port = self._socket.getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        self.settings = self.settings.model_copy(update={"port": port, "host": self.host})
        command = [sys.executable, "-m", "conclave.gateway_process", str(self._socket.fileno())]
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
        self._gateway = subprocess.Popen(
            command,
            env=self._gateway_env(),
            pass_fds=(self._socket.fileno(),),
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log else None,
        )
        self._wait_ready(timeout_s)

    def _gateway_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
        for name, value in self.settings.model_dump().items():
            if value is None:
                continue
            if hasattr(value, "get_secret_value"):
                value = value.get_secret_value()
            elif isinstance(value, tuple | list):
                value = json.dumps(list(value))
            env[f"CONCLAVE_{name.upper()}"] = str(value)
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
