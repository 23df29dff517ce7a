"""`TaskCascade`: a delegated task that ends takes everything done under it with it, on every
replica.

A hosted task's chain names it (`DelegationChain.tasks`, signed), every request its worker
makes for it carries that chain, and so does everything delegated from it, hop after hop: the
chain of a tool call three agents down names the three tasks above it. Each replica keeps, per
task named on the chains of the requests it runs, those requests' cancel switches (weakly: a
finished request drops out with its context, so nothing is removed by hand). A task's end is
one PUBLISH on `TASK_END_CHANNEL`; every replica pulls the switches of the requests it runs
under that task: a tool call's process is killed (`gateway.cancellation`), a delegation's wait
ends and the task it waits on is cancelled in turn (`gateway.a2a.hosted_serving`).

Each replica also remembers the last `_ENDED_KEPT` tasks it heard end, so a request made for
one after its end (a worker that has not learnt it yet) is cancelled as it starts, with no
Redis read. Per request with no task on its chain this costs nothing; with one, a set entry
per task. A cancel published while a replica does not listen is lost to it; its calls still
end at their deadline, and the worker learns that its task ended at its next write.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gateway.cancellation import CallCancel
from gateway.delegation.delegation_chain import DelegationChain
from gateway.redis_io import listen_to_channel

TASK_END_CHANNEL = "conclave:cancel-task"  # pub/sub: [task ref ("agent/task id"), reason]
_TASKS_KEPT = 4096  # tasks with requests under them: past this, the emptied ones are dropped
_ENDED_KEPT = 4096  # tasks heard ending, newest kept


class TaskCascade:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._under: dict[str, weakref.WeakSet[CallCancel]] = {}
        self._ended: dict[str, str] = {}  # task -> why it ended, oldest first

    def watch(self, chain: DelegationChain, cancel: CallCancel) -> None:
        """Pull `cancel` when a task on `chain` ends, on whichever replica it ends (at once,
        if one has ended already)."""
        for task in chain.tasks:
            why = self._ended.get(task)
            if why is not None:
                cancel.cancel(why)
                return
            self._under.setdefault(task, weakref.WeakSet()).add(cancel)
        if len(self._under) > _TASKS_KEPT:
            self._under = {task: under for task, under in self._under.items() if under}

    async def ended(self, tasks: Sequence[str], reason: str) -> None:
        """Tasks `tasks` ended: stop what runs under them, everywhere (one PUBLISH each)."""
        for task in tasks:
            await self.redis.publish(TASK_END_CHANNEL, json.dumps([task, reason]))

    def cancel_here(self, task: str, reason: str) -> int:
        """Pull the switch of every request under `task` this replica runs; how many."""
        self._ended[task] = reason
        if len(self._ended) > _ENDED_KEPT:
            del self._ended[next(iter(self._ended))]
        under = list(self._under.pop(task, ()))
        for cancel in under:
            cancel.cancel(reason)
        return len(under)

    async def listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Apply the ends published on `TASK_END_CHANNEL` for good; `task_status` is told once
        subscribed."""
        await listen_to_channel(self.redis, TASK_END_CHANNEL, self._apply, task_status=task_status)

    def _apply(self, data: bytes | str) -> None:
        try:
            task, reason = json.loads(data)
        except (TypeError, ValueError):
            return  # not ours: the channel's name is public to whoever shares the Redis
        self.cancel_here(str(task), str(reason))
