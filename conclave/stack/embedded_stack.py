"""The embedded stack: a real Redis, the gateway under uvicorn, and the strongest sandbox.

`EmbeddedStack` starts all three and tears all of it down, so one command (or one test
fixture) gets a whole platform. The gateway runs in its own processes (`settings.workers`
of them, all accepting on the one socket this process bound), so callers cross a real HTTP
and process boundary. They hold no state of their own (it is all in Redis) beyond each one's
sandbox pool and Prometheus metrics.

Stopping it (SIGTERM to the gateways) gives calls in flight `shutdown_grace_s`, then answers
them SHUTTING_DOWN (503, retryable) and removes every sandbox. Started from the main thread
(`conclave serve`), the gateways and the embedded Redis die with this process even when it
is SIGKILLed; the sandbox containers of a gateway that could not clean up are removed by
the next start. Redis and the gateways run in sessions of their own, so a Ctrl-C at the
terminal reaches this process alone, which stops them in order, Redis last.

Secrets reach the gateway process through a pipe, never its environment. A bind beyond
loopback needs explicitly configured secrets; the sandbox backend is the strongest one found
(or the one configured), never a silent fall-back to no isolation.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import httpx

from conclave.stack.child_lifetime import die_with_this_process
from conclave.stack.embedded_redis import EmbeddedRedis, EmbeddedRedisError
from conclave.stack.loopback import is_loopback
from conclave.stack.settings_pipe import settings_pipe
from conclave.stack.source_images import SourcePreparationTimeout, prepare_source_images
from gateway import Settings, issue_token
from protocol import ADMIN_KEY_HEADER
from sandbox import (
    BackendChoice,
    bwrap_status,
    collect_orphans,
    docker_status,
    strongest_available,
)

log = logging.getLogger("conclave.stack")

INPROCESS_WARNING = (
    "NO ISOLATION: tools run in the gateway's own threads; 'inprocess' is for benchmarks only"
)


class StackError(RuntimeError):
    pass


class EmbeddedStack:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        host: str = "127.0.0.1",
        log_path: Path | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        """`log_path`: where the gateway's output goes (appended); by default, ours. `say`:
        where start-up progress goes (preparing sources); by default, the log."""
        self.base_settings = settings or Settings()
        self.host = host
        self.log_path = log_path
        self._log: IO[bytes] | None = None
        self.redis: EmbeddedRedis | None = None
        self.backend: BackendChoice | None = None
        self._gateways: list[subprocess.Popen[bytes]] = []
        self.instances: list[str] = []  # each gateway process's X-Conclave-Instance
        self._sockets: list[socket.socket] = []  # one listener per gateway process
        self.settings = self.base_settings
        self.url = ""
        self.say = say or (lambda line: log.info("%s", line))  # start-up progress

    def start(self, timeout_s: float | None = None) -> EmbeddedStack:
        """Start it all; `timeout_s` (default `ready_timeout_s`) is the gateways' readiness
        limit, counted from after the config's sources are prepared (`source_images`)."""
        try:
            self._start(timeout_s or self.base_settings.ready_timeout_s)
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
        if base.sandbox.backend == "auto":
            self.backend = strongest_available(base.docker_host, base.sandbox.image)
        elif base.sandbox.backend == "inprocess":
            log.warning(INPROCESS_WARNING)
            self.backend = BackendChoice("inprocess", INPROCESS_WARNING)
        else:
            self._check_backend_runs(base)
            self.backend = BackendChoice(base.sandbox.backend, "chosen by configuration")
        try:  # image builds can take minutes: before the readiness clock, with progress
            prepare_source_images(
                base.model_copy(update={"sandbox_backend": self.backend.name}), self.say
            )
        except SourcePreparationTimeout as exc:
            raise StackError(str(exc)) from exc
        redis_url = base.redis_url
        if not redis_url:
            self.redis = EmbeddedRedis(
                base.redis_data_dir,
                maxmemory_mb=base.redis_maxmemory_mb,
                fsync=base.redis_fsync,
            )
            try:
                self.redis.start()
            except EmbeddedRedisError as exc:
                raise StackError(str(exc)) from exc
            redis_url = self.redis.url
        self.settings = base.model_copy(
            update={"redis_url": redis_url, "sandbox_backend": self.backend.name}
        )
        if self.backend.name == "docker":  # containers of gateways that died without cleaning
            for engine in base.engine_hosts:  # every engine it may have placed them on
                for line in collect_orphans(engine):
                    log.info("removed an orphan: %s", line)
        try:
            self._sockets = _listeners(self.host, base.port, self.settings.workers)
        except OSError as exc:
            raise StackError(
                f"cannot listen on {self.host}:{base.port} ({exc.strerror}): stop what uses it,"
                " or choose another port with --port or CONCLAVE_PORT (0 picks a free one)"
            ) from exc
        port = self._sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        self.settings = self.settings.model_copy(update={"port": port, "host": self.host})
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
        ready = [self._start_gateway(listener) for listener in self._sockets]
        self._wait_ready(ready, timeout_s)

    def _start_gateway(self, listener: socket.socket) -> int:
        """One gateway process on `listener`; returns the read end of its ready pipe."""
        settings_out = settings_pipe(self.settings)
        ready_in, ready_out = os.pipe()
        try:
            fds = (listener.fileno(), settings_out, ready_out)
            command = [sys.executable, "-m", "conclave.stack.gateway_process", *map(str, fds)]
            self._gateways.append(
                subprocess.Popen(
                    command,
                    env=self._gateway_env(),
                    pass_fds=fds,
                    stdout=self._log,
                    stderr=subprocess.STDOUT if self._log else None,
                    preexec_fn=die_with_this_process(),
                    start_new_session=True,  # a terminal's Ctrl-C reaches the stack alone
                )
            )
        except BaseException:
            os.close(ready_in)
            raise
        finally:
            os.close(settings_out)
            os.close(ready_out)
        return ready_in

    @staticmethod
    def _check_backend_runs(settings: Settings) -> None:
        """A configured docker or bwrap backend that cannot run here is refused before the
        gateway starts, with the fix, rather than by a traceback from the gateway's start-up."""
        missing = None
        if settings.sandbox.backend == "docker":
            missing = docker_status(settings.docker_host, settings.sandbox.image)
        elif settings.sandbox.backend == "bwrap":
            missing = bwrap_status()
        if missing is not None:
            raise StackError(
                f"the {settings.sandbox.backend} sandbox backend cannot run: {missing}"
            )

    def _gateway_env(self) -> dict[str, str]:
        """Ours without any CONCLAVE_* variable: the settings travel through the pipe."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
        root = str(Path(__file__).resolve().parents[2])  # the repository: conclave/stack/..
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return env

    def _wait_ready(self, ready: list[int], timeout_s: float) -> None:
        """Each gateway names itself on its ready pipe once it serves; then /readyz answers."""
        deadline = time.monotonic() + timeout_s
        try:
            waiting = {fd: b"" for fd in ready}
            while waiting:
                for gateway in self._gateways:
                    if gateway.poll() is not None:
                        raise StackError(f"a gateway process exited with {gateway.returncode}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StackError(self._not_ready(timeout_s))
                readable, _, _ = select.select(list(waiting), [], [], min(left, 0.2))
                for fd in readable:
                    chunk = os.read(fd, 256)
                    if not chunk:
                        raise StackError("a gateway process exited before it served")
                    waiting[fd] += chunk
                    if chunk.endswith(b"\n"):
                        self.instances.append(waiting.pop(fd).decode().strip())
        finally:
            for fd in ready:
                os.close(fd)
        response = httpx.get(f"{self.url}/readyz", timeout=max(1.0, deadline - time.monotonic()))
        if response.status_code != 200:
            raise StackError(f"the gateway is not ready: {response.text}")

    def _not_ready(self, timeout_s: float) -> str:
        """The readiness limit reached: the step the gateway was on, and how to do it by hand."""
        text = f"the gateway was not ready within {timeout_s:g} s (CONCLAVE_READY_TIMEOUT_S)"
        config = self.base_settings.config
        if config is None:
            return f"{text}: it was starting; see its log, or raise the limit"
        return (
            f"{text}: it was starting the tool sources of {config} in sandboxes; start each"
            f" once by hand with `conclave tools check {config}` to see what takes long or"
            " fails, or raise the limit"
        )

    def stop(self) -> None:
        """SIGTERM to every gateway (each gives its calls their grace, then removes its
        sandboxes), then the socket and Redis; a gateway that outlives its grace is killed,
        and the sandboxes of a gateway stopped before it served (mid start-up, past the
        readiness limit) are removed here: nothing is left behind."""
        stopped_gateways = bool(self._gateways)
        for gateway in self._gateways:
            if gateway.poll() is None:
                gateway.terminate()
        grace_s = self.settings.shutdown_grace_s + 10
        deadline = time.monotonic() + grace_s
        for gateway in self._gateways:
            try:
                gateway.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait()
        self._gateways = []
        if stopped_gateways and self.backend is not None and self.backend.name == "docker":
            for engine in self.base_settings.engine_hosts:  # their owners are gone now
                for line in collect_orphans(engine):
                    log.info("removed a sandbox its gateway left: %s", line)
        for listener in self._sockets:
            listener.close()
        self._sockets = []
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


def _listeners(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on host:port (port 0: a free one), one per gateway process.

    Several share the port with SO_REUSEPORT, so the kernel spreads new connections over the
    processes (one shared socket lets whichever process is quickest take nearly all of them).
    A port something else listens on is refused first by a plain bind, so a second
    `conclave serve --workers` can never join this one's group."""
    if count > 1 and port != 0:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    listeners: list[socket.socket] = []
    try:
        for _ in range(count):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if count > 1:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            # uvicorn takes an inherited fd for a unix socket and so never sets TCP_NODELAY;
            # accepted sockets inherit it from the listener, which keeps Nagle from adding
            # ~40 ms per answer.
            listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            listener.bind((host, port))
            listener.listen(2048)
            port = listener.getsockname()[1]  # the others join the port the first was given
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    return listeners
