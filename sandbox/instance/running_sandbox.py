"""One running sandbox: a launched backend process and the runner connected to it.

`Sandbox.open` listens on the workspace socket, asks the backend to launch, and waits for the
runner's hello (or for the sandbox to die, whichever comes first). `Sandbox.call` sends one
invocation and turns the runner's answer into an `Outcome`. At the call's wall limit the
runner kills the call's processes and answers; the sandbox stays warm. When the runner does
not answer within the call's wall limit plus a grace period, the whole sandbox is torn down:
the call is dead for real even if the runner itself was stopped.

The runner shares its sandbox with tool code, so its report is a claim too: what the host
makes of its reply (checked, clamped to what the host granted and saw) is `runner_reply`'s.

Egress: with an `EgressGate` (the gateway's egress proxy) and a profile whose tools have
network rights (`SandboxProfile.egress`), the gate serves the sandbox's egress socket
(`egress_socket`, in the workspace) while the sandbox is open, and checks each connection
against `current_call`, the one call the sandbox runs at a time; other sandboxes have no
egress socket at all. The runner sets
the call's proxy environment only when the call's tool has an allow-list.

Cancel: a call whose awaiting task is cancelled (its caller cancelled it or went away, or
the gateway's backstop gave up on it) sends the runner a cancel frame for it, and the runner
kills the call's process group (or passes `notifications/cancelled` to its MCP server) and
answers; `settle_cancelled` waits for that answer, off the caller's path, and only then may
the sandbox serve another call. A runner that does not answer the cancel within
`CANCEL_ANSWER_S` is torn down with its sandbox.

Events: before its reply the runner may send the call's events (its tool's progress and log
messages, its MCP server's notifications); they go to the invocation's `events`, which bounds
and checks them. They are the tool's word: nothing in them is recorded as usage.

MCP servers: an invocation with a `relay` (`tools.calls.ServerMessage`: an `mcp_stdio` tool's
call, or a message to its server) is sent as a relay request of its own
(`runner_wire.RelayRequest`: the server's spec and one JSON-RPC message), which the runner
relays to the server it keeps in this sandbox (started on first use). The server's
requests to the calling client (sampling, elicitation, roots), read with the call's other
frames, are `server_requests`'.

Notices: what the sandbox's MCP servers notify of their subscriptions (resource updates)
goes to `notices` (`idle_watch.NoticeGate`, given its receiver by the call that subscribed,
`hold`), during a call or, while the sandbox is held idle, through an `IdleWatch` the pool
begins (`begin_watch`) and the next call stops first.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup
from pydantic_core import to_jsonable_python

from protocol import CallUsage, ErrorCode, ExitReason, SerfError
from sandbox.backend import (
    EngineBound,
    EngineLost,
    LaunchedSandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    SandboxStartError,
)
from sandbox.instance.channel import ChannelClosed, OversizedFrame, RunnerChannel, accept, listen
from sandbox.instance.idle_watch import IdleWatch, NoticeGate
from sandbox.instance.runner_reply import (
    CallResult,
    ProtocolViolation,
    check_reply,
    output_over_cap,
    reply_outcome,
)
from sandbox.instance.server_requests import Undeclared, answer_server, check_declared
from sandbox.runner import (
    CANCEL,
    EGRESS_SOCKET_NAME,
    EVENT,
    EVENT_FIELD,
    MAX_EVENTS,
    MCP,
    NOTICE,
    NOTIFICATION_FIELD,
    SERVER_REQUEST,
    RelayRequest,
    RelayServer,
    WireLimits,
    frame_limit,
)
from sandbox.unavailable import unavailable_error
from tools.calls import (
    CallLimits,
    Invocation,
    Outcome,
    ServerMessage,
    StartStage,
    SubscriptionHold,
    TimeLimit,
    answer_deadline,
)

log = logging.getLogger("conclave.sandbox")

# How long a cancelled call's runner has to answer the cancel before its sandbox is torn down.
CANCEL_ANSWER_S = 2.0


class EgressGate(Protocol):
    """What serves a sandbox's egress socket (the gateway's egress proxy)."""

    async def attach(self, sandbox: Sandbox) -> None:
        """Listen on `sandbox.egress_socket`, checking connections against its current call."""
        ...

    async def detach(self, sandbox: Sandbox) -> None:
        """Stop listening for the sandbox and drop its open tunnels."""
        ...


class StaleSandboxError(SandboxError):
    """The sandbox's runner was already gone when a call was handed to it."""


class Sandbox:
    def __init__(
        self, spec: SandboxSpec, backend: SandboxBackend, launched: LaunchedSandbox
    ) -> None:
        self.spec = spec
        self.backend_name = backend.name
        # RLIMIT_NPROC counts a uid's processes host-wide: a backend that caps each sandbox's
        # processes on its own (a cgroup, a container) gets none, so sandboxes cannot starve
        # each other's forks; the others get it as their only cap (and say so at start-up).
        self._nproc = None if backend.caps_processes else spec.profile.pids
        self.launched = launched
        # On one of several Docker engines: while its engine does not answer, calls end at
        # once with SANDBOX_UNAVAILABLE instead of waiting on a runner that may be lost.
        self._engine = launched if isinstance(launched, EngineBound) else None
        self.channel: RunnerChannel | None = None
        self.hello: dict[str, Any] = {}
        # How its start went, stage by stage (`StartStage`): its first call's trace shows them.
        self.stages: list[StartStage] = []
        self.calls = 0
        self.created = time.monotonic()
        self.last_used = self.created
        self.closed = False
        self.torn_down = False  # its teardown returned: no process of it is left
        self._teardown_ended = anyio.Event()
        self._ids = itertools.count(1)
        self._oom_kills_seen = 0
        self._pids_refusals_seen = 0
        self.current_call: Invocation | None = None  # the call running now, for the egress gate
        self.cancelled_call: int | None = None  # the id of a cancel the runner has yet to answer
        self._cancelled_limits: CallLimits | None = None  # that call's limits (its frame's)
        self._egress: EgressGate | None = None
        self.notices = NoticeGate()  # its servers' resource updates, to who subscribed
        self.held_until = 0.0  # (monotonic) kept from idle reaping until then: a subscription
        self._idle_watch: IdleWatch | None = None

    @property
    def label(self) -> str:
        return f"{self.backend_name}:{self.spec.sandbox_id}"

    @property
    def egress_socket(self) -> Path:
        """Where, on the host, the egress gate listens for this sandbox's connections."""
        return self.spec.workspace / EGRESS_SOCKET_NAME

    @classmethod
    async def open(
        cls,
        backend: SandboxBackend,
        spec: SandboxSpec,
        startup_timeout_s: float,
        egress: EgressGate | None = None,
    ) -> Sandbox:
        listener, _ = await listen(spec.workspace)
        sandbox: Sandbox | None = None
        try:
            asked_ns = time.time_ns()
            sandbox = cls(spec, backend, await backend.launch(spec))
            launched = sandbox.launched.launch_stages
            sandbox.stages = [*launched] or [StartStage("spawn", asked_ns, time.time_ns())]
            if egress is not None and spec.profile.egress:
                await egress.attach(sandbox)
                sandbox._egress = egress
            await sandbox._connect(listener, startup_timeout_s)
            return sandbox
        except BaseException:
            if sandbox is not None:
                await sandbox.close()
            raise
        finally:
            await listener.aclose()

    async def _connect(self, listener: Any, startup_timeout_s: float) -> None:
        died: list[str] = []
        importing = False

        async def watch_for_death(scope: anyio.CancelScope) -> None:
            # Awaited, not polled: the process's exit, or the engine's death event.
            died.append(await self.launched.died())
            scope.cancel()

        with anyio.move_on_after(startup_timeout_s) as timeout_scope:
            async with anyio.create_task_group() as group:
                group.start_soon(watch_for_death, group.cancel_scope)
                self.channel = await accept(listener)
                try:
                    hello = await self.channel.receive()  # up, on the standard library alone
                    self._stage("runner start", _cpu_ms(hello))
                    importing = True
                    loaded = await self.channel.receive()  # its tool modules imported
                    importing = False
                except ChannelClosed:  # the runner went away (a tool module ended it?)
                    await anyio.sleep_forever()  # its death, awaited beside, says why
                self._stage("tool import", _cpu_ms(loaded) - _cpu_ms(hello))
                self.hello = {**hello, **loaded}
                group.cancel_scope.cancel()
        if died:
            # After its hello, the runner was importing the tool modules: one of them ended it.
            during = " importing its tool modules" if importing else ""
            raise SandboxStartError(f"sandbox {self.label} died while starting{during}: {died[0]}")
        if timeout_scope.cancelled_caught or self.channel is None:
            raise SandboxStartError(
                f"the runner in {self.launched.description} did not connect within "
                f"{startup_timeout_s} s: check the runtime image / Python in the sandbox"
            )
        errors = self.hello.get("import_errors") or {}
        if errors:
            raise SandboxStartError(f"tool modules failed to import in the sandbox: {errors}")

    def _stage(self, name: str, cpu_ms: float | None = None) -> None:
        """Record the start's next stage, from the end of the one before it to now."""
        begun = self.stages[-1].end_ns if self.stages else time.time_ns()
        self.stages.append(StartStage(name, begun, time.time_ns(), cpu_ms))

    @property
    def held(self) -> bool:
        """A subscription of one of its servers keeps it from idle reaping."""
        return self.held_until > time.monotonic()

    def hold(self, hold: SubscriptionHold) -> None:
        """Its servers were subscribed by a call: keep it `hold.hold_s` from now, and send
        their notices to `hold.heard`."""
        self.held_until = max(self.held_until, time.monotonic() + hold.hold_s)
        self.notices.heard = hold.heard

    def begin_watch(self) -> IdleWatch | None:
        """The watch of its servers while it is idle (the caller runs it), if it is held."""
        if not self.held or self.closed or self.channel is None:
            return None
        if self._idle_watch is not None and not self._idle_watch.done.is_set():
            return None  # back in the idle pool without a call: its watch runs on
        self._idle_watch = IdleWatch(self.channel, next(self._ids), self.notices)
        return self._idle_watch

    async def stop_watching(self) -> bool:
        """End the idle watch, if one runs: False when the sandbox was torn down for it."""
        watch, self._idle_watch = self._idle_watch, None
        if watch is not None and not await watch.stop(CANCEL_ANSWER_S):
            await self.close()
            return False
        return True

    async def call(self, invocation: Invocation) -> CallResult:
        assert self.channel is not None, "call() on a sandbox that is not open"
        if not await self.stop_watching():  # before a call: the channel in step again
            raise StaleSandboxError(f"{self.label}: its runner did not end the idle watch")
        self.calls += 1
        call_id = next(self._ids)
        limits = _wire_limits(invocation.limits, self._nproc)
        request: Mapping[str, Any]
        if invocation.relay is not None:  # a message for an MCP server the runner keeps
            request = _relay_request(call_id, invocation.relay, limits)
        else:
            request = {
                "id": call_id,
                "tool": invocation.tool,
                "entrypoint": invocation.entrypoint,
                "arguments": to_jsonable_python(invocation.arguments),
                "context": invocation.context.model_dump(mode="json"),
                "limits": limits,
                "egress": bool(invocation.network) and self._egress is not None,
            }
        started = time.monotonic()
        reply: dict[str, Any] | None = None
        gone = ""
        violation: ProtocolViolation | None = None
        undeclared: Undeclared | None = None
        if self._engine is not None and self._engine.engine_lost.is_set():
            return await self._engine_gone(started)
        self.current_call = invocation
        try:
            with anyio.CancelScope(shield=True):  # a frame goes whole, or the runner is lost
                await self.channel.send(request)
        except ChannelClosed as exc:
            # The runner died while idle: the call never started, another sandbox may run it.
            self.current_call = None
            await self.close()
            raise StaleSandboxError(str(exc)) from exc
        try:
            with anyio.move_on_after(TimeLimit.runner_wait_s(invocation.limits.timeout_ms)):
                try:
                    reply = await self._reply_after_events(self.channel, invocation, call_id)
                    if reply is not None:
                        check_reply(reply, call_id, invocation.limits, self.channel)
                except ChannelClosed as exc:
                    gone = str(exc)
                except OversizedFrame as exc:
                    violation = output_over_cap(invocation.limits, exc.size)
                except ProtocolViolation as exc:
                    violation = exc
                except Undeclared as exc:  # the caller cannot be asked: the call stops
                    undeclared = exc
                    await self._send_cancel(call_id, invocation.limits)
        except anyio.get_cancelled_exc_class():
            await self._send_cancel(call_id, invocation.limits)
            raise
        finally:
            # The runner reaps the call's processes before it takes the next call; a
            # connection opened after this finds no call and is refused.
            self.current_call = None
        self.last_used = time.monotonic()
        wall_ms = (self.last_used - started) * 1000
        if violation is not None:
            return await self._refuse_reply(violation, wall_ms)
        if undeclared is not None:  # its sandbox settles the cancel as a cancelled call's
            usage = CallUsage(wall_ms=wall_ms, exit_reason=ExitReason.ERROR, sandbox=self.label)
            return CallResult(Outcome(usage=usage, error=undeclared.error), recycle=False)
        if reply is None and self._engine is not None and self._engine.engine_lost.is_set():
            return await self._engine_gone(started)
        if reply is None:
            return self._runner_lost(invocation, wall_ms, gone)
        return await reply_outcome(reply, invocation.limits, wall_ms, self)

    async def _reply_after_events(
        self, channel: RunnerChannel, invocation: Invocation, call_id: int
    ) -> dict[str, Any] | None:
        """The call's reply; the events the runner sends before it go to the invocation's
        `events` (checked there), its server's requests to the client are answered. A runner
        sending more than `MAX_EVENTS` of them, or one of another call, breaks the protocol:
        its sandbox is torn down."""
        events = invocation.events
        deadline = answer_deadline(anyio.current_time(), invocation.limits.timeout_ms)
        if events is None or not events.capabilities:  # every request is refused at once
            return await self._read_events(channel, invocation, call_id, None, deadline)
        reply: dict[str, Any] | None = None
        failed: Exception | None = None
        async with anyio.create_task_group() as asking:
            try:
                reply = await self._read_events(channel, invocation, call_id, asking, deadline)
            except Exception as exc:  # raised outside the group, not as an ExceptionGroup
                failed = exc
            asking.cancel_scope.cancel()  # questions still open are moot once it answered
        if failed is not None:
            raise failed
        return reply

    async def _read_events(
        self,
        channel: RunnerChannel,
        invocation: Invocation,
        call_id: int,
        asking: TaskGroup | None,
        deadline: float,
    ) -> dict[str, Any] | None:
        frames = 0
        while True:
            frame = await self._receive_reply(channel, invocation.limits)
            kind = frame.get("type") if frame is not None else None
            if frame is None or kind not in (EVENT, SERVER_REQUEST, NOTICE):
                return frame
            frames += 1
            if frames > MAX_EVENTS or frame.get("id") != call_id:
                message = (
                    f"the sandbox's runner sent call {call_id} more than {MAX_EVENTS} events or"
                    " an event of another call: a protocol violation; the sandbox was torn down"
                )
                details = {"sandbox_killed": True, "protocol_violation": "events"}
                error = SerfError.of(ErrorCode.SANDBOX_KILLED, message, details=details)
                raise ProtocolViolation(error)
            if kind == NOTICE:
                self.notices.notice(frame)
            elif kind == SERVER_REQUEST:
                check_declared(invocation, frame)
                ask = (channel, call_id, frame, invocation.events, deadline)
                if asking is None:
                    await answer_server(*ask)
                else:
                    asking.start_soon(answer_server, *ask)
            elif invocation.events is None:
                continue
            elif NOTIFICATION_FIELD in frame:
                invocation.events.emit_notification(frame[NOTIFICATION_FIELD])
            else:
                invocation.events.emit_untrusted(frame.get(EVENT_FIELD))

    async def _send_cancel(self, call_id: int, limits: CallLimits) -> None:
        """Tell the runner to stop call `call_id` (its answer is read by `settle_cancelled`)."""
        assert self.channel is not None
        self.cancelled_call, self._cancelled_limits = call_id, limits
        with anyio.CancelScope(shield=True):
            try:
                await self.channel.send({"type": CANCEL, "id": call_id})
            except ChannelClosed:
                await self.close()  # the runner is gone, and the call's processes with it

    async def settle_cancelled(self) -> bool:
        """After a cancelled call: True once the runner answered the cancel (the call's
        processes are gone and the sandbox may serve the next call); False when the sandbox
        had to be torn down instead (the runner did not answer within `CANCEL_ANSWER_S`)."""
        call_id, self.cancelled_call = self.cancelled_call, None
        limits = self._cancelled_limits
        if self.closed or self.channel is None or call_id is None or limits is None:
            return False
        with anyio.move_on_after(CANCEL_ANSWER_S):
            try:
                while True:  # the call's answer, whether it ended by the cancel or before it
                    reply = await self._receive_reply(self.channel, limits)
                    if reply is None:  # the engine stopped answering
                        break
                    kind = reply.get("type")
                    if kind not in (EVENT, SERVER_REQUEST, NOTICE) and reply.get("id") == call_id:
                        self.last_used = time.monotonic()
                        return True
            except (ChannelClosed, OversizedFrame):
                pass
        await self.close()
        return False

    async def _refuse_reply(self, violation: ProtocolViolation, wall_ms: float) -> CallResult:
        """A reply the host does not pass on: the sandbox is torn down now (what else its
        runner sent cannot be trusted, nor read in step) and the call gets the refusal."""
        log.warning("refused a reply of %s: %s", self.label, violation.error.message)
        await self.close()
        usage = CallUsage(wall_ms=wall_ms, exit_reason=ExitReason.KILLED, sandbox=self.label)
        return CallResult(Outcome(usage=usage, error=violation.error), recycle=True)

    async def _receive_reply(
        self, channel: RunnerChannel, limits: CallLimits
    ) -> dict[str, Any] | None:
        """The runner's reply, read no further than the call's frame limit; None if the
        sandbox's engine stops answering first."""
        limit = frame_limit(limits.max_output_bytes)
        if self._engine is None:
            return await channel.receive(limit)
        lost = self._engine.engine_lost
        reply: dict[str, Any] | None = None
        closed: ChannelClosed | OversizedFrame | None = None
        async with anyio.create_task_group() as group:

            async def give_up_when_lost() -> None:
                await lost.wait()
                group.cancel_scope.cancel()

            group.start_soon(give_up_when_lost)
            try:
                reply = await channel.receive(limit)
            except (ChannelClosed, OversizedFrame) as exc:
                closed = exc
            group.cancel_scope.cancel()
        if closed is not None:
            raise closed
        return reply

    async def _engine_gone(self, started: float) -> CallResult:
        """The call's answer when the sandbox's engine stopped answering: retryable, and the
        sandbox is given up (its removal waits for the engine)."""
        await self.close()
        error = unavailable_error(
            EngineLost(
                f"{self.launched.description}: its engine stopped answering; a retry "
                "runs on another engine"
            )
        )
        assert error is not None
        wall_ms = (time.monotonic() - started) * 1000
        usage = CallUsage(wall_ms=wall_ms, exit_reason=ExitReason.ERROR, sandbox=self.label)
        return CallResult(Outcome(usage=usage, error=error), recycle=True)

    def _runner_lost(self, invocation: Invocation, wall_ms: float, gone: str) -> CallResult:
        """The answer for a runner that died or stopped answering. The sandbox is recycled:
        the pool tears it down (every process in it: the call is dead for real) right after
        this answer, off the caller's path, since a container's removal can take seconds on a
        loaded engine and the answer is due at the call's limit."""
        if gone:
            code, reason = ErrorCode.SANDBOX_KILLED, ExitReason.KILLED
            message = f"the sandbox's runner died during the call ({gone}); it was replaced"
        else:
            code, reason = ErrorCode.TOOL_TIMEOUT, ExitReason.TIMEOUT
            message = (
                f"the call ran past its wall-clock limit of {invocation.limits.timeout_ms} ms "
                "and its runner stopped answering; the sandbox was torn down"
            )
        usage = CallUsage(wall_ms=wall_ms, exit_reason=reason, sandbox=self.label)
        error = SerfError.of(code, message, details={"sandbox_killed": True})
        return CallResult(
            Outcome(usage=usage, error=error), recycle=True, torn_down_at_timeout=not gone
        )

    async def oom_killed_since_last_look(self) -> bool:
        kills = await self.launched.oom_kills()
        seen, self._oom_kills_seen = self._oom_kills_seen, kills
        return kills > seen

    async def pids_refused_since_last_look(self) -> bool:
        refusals = await self.launched.pids_refusals()
        seen, self._pids_refusals_seen = self._pids_refusals_seen, refusals
        return refusals > seen

    async def close(self) -> None:
        """Tear the sandbox down; a second caller waits for the first's teardown to end (the
        pool frees its uid and workspace only then)."""
        if self.closed:
            with anyio.CancelScope(shield=True):
                await self._teardown_ended.wait()
            return
        self.closed = True
        if self._idle_watch is not None:
            self._idle_watch.abandon()
        with anyio.CancelScope(shield=True):
            try:
                await self._tear_down()
            finally:
                self._teardown_ended.set()

    async def _tear_down(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._egress is not None:
                await self._egress.detach(self)
            if self.channel is not None:
                await self.channel.aclose()
            try:
                await self.launched.kill()
                self.torn_down = True
            except Exception:  # teardown must go on; `conclave sandbox gc` finds what is left
                log.warning("could not tear down %s", self.launched.description, exc_info=True)


def _cpu_ms(frame: dict[str, Any]) -> float:
    """The CPU a runner's start frame says it had used (a report, for the trace only)."""
    reported = frame.get("cpu_ms")
    return float(reported) if isinstance(reported, int | float) else 0.0


def _wire_limits(limits: CallLimits, max_processes: int | None) -> WireLimits:
    return {
        "memory_mb": limits.memory_mb,
        "cpu_seconds": limits.cpu_seconds,
        "timeout_ms": limits.timeout_ms,
        "max_output_bytes": limits.max_output_bytes,
        "max_processes": max_processes,
    }


def _relay_request(call_id: int, message: ServerMessage, limits: WireLimits) -> RelayRequest:
    """The runner's request relaying `message` to its MCP server (`runner_wire`)."""
    server = message.server
    spec: RelayServer = {
        "source": server.source,
        "package": server.package,
        "command": list(server.command),
        "env": dict(server.env),
    }
    capabilities = message.capabilities
    return {
        "type": MCP,
        "id": call_id,
        "server": spec,
        "message": {"method": message.method, "params": to_jsonable_python(message.params)},
        "capabilities": None if capabilities is None else dict(capabilities),
        "limits": limits,
    }
