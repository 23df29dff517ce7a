"""The warm pool: the `ToolExecutor` the gateway dispatches to.

Sandboxes are keyed by (tenant, agent, limits profile) and never shared across identities;
a tool with network rights runs in sandboxes of their own (the profile's `egress`), the only
ones the egress proxy serves;
each sandbox serves one call at a time, so an agent's parallel calls get parallel sandboxes.
A sandbox is started on first use (or by `prewarm`), returned warm after each call (also
after a timeout the runner killed, or a cancel it answered: only the call's processes died),
recycled after `recycle_after` calls (its successor started a tenth of that ahead, so the
call after is warm) or after any other kill (OOM, CPU, output cap, dead runner), and reaped
after `idle_s` without calls. With `replace_killed` (the gateway's
choice), a sandbox a kill tore down is replaced in the background at once, so the retry the
kill invites is warm. A call's wall limit and how long the pool waits for a sandbox are read from
`tools.calls.time_limit`.

Fair sharing: at most `pool_max` exist at once (an idle one of anyone is torn down to
make room); of those in use a tenant and an agent hold at most their share, and a tenant has
at most so many starting and begins them no faster than its start rate
(`sandbox.pool.fair_share`). A call that cannot have one waits up to `queue_ms` (never past its
deadline) in a queue served round robin by tenant
(`sandbox.pool.fair_queue`), at most `queue_max` calls per tenant; then it gets
`SANDBOX_UNAVAILABLE` (retryable), or the deadline error if its deadline came first. A call
that may not queue (`Invocation.may_queue`: a hedge, the gateway's second attempt of a slow
call) is refused at once instead, so it only ever takes a free slot of its caller's share,
and never while every sandbox its agent has in use is still starting (the call it races waits
for its start, which ends sooner than a second one would).

A cancelled call's sandbox, and a cold start that outlived its caller's deadline, go to the
idle pool when they are ready; the identity's next call waits for them instead of starting
another (`sandbox.pool.arrivals`). With `spares`, the pool keeps pre-started sandboxes that belong
to a tenant but no identity yet, for its agents it has not seen (`sandbox.pool.spares`).

Subscriptions: a call that subscribed one of the sandbox's MCP servers (`Invocation.hold`)
keeps that sandbox from idle reaping for the hold's time after it (it is evicted for room
after every idle one that is not held); while it sits idle held, its servers are watched
(`idle_watch`) so their resource updates reach the gateway between calls.

The caps, the queue, the spares and the workspace quota are the pool's `SandboxConfig`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import anyio

from protocol import CallUsage, ErrorCode, ExitReason, SerfError
from sandbox.backend import SandboxBackend, SandboxError, SandboxSpec
from sandbox.background import BackgroundWork
from sandbox.instance import (
    CANCEL_ANSWER_S,
    DEFAULT_WORKSPACE_ROOT,
    EgressGate,
    Sandbox,
    StaleSandboxError,
    create_workspace,
    remove_workspace,
)
from sandbox.pool.arrivals import Arrivals, Arriving, StartsByDeadline
from sandbox.pool.fair_queue import FairQueue, Waiter
from sandbox.pool.fair_share import FairShares, Grant, PoolFullError
from sandbox.pool.idle_sandboxes import IdleSandboxes
from sandbox.pool.profiles import SPARE_AGENT, PoolKey, profile_for
from sandbox.pool.sandbox_uids import SandboxUids
from sandbox.pool.spares import SpareKey, Spares
from sandbox.sandbox_config import DIRECT_POOL, SandboxConfig
from sandbox.unavailable import unavailable_error
from tools.calls import CallLimits, Invocation, Outcome, TimeLimit

log = logging.getLogger("conclave.sandbox")


def within_deadline(invocation: Invocation) -> Invocation:
    """The invocation with the wall limit a call starting now may have (`TimeLimit`)."""
    wall_ms = TimeLimit.of(invocation).wall_ms()
    if wall_ms == invocation.limits.timeout_ms:
        return invocation
    return replace(invocation, limits=replace(invocation.limits, timeout_ms=wall_ms))


def _too_late(invocation: Invocation, started: float) -> Outcome:
    """No sandbox was ready before the deadline: nothing ran, and the caller hears it now."""
    waited = (time.monotonic() - started) * 1000
    error = SerfError.of(
        ErrorCode.DEADLINE_EXCEEDED,
        f"not started: no sandbox was ready before the deadline (waited {waited:.0f} ms)",
        details={"tool": invocation.tool, "waited_ms": int(waited)},
    )
    return Outcome(usage=CallUsage(wall_ms=waited, exit_reason=ExitReason.ERROR), error=error)


def _recycle_ahead(config: SandboxConfig) -> int:
    """How many calls before its recycle a sandbox's successor starts (a tenth: at 50
    calls a second, a second ahead); 0 when every sandbox serves one call."""
    return config.recycle_after // 10 if config.recycle_after > 1 else 0


class SandboxPool:
    def __init__(
        self,
        backend: SandboxBackend,
        config: SandboxConfig = DIRECT_POOL,
        *,
        tool_modules: Iterable[str] = ("tools.builtin",),
        startup_timeout_s: float = 30.0,
        workspace_root: Path | None = None,
        replace_killed: bool = False,
        egress: EgressGate | None = None,
    ) -> None:
        """`config`: the operator's caps, queue, spares and workspace quota (the gateway's
        `settings.sandbox`); its `tenant_max`, `agent_max` unset are half and a quarter of
        `pool_max` (at least one)."""
        self.backend = backend
        self.config = config
        self.tool_modules = tuple(tool_modules)
        self._shares = FairShares(config)
        self._queue: FairQueue[PoolKey, Grant] = FairQueue(config.queue_max)
        self.startup_timeout_s = startup_timeout_s
        self.workspace_root = workspace_root or DEFAULT_WORKSPACE_ROOT
        # Start a replacement in the background when a kill tears a sandbox down (the gateway
        # turns this on: ATBA's kills invite retries, which should find a warm sandbox).
        self.replace_killed = replace_killed
        self.egress = egress  # serves each sandbox's egress socket (the gateway's proxy)
        self._idle = IdleSandboxes()
        self._uids = SandboxUids()  # each live sandbox's own host uid
        self._busy: set[Sandbox] = set()
        self._spares = Spares(config.spares)
        self._lock = anyio.Lock()
        self._closed = False
        self._closing = False  # `aclose` began: no more idle watches
        self._interrupted = False  # `interrupt` killed the busy sandboxes: a shutdown
        self._work = BackgroundWork()  # the pool's task group: everything off the callers' path
        # Per identity, the sandboxes on their way to its idle pool (`Arriving`): a retry
        # after a cancel or a deadline finds one warm instead of starting another.
        self._arrivals = Arrivals()
        self._rate_wakeups: set[str] = set()  # tenants whose queue is served at a next start
        self._starts_by_deadline = StartsByDeadline(
            self._work, self._arrivals, self._fulfil, self._checkin
        )
        self.started = 0  # sandboxes ever started, for tests and the bench
        self.recycled = 0

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def size(self) -> int:
        idle = self._idle.count
        return self._shares.starting + self._spares.count + len(self._busy) + idle

    @property
    def tenant_max(self) -> int:
        """How many sandboxes a tenant may have in use at once."""
        return self._shares.tenant_max

    @property
    def agent_max(self) -> int:
        """How many sandboxes an agent may have in use at once."""
        return self._shares.agent_max

    @property
    def tenant_starts_max(self) -> int | None:
        """How many sandboxes a tenant may have starting at once (None: no cap)."""
        return self._shares.tenant_starts_max

    @property
    def ready_spares(self) -> int:
        """How many spares are started and waiting for an identity."""
        return len(self._spares.ready)

    def tenant_stats(self) -> dict[str, tuple[int, int, int]]:
        """Per tenant: sandboxes in use (busy or starting), idle ones kept warm for it, and
        agents with one in use (the console's sandboxes page)."""
        return self._shares.tenant_stats(self._idle.per_tenant())

    async def execute(self, invocation: Invocation) -> Outcome:
        principal = invocation.context.principal
        key = (
            principal.tenant,
            principal.agent,
            profile_for(invocation.limits, bool(invocation.network)),
        )
        started, asked_ns = time.monotonic(), time.time_ns()
        for attempt in (1, 2):
            try:
                sandbox = await self._checkout_by_deadline(key, invocation)
            except SandboxError as exc:
                usage = CallUsage(
                    wall_ms=(time.monotonic() - started) * 1000, exit_reason=ExitReason.ERROR
                )
                error = unavailable_error(exc)
                assert error is not None  # a SandboxError always has its envelope
                return Outcome(usage=usage, error=error)
            if sandbox is None:
                return _too_late(invocation, started)
            recycle = True  # if the call is cancelled midway, the sandbox cannot be trusted
            lost = True  # ... and it was lost to a kill unless the runner answers in time
            waited_ms = (time.monotonic() - started) * 1000
            # A sandbox started for this call: its start's stages go into the call's trace.
            fresh = (
                sandbox.calls == 0 and sandbox.stages[:1] and sandbox.stages[0].start_ns >= asked_ns
            )
            stages = tuple(sandbox.stages) if fresh else ()
            try:
                result = await sandbox.call(within_deadline(invocation))
                if invocation.hold is not None and result.outcome.ok:
                    sandbox.hold(invocation.hold)
                recycle = result.recycle or sandbox.calls >= self.config.recycle_after
                lost = result.torn_down_at_timeout
                outcome = self._cut_by_shutdown(result.outcome)
                return replace(outcome, waited_ms=waited_ms, start_stages=stages)
            except StaleSandboxError:
                lost = False  # the runner was gone before the call: nothing was killed
                if attempt == 2:
                    raise
            finally:
                if sandbox.cancelled_call is not None:
                    # Cancelled: the runner was told to kill the call; the sandbox goes back
                    # warm once it answers, off the cancelled caller's path.
                    arriving = self._arrivals.expect(key, CANCEL_ANSWER_S)
                    self._work.start(self._settle_cancelled, key, sandbox, arriving)
                else:
                    with anyio.CancelScope(shield=True):
                        await self._checkin(key, sandbox, recycle)
                    if lost and self.replace_killed:
                        self._work.start(self._replace, key)
        raise AssertionError("unreachable")

    def _cut_by_shutdown(self, outcome: Outcome) -> Outcome:
        """A call whose sandbox `interrupt` killed was not the tool's failure: the gateway is
        stopping, and the caller may retry (on another replica, or after the restart)."""
        killed = outcome.error is not None and outcome.error.code == ErrorCode.SANDBOX_KILLED
        if not (self._interrupted and killed):
            return outcome
        error = SerfError.of(
            ErrorCode.SHUTTING_DOWN,
            "the gateway is shutting down and stopped this call after its grace; retry it on"
            " another gateway, or once this one is back",
        )
        return replace(outcome, error=error)

    async def _settle_cancelled(self, key: PoolKey, sandbox: Sandbox, arriving: Arriving) -> None:
        """Check in a cancelled call's sandbox once its runner answered the cancel (warm), or
        tear it down (and replace it) if it did not."""
        try:
            warm = await sandbox.settle_cancelled()
            recycle = not warm or sandbox.calls >= self.config.recycle_after
            await self._checkin(key, sandbox, recycle=recycle)
        finally:
            self._arrivals.arrived(key, arriving)
        if not warm and self.replace_killed:
            await self._replace(key)

    async def _replace(self, key: PoolKey) -> None:
        """Start a sandbox for `key` in place of one a kill tore down, so the retry the kill
        invites is not a cold start."""
        try:
            await self._start_warm(key)
        except Exception:  # a warm start is a courtesy; the next call starts one anyway
            log.info("could not replace a killed sandbox for %s/%s", *key[:2], exc_info=True)

    async def _checkout_by_deadline(self, key: PoolKey, invocation: Invocation) -> Sandbox | None:
        """A sandbox, or None when none is ready before the call's deadline.

        The call first waits its turn in the queue (up to `queue_ms`, never past the
        deadline). A cold start (seconds under load) must not hold a call past its deadline
        either: the caller stops waiting then, and the start finishes in the background into
        the idle pool, so the next call of this identity finds it warm."""
        limit = TimeLimit.of(invocation)
        if key in self._arrivals and invocation.may_queue:
            await self._arrivals.wait(key, limit)
        left_s = limit.left_s()
        queue_s = self.config.queue_ms / 1000 if invocation.may_queue else 0.0
        wait_s = queue_s if left_s is None else min(queue_s, left_s)
        grant = await self._admission(key, wait_s, hedge=not invocation.may_queue)
        if grant is None:
            if left_s is not None and left_s <= queue_s:
                return None  # the deadline ended the wait
            raise PoolFullError(self._shares.refusal(*key[:2]))
        if left_s is None or grant.sandbox is not None:
            sandbox = await self._fulfil(key, grant)  # no deadline, or nothing to start
        else:
            started = await self._starts_by_deadline.start(key, grant, limit)
            if started is None:
                return None
            sandbox = started
        if left_s is not None and (limit.left_s() or 0.0) < 0.001:  # too late to start
            await self._checkin(key, sandbox, recycle=False)
            return None
        return sandbox

    async def prewarm(self, tenant: str, agent: str, limits: CallLimits) -> None:
        """Start a sandbox for this identity and profile now, so its first call is warm."""
        await self._start_warm((tenant, agent, profile_for(limits)))

    async def _start_warm(self, key: PoolKey) -> None:
        grant = await self._admission(key, 0.0)
        if grant is None:
            raise PoolFullError(self._shares.refusal(*key[:2]))
        sandbox = await self._fulfil(key, grant)
        await self._checkin(key, sandbox, recycle=False)

    async def _admission(self, key: PoolKey, wait_s: float, *, hedge: bool = False) -> Grant | None:
        """Admit the call now, or queue it for up to `wait_s`; None when it was not admitted.
        A `hedge` (a call that may not queue) is refused while every sandbox its agent has in
        use is still starting: the call it races waits for its start, which ends sooner than a
        second one would."""
        async with self._lock:
            if self._closed:
                raise PoolFullError("the sandbox pool is shut down")
            for expired in self._idle.take_expired(self.config.idle_s):
                self._work.start(self._destroy, expired)
            racing_a_start = hedge and self._shares.only_starting(*key[:2])
            grant = None if racing_a_start else self._admit(key)
            if grant is not None or wait_s <= 0:
                return grant
            waiter = self._queue.join(key[0], key)
            if waiter is None:
                raise PoolFullError(
                    f"{self._queue.depth_per_tenant} calls of tenant {key[0]!r} already wait "
                    "for a sandbox; retry shortly (or raise CONCLAVE_SANDBOX_QUEUE_MAX)"
                )
        return await self._wait_for_grant(waiter, wait_s)

    def _serve_at_next_start(self, tenant: str) -> None:
        """The tenant's call was refused a start for its start rate: serve the queue when it
        may begin the next (no release of a sandbox need come by then)."""
        delay_s = self._shares.start_tokens.next_in_s(tenant)
        if delay_s > 0 and tenant not in self._rate_wakeups:
            self._rate_wakeups.add(tenant)
            self._work.start(self._serve_after, tenant, delay_s)

    async def _serve_after(self, tenant: str, delay_s: float) -> None:
        await anyio.sleep(delay_s + 0.002)  # a timer may fire a clock tick early
        async with self._lock:
            self._rate_wakeups.discard(tenant)
            self._queue.serve(self._admit)  # refused again: the next wake-up is set

    async def _wait_for_grant(self, waiter: Waiter[PoolKey, Grant], wait_s: float) -> Grant | None:
        try:
            with anyio.move_on_after(wait_s):
                await waiter.granted.wait()
        except BaseException:  # cancelled: what was granted goes to the next in line
            if waiter.grant is not None:
                self._give_back(waiter.key, waiter.grant)
            raise
        finally:
            self._queue.leave(waiter)
        return waiter.grant

    def _admit(self, key: PoolKey, *, fresh: bool = False) -> Grant | None:
        """The call's grant, if its tenant and agent are under their caps and a sandbox can be
        had: its own idle one (unless `fresh`), or a new one under the global cap (an idle
        one of anyone is evicted to make room). Marks it in use."""
        tenant, agent, _ = key
        if self._closed or not self._shares.may_use(tenant, agent):
            return None
        idle = None if fresh else self._idle.get(key)
        tokens = self._shares.start_tokens
        spare = None if idle or not tokens.may_take(tenant) else self._spares.take(tenant, key[2])
        if idle:
            sandbox = idle.pop()
            self._busy.add(sandbox)
            grant = Grant(sandbox=sandbox)
        elif spare is not None:  # from now on it is this identity's, workspace and all
            tokens.take(tenant)  # the spare is started again: the tenant's new sandbox
            spare.spec = replace(spare.spec, tenant=tenant, agent=agent)
            self._busy.add(spare)
            self._spares.last_cold = (tenant, key[2])
            grant = Grant(sandbox=spare)
        else:
            if not self._shares.may_start(tenant):
                self._serve_at_next_start(tenant)
                return None
            grant = Grant()
            if self.size >= self.config.pool_max:
                grant.evicted = self._spares.for_room() or self._idle.take_oldest(
                    self._shares.in_use_per_tenant()
                )
                if grant.evicted is None:
                    return None
            self._shares.start_begun(key)
        self._shares.use(tenant, agent)
        return grant

    def _release(self, key: PoolKey) -> None:
        """One sandbox of this identity is no longer in use: serve the queue."""
        self._shares.release(*key[:2])
        self._queue.serve(self._admit)
        self._top_up_spares()

    def _give_back(self, key: PoolKey, grant: Grant) -> None:
        """Undo a grant its call no longer wants (it was cancelled while queued)."""
        if grant.sandbox is not None:
            self._busy.discard(grant.sandbox)
            self._idle.add(key, grant.sandbox)
        else:
            self._shares.started_or_not(key)
            if grant.evicted is not None:
                self._work.start(self._destroy, grant.evicted)
        self._release(key)

    async def _fulfil(self, key: PoolKey, grant: Grant) -> Sandbox:
        """The sandbox a grant stands for: its warm one, or one started now."""
        if grant.sandbox is not None:
            return grant.sandbox
        try:
            if grant.evicted is not None:
                await self._destroy(grant.evicted)
            sandbox = await self._start(key)
        except BaseException:
            async with self._lock:
                self._shares.started_or_not(key)
                self._release(key)
            raise
        async with self._lock:
            self._shares.started_or_not(key)
            self._busy.add(sandbox)
            self._spares.last_cold = (key[0], key[2])
            if self._shares.tenant_starts_max is not None:
                self._queue.serve(self._admit)  # the tenant's next start may go now
        return sandbox

    async def _start(self, key: PoolKey) -> Sandbox:
        tenant, agent, profile = key
        sandbox_id = f"sbx-{uuid.uuid4().hex[:12]}"
        quota = self.config.workspace_quota
        uid = self._uids.claim()
        try:
            workspace = create_workspace(self.workspace_root, sandbox_id, quota, uid)
        except BaseException:
            self._uids.release(uid)
            raise
        spec = SandboxSpec(
            sandbox_id, tenant, agent, profile, workspace, self.tool_modules, quota,
            self.config.cpus, uid,
        )  # fmt: skip
        try:
            sandbox = await Sandbox.open(self.backend, spec, self.startup_timeout_s, self.egress)
        except BaseException:
            remove_workspace(workspace)
            self._uids.release(uid)  # a start that failed tore down what it had started
            raise
        self.started += 1
        return sandbox

    async def _checkin(self, key: PoolKey, sandbox: Sandbox, recycle: bool) -> None:
        async with self._lock:
            self._busy.discard(sandbox)
            keep = not (recycle or sandbox.closed or self._closed)
            if keep:
                self._idle.add(key, sandbox)
                watch = None if self._closing else sandbox.begin_watch()
                if watch is not None:  # begun before anyone can take it from the idle pool
                    self._work.start(watch.run)
                if sandbox.calls == self.config.recycle_after - _recycle_ahead(self.config):
                    self._work.start(self._start_ahead, key)
            self._release(key)
        if not keep:
            self.recycled += 1
            # Off the caller's path: a killed call answers at its limit, not after the
            # teardown (which under load takes longer than the calls a deadline allows).
            self._work.start(self._destroy, sandbox)

    async def _start_ahead(self, key: PoolKey) -> None:
        """Start the sandbox that takes over from this identity's one nearing its recycle,
        so the call after the recycle is warm (an agent in service would otherwise meet a
        cold start every `recycle_after` calls). Refused room, or failed: that call starts
        one, as before."""
        async with self._lock:
            grant = self._admit(key, fresh=True)
        if grant is None:
            return
        try:
            sandbox = await self._fulfil(key, grant)
        except Exception:
            log.info("could not start ahead of a recycle for %s/%s", *key[:2], exc_info=True)
            return
        await self._checkin(key, sandbox, recycle=False)

    def _top_up_spares(self) -> None:
        """Start each wanted spare that is missing, while there is room (a spare never evicts
        anything); tear down spares of profiles no longer wanted."""
        if self._closed:
            return
        wanted = self._spares.wanted()
        for unwanted in self._spares.unwanted(wanted):
            self._work.start(self._destroy, unwanted)
        for spare in self._spares.missing(wanted):
            if self.size >= self.config.pool_max:
                return
            self._spares.starting.add(spare)
            self._work.start(self._start_spare, spare)

    async def _start_spare(self, spare: SpareKey) -> None:
        """Start the tenant's spare (in its cgroup; of no agent until one takes it)."""
        tenant, profile = spare
        sandbox: Sandbox | None = None
        try:
            sandbox = await self._start((tenant, SPARE_AGENT, profile))
        except Exception:  # a spare is a courtesy; a call starts its own sandbox anyway
            log.info("could not start a spare sandbox of %s MB", profile.memory_mb, exc_info=True)
        finally:
            async with self._lock:
                self._spares.starting.discard(spare)
                if sandbox is not None and not self._closed:
                    self._spares.ready[spare], sandbox = sandbox, None
                    self._queue.serve(self._admit)  # a queued call may take it
        if sandbox is not None:  # the pool shut down while it started
            await self._destroy(sandbox)

    async def reap_idle(self) -> int:
        """Tear down sandboxes idle for longer than `idle_s`; returns how many."""
        async with self._lock:
            expired = self._idle.take_expired(self.config.idle_s)
        for sandbox in expired:
            await self._destroy(sandbox)
        return len(expired)

    async def _reap_forever(self) -> None:
        """Start the configured spares, then reap idle sandboxes forever (and start spares
        again where reaping made room)."""
        while True:
            async with self._lock:
                self._top_up_spares()
            await anyio.sleep(max(1.0, self.config.idle_s / 4))
            try:
                await self.reap_idle()
            except Exception:  # a teardown that failed; the next round tries the others
                log.warning("reaping idle sandboxes failed", exc_info=True)

    async def _destroy(self, sandbox: Sandbox) -> None:
        with anyio.CancelScope(shield=True):  # a teardown begun is finished: nothing leaks
            try:
                await sandbox.close()
            finally:
                remove_workspace(sandbox.spec.workspace)
                if sandbox.torn_down:  # every process of it is gone: its uid is free
                    self._uids.release(sandbox.spec.uid)

    async def interrupt(self) -> None:
        """Take no more calls and kill the busy sandboxes: each call in them ends now with a
        SHUTTING_DOWN answer (a gateway's shutdown after its grace); `aclose` still follows."""
        async with self._lock:
            self._closed = self._interrupted = True
            busy = list(self._busy)
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as closing:
                for sandbox in busy:
                    closing.start_soon(_close_quietly, sandbox)

    async def open(self) -> SandboxPool:
        """Enter the pool's task group, in the task that will `aclose` the pool: the reaper
        and all the pool's work off its callers' path run in it. `async with pool` opens it."""
        await self.backend.open()  # first: its own background work is left after the pool's
        await self._work.open()
        await self._work.start_forever(self._reap_forever)
        return self

    async def __aenter__(self) -> SandboxPool:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Tear down every sandbox (idle and busy) and the backend, and leave the task group
        once the work still running in it has ended."""
        with anyio.CancelScope(shield=True):
            self._closing = True
            for sandbox in self._idle.every():
                await sandbox.stop_watching()  # a watch runs until stopped: end each first
            await self._work.settled()  # late starts land in the idle pool first
            async with self._lock:
                self._closed = True
                everything = self._idle.every() + list(self._busy)
                everything += self._spares.drain()
                self._idle.clear()
            for sandbox in everything:
                await self._destroy(sandbox)
        # Outside the shield: a task group is left from the cancel scope it was entered in
        # (the backend's too: it shields its own teardown).
        await self._work.aclose()
        await self.backend.aclose()


async def _close_quietly(sandbox: Sandbox) -> None:
    try:
        await sandbox.close()
    except Exception:  # one sandbox's failure must not keep the others running
        log.warning("could not kill sandbox %s", sandbox.label, exc_info=True)
