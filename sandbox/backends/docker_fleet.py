"""The docker backend over several engines: placement by free capacity, a dead engine drained.

`DockerFleet` holds one `DockerBackend` per engine endpoint (`CONCLAVE_DOCKER_HOSTS`).

Placement: a new sandbox goes to the answering engine with the most free capacity, that is
`capacity` (`CONCLAVE_SANDBOX_ENGINE_CAPACITY`) less the sandboxes this gateway holds there;
ties go to the engine listed first. Each gateway process counts its own sandboxes: no engine
call is on the path of a start.

Health: every `CHECK_EVERY_S` each engine is pinged with a `PING_TIMEOUT_S` timeout. An engine
that does not answer (or whose container create failed and whose ping then fails) is drained:
no new placements; a start in flight on it and every call on its sandboxes end at once with
`EngineLost` (SANDBOX_UNAVAILABLE, retryable), so the retry is placed on another engine; and
its containers' removal is owed until it answers again. The next check that finds it
answering removes what is owed and places on it again.

The health checks and the work left running on a drained engine (blocked in a thread on it)
live in the fleet's task group (`BackgroundWork`), entered when the pool opens the fleet and
left when it closes it: none of it outlives the fleet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import anyio
from docker.errors import DockerException

from sandbox.backend import (
    EngineLost,
    SandboxError,
    SandboxSpec,
    SandboxStartError,
)
from sandbox.backends.docker import DockerBackend, DockerSandbox
from sandbox.backends.docker_client import docker_client
from sandbox.background import BackgroundWork
from tools.calls import StartStage

T = TypeVar("T")
ABANDONED_WAIT_S = 5.0  # at close, how long starts left on a drained engine may still end
CHECK_EVERY_S = 0.5
PING_TIMEOUT_S = 2.0  # generous: a busy 2-core machine must not drain a live engine
log = logging.getLogger("conclave.sandbox")


class _Engine:
    """One engine of the fleet: its backend, whether it answers, what it holds and owes."""

    def __init__(self, backend: DockerBackend) -> None:
        self.backend = backend
        self.host = backend.docker_host
        self.lost = anyio.Event()  # set when drained; a fresh one when it answers again
        self.held = 0  # sandboxes of this gateway on it (placed and not yet removed)
        self.owed: set[str] = set()  # containers to remove once it answers again
        self._pinger: Any = None

    @property
    def answering(self) -> bool:
        return not self.lost.is_set()

    def _ping(self) -> None:
        if self._pinger is None:
            self._pinger = docker_client(self.host, timeout=PING_TIMEOUT_S)
        self._pinger.ping()

    async def answers(self) -> bool:
        """Whether the engine answers a ping within PING_TIMEOUT_S."""
        try:
            await anyio.to_thread.run_sync(self._ping)
        except (DockerException, OSError):
            return False
        return True

    def close(self) -> None:
        if self._pinger is not None:
            self._pinger.close()
            self._pinger = None


@dataclass(eq=False)
class _Running(Generic[T]):
    """Work on an engine, run in the fleet's task group: its caller takes the outcome if it
    ends before the engine is drained; otherwise the work ends alone, then `abandoned` gets
    its result."""

    done: anyio.Event = field(default_factory=anyio.Event)
    value: T | None = None
    error: Exception | None = None
    abandoned: Callable[[T], None] | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


class FleetSandbox:
    """A docker sandbox on one engine of the fleet; `engine_lost` is set if it is drained."""

    def __init__(self, fleet: DockerFleet, engine: _Engine, inner: DockerSandbox) -> None:
        self._fleet = fleet
        self._engine = engine
        self._inner = inner
        self._removed = False

    @property
    def engine_lost(self) -> anyio.Event:
        """Set while the sandbox's engine is drained. One that comes back serves again: a
        sandbox whose runner survived is warm; one whose runner died is replaced by the pool."""
        return self._engine.lost

    @property
    def description(self) -> str:
        return f"{self._inner.description} on {self._engine.host}"

    @property
    def container_id(self) -> str:
        return self._inner.container_id

    @property
    def launch_stages(self) -> tuple[StartStage, ...]:
        return self._inner.launch_stages

    async def died(self) -> str:
        """Its container's death, or its engine drained, whichever comes first."""
        lost = f"the Docker engine at {self._engine.host} stopped answering"
        said: list[str] = []

        async def first(reason: Any) -> None:
            said.append(await reason())
            race.cancel_scope.cancel()

        async def engine_lost() -> str:
            await self.engine_lost.wait()
            return lost

        async with anyio.create_task_group() as race:
            race.start_soon(first, self._inner.died)
            race.start_soon(first, engine_lost)
        return said[0]

    async def exit_reason(self) -> str | None:
        lost = f"the Docker engine at {self._engine.host} stopped answering"
        if self.engine_lost.is_set():
            return lost
        reason = await self._fleet.unless_lost(self._engine, self._inner.exit_reason())
        return lost if isinstance(reason, EngineLost) else reason

    async def oom_kills(self) -> int:
        return await self._inner.oom_kills()

    async def pids_refusals(self) -> int:
        return await self._inner.pids_refusals()

    async def kill(self) -> None:
        if self._removed:
            return
        self._removed = True
        self._engine.held -= 1
        if self.engine_lost.is_set():
            self._engine.owed.add(self.container_id)
            return
        try:
            done = await self._fleet.unless_lost(self._engine, self._inner.kill())
        except SandboxError as exc:  # the engine failed before its health check noticed
            log.warning("removal of %s failed (%s): owed to the engine", self.description, exc)
            done = EngineLost(str(exc))
        if isinstance(done, EngineLost):
            self._engine.owed.add(self.container_id)


class DockerFleet:
    name = "docker"
    isolates = True
    caps_processes = True  # each container's pids limit

    def __init__(
        self, docker_hosts: Sequence[str], image: str, capacity: int, engine_threads: int = 8
    ) -> None:
        self.image = image
        self.capacity = capacity
        # Each engine's calls in a bounded pool of its own (`SandboxConfig.engine_threads`).
        self.engines = [
            _Engine(DockerBackend(host, image, engine_threads)) for host in docker_hosts
        ]
        self._work = BackgroundWork("the docker fleet")
        self._checking = False  # the health checks started (at the first launch)
        self._abandoned: set[_Running[Any]] = set()  # starts left running on drained engines

    async def open(self) -> None:
        await self._work.open()
        for engine in self.engines:  # each reads its engine's death events
            await engine.backend.open()

    def held(self) -> dict[str, int]:
        """Sandboxes this gateway holds per engine host."""
        return {engine.host: engine.held for engine in self.engines}

    def draining(self) -> list[str]:
        """The hosts of engines drained now (not answering)."""
        return [engine.host for engine in self.engines if not engine.answering]

    def _place(self) -> _Engine:
        answering = [engine for engine in self.engines if engine.answering]
        if not answering:
            hosts = ", ".join(engine.host for engine in self.engines)
            raise EngineLost(f"no Docker engine answers ({hosts}); retry shortly")
        best = max(answering, key=lambda engine: self.capacity - engine.held)
        if best.held >= self.capacity:
            raise SandboxStartError(
                f"every answering Docker engine holds its {self.capacity} sandboxes; retry "
                "shortly (or raise CONCLAVE_SANDBOX_ENGINE_CAPACITY)"
            )
        return best

    async def launch(self, spec: SandboxSpec) -> FleetSandbox:
        if not self._checking:
            self._checking = True
            await self._work.start_forever(self._check_forever)
        engine = self._place()
        engine.held += 1
        try:
            launched = await self.unless_lost(
                engine, engine.backend.launch(spec), abandoned=self._owe_container(engine)
            )
        except SandboxStartError:
            engine.held -= 1
            await self._check(engine)  # a failed create drains an engine that stopped answering
            if not engine.answering:
                raise EngineLost(f"the Docker engine at {engine.host} stopped answering") from None
            raise
        except BaseException:
            engine.held -= 1
            raise
        if isinstance(launched, EngineLost):
            engine.held -= 1
            raise launched
        assert isinstance(launched, DockerSandbox)
        return FleetSandbox(self, engine, launched)

    def _owe_container(self, engine: _Engine) -> Callable[[Any], None]:
        """What to do with a start abandoned when its engine was drained: once it ends,
        remove the container it made (when the engine answers again)."""

        def owe(launched: Any) -> None:
            engine.owed.add(launched.container_id)

        return owe

    async def unless_lost(
        self,
        engine: _Engine,
        work: Coroutine[Any, Any, T],
        abandoned: Callable[[T], None] | None = None,
    ) -> T | EngineLost:
        """`work`'s result, or EngineLost as soon as the engine is drained first (the work,
        blocked in a thread on the engine, is left to finish in the fleet's task group;
        `abandoned` then gets its result)."""
        lost = engine.lost
        running: _Running[T] = _Running()
        if not self._work.start(self._run, work, running):
            work.close()
            return EngineLost(f"the docker fleet is closed: nothing runs on {engine.host}")
        try:
            await _until_either(running.done, lost)
        finally:
            if not running.done.is_set():  # drained, or the caller was cancelled
                running.abandoned = abandoned
                if abandoned is not None:
                    self._abandoned.add(running)
        if running.done.is_set():
            return running.outcome()
        return EngineLost(f"the Docker engine at {engine.host} stopped answering")

    async def _run(self, work: Coroutine[Any, Any, T], running: _Running[T]) -> None:
        try:
            running.value = await work
        except Exception as exc:  # its caller hears it, unless it stopped waiting
            running.error = exc
        finally:
            running.done.set()
            self._abandoned.discard(running)
        if running.abandoned is not None and running.error is None:
            running.abandoned(cast(T, running.value))

    async def _check_forever(self) -> None:
        while True:
            async with anyio.create_task_group() as checks:
                for engine in self.engines:
                    checks.start_soon(self._check, engine)
            await anyio.sleep(CHECK_EVERY_S)

    async def _check(self, engine: _Engine) -> None:
        """Drain the engine if it does not answer; bring it back (and pay what it is owed) if
        it answers again."""
        if not await engine.answers():
            if engine.answering:
                log.warning("Docker engine at %s stopped answering: drained", engine.host)
                engine.lost.set()
            return
        if not engine.answering:
            log.warning("Docker engine at %s answers again: placing on it", engine.host)
            engine.lost = anyio.Event()
        await self._pay(engine)

    async def _pay(self, engine: _Engine) -> None:
        """Remove the containers a drained engine was owed."""
        for container_id in list(engine.owed):
            try:
                await engine.backend.remove(container_id)
            except SandboxError:
                return  # still not answering; the next check tries again
            engine.owed.discard(container_id)

    async def aclose(self) -> None:
        """Stop the health checks, give the starts left on drained engines `ABANDONED_WAIT_S`
        to end, remove what the engines are owed, then cancel the work still running on a
        drained engine and leave the task group (a docker call blocked in its thread ends
        first, at the SDK's timeout at most)."""
        with anyio.CancelScope(shield=True):  # a teardown begun is finished
            await self._work.stop_forever()
            if self._abandoned:  # a start its engine finishes late still owes its container
                with anyio.move_on_after(ABANDONED_WAIT_S):
                    for running in list(self._abandoned):
                        await running.done.wait()
            for engine in self.engines:
                if engine.owed and await engine.answers():
                    await self._pay(engine)
                if engine.owed:
                    log.warning(
                        "Docker engine at %s still owes removal of %d containers: run "
                        "'conclave sandbox gc' when it answers",
                        engine.host,
                        len(engine.owed),
                    )
                await anyio.to_thread.run_sync(engine.close)
        # Outside the shield: a task group is left from the cancel scope it was entered in,
        # the engines' own (entered after the fleet's, in `open`) first.
        for engine in reversed(self.engines):
            await engine.backend.aclose()
        self._work.cancel()
        await self._work.aclose()


async def _until_either(first: anyio.Event, second: anyio.Event) -> None:
    """Return once either event is set."""
    async with anyio.create_task_group() as race:
        race.start_soon(_cancel_when_set, second, race.cancel_scope)
        await first.wait()
        race.cancel_scope.cancel()


async def _cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
